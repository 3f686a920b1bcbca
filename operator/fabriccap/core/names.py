"""Deterministic FabricCapability names and label values.

A name must be a DNS-1123 label (the strictest form Kubernetes uses, so the name also fits
label values and other objects' names), depend only on the set of pools present and never be
the name of another (fabric, pool key, pool value). Pool values come from node labels (and
NodePool names), which anyone who can label a node controls: two pools sharing one name would
overwrite each other's status forever, so uniqueness must hold by construction, against values
chosen to collide.

- The readable form ``<fabric>-<value>`` (``efa-p5-training``, ``efa-gpu-spot`` for a Karpenter
  NodePool) is used for a pool of any key when the value is a DNS label that fits, the name
  cannot be mistaken for a hashed one (it does not end in a digest-shaped segment), it does not
  start with a longer configured fabric's ``<name>-`` (fabric ``aks`` and pool ``rdma-x`` would
  otherwise meet fabric ``aks-rdma`` and pool ``x``), and no other present pool of the fabric
  (same value, another key) would get the same name.
- Every other pool gets ``<fabric>-<sanitized value>-<digest>``, where the digest is 26 base32
  characters (130 bits) of a SHA-256 over the whole triple: finding two triples with one digest
  is out of reach (about 2^65 hashes), so no label value can be chosen to take another pool's
  name. In a collision every pool of it is hashed, so which pool came first never matters: the
  names depend on the set of pools, not on the order they were seen in. The status says why
  (``status.naming``).

Readable names never end in a digest-shaped segment and hashed names always do, so the two
forms never meet. The publisher still checks each object's pool annotations before writing
(``fabriccap_name_conflicts``), as a last line against objects made by hand.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable
from typing import NamedTuple

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


class Naming(NamedTuple):
    """A pool's name, and why it is hashed when it is."""

    name: str
    hashed: bool = False
    reason: str | None = None  # "NotDNSLabel" | "Reserved" | "Collision"
    message: str | None = None


def hashed_name(fabric: str, pool_key: str, pool_value: str) -> str:
    """``<fabric>-<sanitized value>-<digest>``: unique per triple, whatever the value."""
    digest = _digest(fabric, pool_key, pool_value)
    room = MAX_NAME_LENGTH - len(fabric) - len(digest) - 2
    stem = _sanitize(pool_value)[:room].strip("-")
    return f"{fabric}-{stem}-{digest}" if stem else f"{fabric}-{digest}"


def _static_naming(fabric: str, pool_key: str, pool_value: str, fabrics: Iterable[str]) -> Naming:
    """The name a pool gets when no other present pool shares its value."""
    readable = f"{fabric}-{pool_value}"
    # Only longer fabric names can be shadowed: `aks-rdma-x` is aks-rdma's to take, so fabric
    # `aks` gives up the readable form for values starting with `rdma-`.
    longer = [other for other in fabrics if len(other) > len(fabric)]
    if not is_dns_label(readable):
        why = "NotDNSLabel", f"pool value {pool_value!r} of {pool_key} does not make a DNS label ({fabric}-<value>)"
    elif looks_hashed(readable):
        why = "Reserved", f"{readable} ends like a hashed name, which only hashed names may"
    elif any(readable.startswith(f"{other}-") for other in longer):
        why = "Reserved", f"{readable} starts like a name of fabric {next(o for o in longer if readable.startswith(o))}"
    else:
        return Naming(readable)
    reason, message = why
    return Naming(hashed_name(fabric, pool_key, pool_value), True, reason, message)


MAX_NAMED_POOLS = 5


def pool_names(
    fabric: str, pools: Iterable[tuple[str, str]], fabrics: Iterable[str] = ()
) -> dict[tuple[str, str], Naming]:
    """The name of each (pool key, pool value) of ``fabric`` among the pools present; ``fabrics``
    are every configured fabric's name (for the prefix rule above)."""
    fabric_list = list(fabrics)
    namings = {pool: _static_naming(fabric, pool[0], pool[1], fabric_list) for pool in set(pools)}
    readable: dict[str, list[tuple[str, str]]] = {}
    for pool, naming in namings.items():
        if not naming.hashed:
            readable.setdefault(naming.name, []).append(pool)
    for name, claimants in readable.items():
        if len(claimants) < 2:
            continue
        claimants.sort()
        shown = ", ".join(f"{key}={value}" for key, value in claimants[:MAX_NAMED_POOLS])
        message = f"pools {shown} would all be named {name}: each gets the hashed form"
        for key, value in claimants:
            namings[(key, value)] = Naming(hashed_name(fabric, key, value), True, "Collision", message)
    return namings


def readable_value(name: str, fabrics: Iterable[str]) -> str | None:
    """The pool value a readable name ``<fabric>-<value>`` is made of; None for a name no pool
    gets in the readable form (hashed, not a DNS label, of no configured fabric). The longest
    fabric that prefixes the name is its fabric: a shorter one gives up such names (Reserved)."""
    if not is_dns_label(name) or looks_hashed(name):
        return None
    prefixes = [fabric for fabric in fabrics if name.startswith(f"{fabric}-") and len(name) > len(fabric) + 1]
    return name[len(max(prefixes, key=len)) + 1 :] if prefixes else None


def capability_name(fabric: str, pool_key: str, pool_value: str, fabrics: Iterable[str] = ()) -> str:
    """The name of one pool of ``fabric`` when no other present pool shares its value."""
    return _static_naming(fabric, pool_key, pool_value, list(fabrics)).name
