"""Where the objects behind a workload's lookups are read: one GET each.

Used by the operator (cached, in the background) and by a live ``fabriccap evaluate`` (once).
"""

from __future__ import annotations

from fabriccap.core.workloads import CLAIM_LOOKUP_KINDS, OWNER_LOOKUP_KINDS, LookupKey

# The API versions a lookup reads a kind in when the reference does not say.
DEFAULT_API_VERSIONS = {
    "Job": "batch/v1",
    "JobSet": "jobset.x-k8s.io/v1alpha2",
    "ReplicaSet": "apps/v1",
    "ResourceClaimTemplate": "resource.k8s.io/v1",
    "ResourceClaim": "resource.k8s.io/v1",
}


def lookup_path(key: LookupKey) -> str:
    plural = OWNER_LOOKUP_KINDS.get(key.kind) or CLAIM_LOOKUP_KINDS[key.kind]
    api_version = key.api_version or DEFAULT_API_VERSIONS[key.kind]
    # A claim is always read in resource.k8s.io/v1, whatever version wrote it.
    if key.is_claim:
        api_version = DEFAULT_API_VERSIONS[key.kind]
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    return f"{base}/namespaces/{key.namespace}/{plural}/{key.name}"
