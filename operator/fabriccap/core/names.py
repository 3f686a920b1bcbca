"""Deterministic FabricCapability names and label values.

A name must be a DNS-1123 label (the strictest form Kubernetes uses, so the name also fits
label values and other objects' names), depend only on (fabric, pool key, pool value) and
never collide for two different triples.

The readable form ``<fabric>-<value>`` (``efa-p5-training``) is used only when it is exact:
the pool comes from the first configured pool key and the value is already a DNS label that
fits. Every other pool gets ``<fabric>-<sanitized value>-<8 hex digits>`` where the digits
hash the whole triple, so ``P5_Training`` under one key and ``p5-training`` under another,
or the same value under two keys, still get distinct names.
"""

from __future__ import annotations

import hashlib
import re

MAX_NAME_LENGTH = 63
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_NOT_DNS = re.compile(r"[^a-z0-9-]+")
_HASH_LENGTH = 8


def is_dns_label(text: str) -> bool:
    return len(text) <= MAX_NAME_LENGTH and bool(_DNS_LABEL.match(text))


def is_label_value(text: str) -> bool:
    return len(text) <= 63 and bool(_LABEL_VALUE.match(text))


def _sanitize(text: str) -> str:
    return re.sub(r"-{2,}", "-", _NOT_DNS.sub("-", text.lower())).strip("-")


def capability_name(fabric: str, pool_key: str, pool_value: str, primary_pool_key: str) -> str:
    readable = f"{fabric}-{pool_value}"
    if pool_key == primary_pool_key and is_dns_label(readable):
        return readable
    digest = hashlib.sha256(f"{fabric}\x00{pool_key}\x00{pool_value}".encode()).hexdigest()[:_HASH_LENGTH]
    room = MAX_NAME_LENGTH - len(fabric) - len(digest) - 2
    stem = _sanitize(pool_value)[:room].strip("-")
    return f"{fabric}-{stem}-{digest}" if stem else f"{fabric}-{digest}"
