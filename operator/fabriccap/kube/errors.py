"""Errors shared by modules that must stay cheap to import (the CLI imports these eagerly)."""

from __future__ import annotations


class KubeError(RuntimeError):
    """A failed API call or an unreachable cluster; ``status`` is the HTTP status, if any."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class UnreachableError(KubeError):
    """A request that got no answer at all: refused, cut, or timed out (HTTP status none)."""


class WatchLineError(KubeError):
    """A watch line that is not JSON at all (or too long to be an object): the stream is
    garbled, so it is ended and resumed from the last good resourceVersion. ``cause`` is short
    and stable (it keys a once-only log line and names the rejection)."""

    def __init__(self, message: str, cause: str) -> None:
        super().__init__(message)
        self.cause = cause


class ResponseTooLargeError(KubeError):
    """An answer longer than the reader allows: not read further (and not retried as it is)."""

    @classmethod
    def past(
        cls, what: str, limit: int, *, length: int | None = None, decompressed: bool = False
    ) -> ResponseTooLargeError:
        """The one wording: the announced ``length`` when there is one, else how far it was read."""
        if length is not None:
            return cls(f"{what}: the answer is {length} bytes (more than {limit})")
        return cls(
            f"{what}: the answer is more than {limit} bytes{' decompressed' if decompressed else ''}; not read further"
        )
