"""Where the objects behind a workload's lookups are read: one GET each.

Used by the operator (cached, in the background) and by a live ``fabriccap evaluate`` (once).
The path is made by ``ApiResource`` like every other: the owner's name and API version came
from a pod's creator, were checked when the pod became facts (core.references), and are
checked again as path segments here. The namespace is always the pod's own.
"""

from __future__ import annotations

from fabriccap.core.references import is_api_version, is_object_name
from fabriccap.core.text import clean_text
from fabriccap.core.workloads import CLAIM_LOOKUP_KINDS, OWNER_LOOKUP_KINDS, LookupKey
from fabriccap.kube.errors import KubeError, UnreachableError
from fabriccap.kube.media import JSON, METADATA_ONLY
from fabriccap.kube.paths import ApiResource

# A claim is always read in resource.k8s.io/v1, whatever version wrote it; an owner in the
# version its reference names (the table's row says which kinds are read at all).
CLAIM_API_VERSION = "resource.k8s.io/v1"
# An object read by a lookup is refused beyond this many bytes of JSON. No object can be
# written through the API with a body over 3 MiB (the API server's request limit); the rest
# is room for what the server adds (managedFields, status). A reply larger than that is not
# an owner: it is an answer the operator must not hold in memory (reliability round 3, S4).
MAX_LOOKUP_BYTES = 4 * 1024 * 1024
# A lookup answered so has no further owner: the object is gone, or a kind this cluster does
# not serve (404), or one the reader may not read (403). Its nearest known owner is the top.
NO_FURTHER_OWNER_STATUSES = frozenset({403, 404})


def may_answer_if_asked_again(error: KubeError) -> bool:
    """Whether a lookup that failed so may be answered if asked again soon: no answer at all
    (refused, cut, timed out), priority and fairness shedding load (429), or the server's own
    failure (5xx). Any other answer (403, 404, 400, a 200 that is not JSON, ...) is the one it
    will give again; so is a request this client refuses to send."""
    status = error.status
    return isinstance(error, UnreachableError) or (status is not None and (status == 429 or status >= 500))


def lookup_path(key: LookupKey) -> str:
    """The GET path of ``key``'s object, in ``key.namespace``; ValueError for a key that names
    no object an API server could hold."""
    if key.is_claim:
        plural, api_version = CLAIM_LOOKUP_KINDS[key.kind], CLAIM_API_VERSION
    else:
        row = OWNER_LOOKUP_KINDS.get(key.owner_key[0])
        if row is None:
            raise ValueError(
                f"{clean_text(key.kind, 80)} ({clean_text(key.api_version, 80)}) is not a kind fabriccap reads"
            )
        plural, api_version = row.plural, key.api_version
    if not is_api_version(api_version) or not is_object_name(key.name):
        raise ValueError(f"{key.kind} {clean_text(key.name, 80)} ({clean_text(api_version, 80)}) is not an object name")
    return ApiResource.of(api_version, plural, key.kind, namespaced=True).item(key.name, key.namespace)


def lookup_accept(key: LookupKey) -> str:
    """What a lookup asks to be sent: of an owner, its metadata alone (its own owner reference
    is all that is read there, and a Job or a JobSet carries a pod template or several); of a
    claim, the whole object (the device classes are in its spec)."""
    return JSON if key.is_claim else METADATA_ONLY
