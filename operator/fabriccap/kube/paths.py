"""API paths of the kinds the project reads or writes: built here and nowhere else.

Every segment of a path (group, version, namespace, plural, name) goes through
``path_segment``: percent-encoded whole, so that no ``?``, ``#`` or whitespace in a name can
start a query or a fragment, and refused when it is empty, ``.`` or ``..`` or holds ``/`` or
``%`` (what the API server itself refuses in a name that appears in a path), so that nothing
can step out of the resource the path is for. Names from objects are checked before they get
here (core.references); this is the last line, and the only place paths are made.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from fabriccap.core.api import GROUP, KIND, PLURAL, VERSION
from fabriccap.core.text import clean_text

_SHOWN = 80  # how much of a refused segment an error message shows


def path_segment(text: str) -> str:
    """``text`` as one segment of an API path; ValueError for text that cannot be one."""
    if text in ("", ".", "..") or "/" in text or "%" in text:
        raise ValueError(f"{clean_text(repr(text), _SHOWN)} cannot be a segment of an API path")
    return quote(text, safe="")


# Objects per LIST page unless a watched kind says otherwise (``kinds.WatchedKind.page_size``):
# ~3-5 MB of JSON per page of realistic Nodes, the largest objects listed. The one default of
# every paginated LIST the project makes, ``KubeClient.list_pages`` included.
DEFAULT_PAGE_SIZE = 250


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
    def rbac_resource(self) -> str:
        """The resource as a ClusterRole's rule and ``kubectl auth can-i`` name it
        (``devicetaintrules.resource.k8s.io``; ``nodes`` in the core group)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @classmethod
    def of(cls, api_version: str, plural: str, kind: str, *, namespaced: bool) -> ApiResource:
        """The resource of ``plural`` in ``api_version`` (``v1`` or ``group/version``)."""
        group, _, version = api_version.rpartition("/")
        return cls(group, version, plural, kind, namespaced)

    @property
    def _root(self) -> str:
        if self.group:
            return f"/apis/{path_segment(self.group)}/{path_segment(self.version)}"
        return f"/api/{path_segment(self.version)}"

    def collection(self, namespace: str | None = None) -> str:
        """The list/watch/create path: one namespace's, or (None) across every namespace."""
        if namespace is not None and not self.namespaced:
            raise ValueError(f"{self.kind} is cluster-scoped")
        scope = f"/namespaces/{path_segment(namespace)}" if namespace is not None else ""
        return f"{self._root}{scope}/{path_segment(self.plural)}"

    def item(self, name: str, namespace: str | None = None) -> str:
        if self.namespaced and namespace is None:
            raise ValueError(f"{self.kind} {clean_text(name, _SHOWN)} needs a namespace")
        return f"{self.collection(namespace)}/{path_segment(name)}"

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
# KEP-5055: v1beta2 from Kubernetes 1.36; v1alpha3 in 1.33-1.35, served only with
# --runtime-config=resource.k8s.io/v1alpha3=true (kinds.DEVICE_TAINT_RULE reads the newest served).
DEVICE_TAINT_RULES = ApiResource("resource.k8s.io", "v1beta2", "devicetaintrules", "DeviceTaintRule", namespaced=False)
# Karpenter's objects (elastic pools): read, never written.
NODE_POOLS = ApiResource("karpenter.sh", "v1", "nodepools", "NodePool", namespaced=False)
NODE_CLAIMS = ApiResource("karpenter.sh", "v1", "nodeclaims", "NodeClaim", namespaced=False)
EC2_NODE_CLASSES = ApiResource("karpenter.k8s.aws", "v1", "ec2nodeclasses", "EC2NodeClass", namespaced=False)
RESOURCE_CLAIMS = ApiResource("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", namespaced=True)
EVENTS = ApiResource("", "v1", "events", "Event", namespaced=True)
LEASES = ApiResource("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True)
CUSTOM_RESOURCE_DEFINITIONS = ApiResource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", namespaced=False
)

CRD_NAME = f"{PLURAL}.{GROUP}"


def pod_log(namespace: str, name: str) -> str:
    """The pods/log subresource of one pod (the container, limitBytes... go in the query).
    Its segments come from watched Pods; they are escaped all the same (once: PODS.item does)."""
    return f"{PODS.item(name, namespace)}/log"
