"""A resourceVersion as a number, the one rule for every comparison of two.

Kubernetes calls resourceVersions opaque, but every API server backed by etcd (or kine) hands
out its store's revision, one counter for the whole cluster. A version is compared as that
number only when it is one: ASCII digits (``core.text.is_decimal``), at most 20 of them. A watch
line or a listing with a version of "²" ended the informer that read it, and the operator with it.
"""

from __future__ import annotations

from fabriccap.core.text import is_decimal


def version_number(version: str) -> int | None:
    """``version`` as etcd's revision, or None when it is not one (then it is opaque)."""
    return int(version) if is_decimal(version) and len(version) <= 20 else None
