"""Deterministic FabricCapability names and label values.

A name must be a DNS-1123 label (the strictest form Kubernetes uses, so the name also fits
label values and other objects' names), depend only on (fabric, pool key, pool value) and
never be the name of another triple. Pool values come from node labels, which anyone who
can label a node controls: two pools sharing one name would overwrite each other's status
forever, so uniqueness must hold by construction, against values chosen to collide.

- The readable form ``<fabric>-<value>`` (``efa-p5-training``) is used only when it is exact:
  the pool comes from the first configured pool key, the value is already a DNS label that
  fits, the name cannot be mistaken for a hashed one (it does not end in a digest-shaped
  segment), and it does not start with another configured fabric's ``<name>-`` (fabric
  ``aks`` and pool ``rdma-x`` would otherwise meet fabric ``aks-rdma`` and pool ``x``).
  Within one fabric and one key, ``value -> <fabric>-<value>`` is one-to-one.
- Every other pool gets ``<fabric>-<sanitized value>-<digest>``, where the digest is 26
  base32 characters (130 bits) of a SHA-256 over the whole triple: finding two triples with
  one digest is out of reach (about 2^65 hashes), so no label value can be chosen to take
  another pool's name.

Readable names never end in a digest-shaped segment and hashed names always do, so the two
forms never meet. The publisher still checks each object's pool annotations before writing
(``fabriccap_name_conflicts``), as a last line against objects made by hand.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable

MAX_NAME_LENGTH = 63
MAX_SUBDOMAIN_LENGTH = 253
# Matched whole (fullmatch): `$` alone also matches before a final newline, and "p5\n" is no label.
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_NOT_DNS = re.compile(r"[^a-z0-9-]+")
DIGEST_LENGTH = 26  # base32 characters of the first 16 bytes of SHA-256: 128 bits, 26 symbols
_DIGEST_SEGMENT = re.compile(rf"(^|-)[a-z2-7]{{{DIGEST_LENGTH}}}$")


def is_dns_label(text: str) -> bool:
    return len(text) <= MAX_NAME_LENGTH and _DNS_LABEL.fullmatch(text) is not None


def is_dns_subdomain(text: str) -> bool:
    """A DNS-1123 subdomain of at most 253 characters: what the API server accepts as the name
    of most kinds (and of every custom resource)."""
    return len(text) <= MAX_SUBDOMAIN_LENGTH and _DNS_SUBDOMAIN.fullmatch(text) is not None


def is_label_value(text: str) -> bool:
    return len(text) <= 63 and _LABEL_VALUE.fullmatch(text) is not None


def looks_hashed(name: str) -> bool:
    """Whether ``name`` ends in a digest-shaped segment (only hashed names may)."""
    return bool(_DIGEST_SEGMENT.search(name))


def _sanitize(text: str) -> str:
    return re.sub(r"-{2,}", "-", _NOT_DNS.sub("-", text.lower())).strip("-")


def _digest(fabric: str, pool_key: str, pool_value: str) -> str:
    raw = hashlib.sha256(f"{fabric}\x00{pool_key}\x00{pool_value}".encode()).digest()[:16]
    return base64.b32encode(raw).decode().rstrip("=").lower()


def capability_name(
    fabric: str, pool_key: str, pool_value: str, primary_pool_key: str, fabrics: Iterable[str] = ()
) -> str:
    """The FabricCapability name of (fabric, pool key, pool value); ``fabrics`` are every
    configured fabric's name (for the prefix rule above)."""
    readable = f"{fabric}-{pool_value}"
    # Only longer fabric names can be shadowed: `aks-rdma-x` is aks-rdma's to take, so fabric
    # `aks` gives up the readable form for values starting with `rdma-`.
    longer = [other for other in fabrics if len(other) > len(fabric)]
    if (
        pool_key == primary_pool_key
        and is_dns_label(readable)
        and not looks_hashed(readable)
        and not any(readable.startswith(f"{other}-") for other in longer)
    ):
        return readable
    digest = _digest(fabric, pool_key, pool_value)
    room = MAX_NAME_LENGTH - len(fabric) - len(digest) - 2
    stem = _sanitize(pool_value)[:room].strip("-")
    return f"{fabric}-{stem}-{digest}" if stem else f"{fabric}-{digest}"
