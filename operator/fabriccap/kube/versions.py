"""A resourceVersion as a number, the one rule for every comparison of two.

Kubernetes calls resourceVersions opaque, but every API server backed by etcd (or kine) hands
out its store's revision, one counter for the whole cluster. A version is compared as that
number only when it is one: ASCII digits, at most 20 of them. ``str.isdigit()`` is true of "²"
and "①", which ``int()`` refuses: a watch line or a listing with such a version ended the
informer that read it, and the operator with it.
"""

from __future__ import annotations


def version_number(version: str) -> int | None:
    """``version`` as etcd's revision, or None when it is not one (then it is opaque)."""
    return int(version) if version.isascii() and version.isdigit() and len(version) <= 20 else None
