"""The media types of what the operator sends and asks for (no HTTP here: ``kube.lookups`` and
an offline evaluation name them without importing the client)."""

from __future__ import annotations

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
# An object's metadata alone (meta.k8s.io/v1 PartialObjectMetadata), as client-go's metadata
# client asks for it: every kube-apiserver resource, custom ones too, serves it, and a server
# that does not takes the second choice and sends the whole object.
METADATA_ONLY = f"{JSON};as=PartialObjectMetadata;g=meta.k8s.io;v=v1,{JSON}"
