"""API paths of the kinds the project reads or writes: built here and nowhere else."""

from __future__ import annotations

from dataclasses import dataclass

from fabriccap.core.api import GROUP, KIND, PLURAL, VERSION


@dataclass(frozen=True, slots=True)
class ApiResource:
    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def _root(self) -> str:
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    def collection(self, namespace: str | None = None) -> str:
        """The list/watch/create path: one namespace's, or (None) across every namespace."""
        if namespace is not None and not self.namespaced:
            raise ValueError(f"{self.kind} is cluster-scoped")
        scope = f"/namespaces/{namespace}" if namespace is not None else ""
        return f"{self._root}{scope}/{self.plural}"

    def item(self, name: str, namespace: str | None = None) -> str:
        if self.namespaced and namespace is None:
            raise ValueError(f"{self.kind} {name} needs a namespace")
        return f"{self.collection(namespace)}/{name}"

    def status(self, name: str, namespace: str | None = None) -> str:
        return f"{self.item(name, namespace)}/status"


NODES = ApiResource("", "v1", "nodes", "Node", namespaced=False)
PODS = ApiResource("", "v1", "pods", "Pod", namespaced=True)
NAMESPACES = ApiResource("", "v1", "namespaces", "Namespace", namespaced=False)
SECRETS = ApiResource("", "v1", "secrets", "Secret", namespaced=True)
DAEMON_SETS = ApiResource("apps", "v1", "daemonsets", "DaemonSet", namespaced=True)
FABRIC_CAPABILITIES = ApiResource(GROUP, VERSION, PLURAL, KIND, namespaced=False)
RESOURCE_SLICES = ApiResource("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", namespaced=False)
DEVICE_CLASSES = ApiResource("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", namespaced=False)
RESOURCE_CLAIMS = ApiResource("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", namespaced=True)
EVENTS = ApiResource("", "v1", "events", "Event", namespaced=True)
LEASES = ApiResource("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True)
CUSTOM_RESOURCE_DEFINITIONS = ApiResource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", namespaced=False
)

CRD_NAME = f"{PLURAL}.{GROUP}"
