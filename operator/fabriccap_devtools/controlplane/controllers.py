"""What the control plane adds for real nodes: apiserver flags, kube-controller-manager and
kube-scheduler, and the identities they (and the apiserver, dialling kubelets) use.

Without nodes none of this runs (envtest's shape: tests play the kubelet and the controllers).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fabriccap_devtools.controlplane import pki
from fabriccap_devtools.controlplane.access import write_kubeconfig

KUBE_CONTROLLER_MANAGER = "kube-controller-manager"
KUBE_SCHEDULER = "kube-scheduler"
CLUSTER_NAME = "fabriccap"
# What real nodes and their pods need: DaemonSets roll out (daemonset), nodes that stop
# reporting go Unknown and their pods NotReady (node-lifecycle) and NoExecute taints evict
# (taint-eviction), owners' deletions reach dependents (garbage-collector), pods of deleted
# nodes go (pod-garbage-collector), namespaces can be deleted (namespace), and pods get a
# ServiceAccount token the kubelet can mount (serviceaccount, serviceaccount-token,
# root-ca-certificate-publisher: the kube-root-ca.crt ConfigMap every projected token volume reads).
# Deployments roll out their ReplicaSets' pods (deployment, replicaset: the operator's own
# chart), and PodDisruptionBudgets get a status (disruption). A ResourceClaim is released when its
# pod goes: reservedFor cleared, deallocated, its delete-protection finalizer lifted (resourceclaim;
# without it a claim the scheduler allocated can never be deleted).
NODE_CONTROLLERS: tuple[str, ...] = (
    "daemonset-controller",
    "deployment-controller",
    "replicaset-controller",
    "disruption-controller",
    "node-lifecycle-controller",
    "taint-eviction-controller",
    "garbage-collector-controller",
    "pod-garbage-collector-controller",
    "namespace-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
    "resourceclaim-controller",
)
# Beside simulated nodes (the demo's, whose status the demo writes and whose pods' owners,
# Jobs and ReplicaSets, exist only in the simulation): the garbage collector would delete
# those pods. node-lifecycle stays (it lifts the not-ready taint every new Node is created with,
# without which no DaemonSet pod is scheduled), with a grace long enough that simulated nodes,
# whose Leases nobody renews, never go Unknown while a demo runs.
SIMULATION_SAFE_CONTROLLERS: tuple[str, ...] = tuple(c for c in NODE_CONTROLLERS if c != "garbage-collector-controller")
SIMULATED_NODE_GRACE_SECONDS = 24 * 3600


@dataclass(frozen=True)
class ControllerOptions:
    controllers: tuple[str, ...] = NODE_CONTROLLERS
    # How long a node may stay silent before it is Unknown; the default (50 s) makes tests wait.
    node_monitor_grace_seconds: int = 20


DEFAULT_CONTROLLER_OPTIONS = ControllerOptions()


@dataclass(frozen=True)
class Identities:
    """Client certificates for the components, as files and kubeconfigs in DIR/components."""

    directory: Path

    @property
    def kubelet_client_cert(self) -> Path:
        return self.directory / "apiserver-kubelet-client.crt"

    @property
    def kubelet_client_key(self) -> Path:
        return self.directory / "apiserver-kubelet-client.key"

    @property
    def front_proxy_cert(self) -> Path:
        return self.directory / "front-proxy-client.crt"

    @property
    def front_proxy_key(self) -> Path:
        return self.directory / "front-proxy-client.key"

    def kubeconfig(self, component: str) -> Path:
        return self.directory / f"{component}.kubeconfig"


def issue_identities(directory: Path, paths: pki.PkiPaths, server: str) -> Identities:
    identities = Identities(directory)
    directory.mkdir(parents=True, exist_ok=True)
    # The apiserver dialling kubelets (logs, exec): the kubelet's webhook authorizer asks the
    # apiserver, which lets system:masters do anything.
    _write_pair(
        identities.kubelet_client_cert,
        identities.kubelet_client_key,
        pki.issue_client(paths, "kube-apiserver-kubelet-client", ["system:masters"]),
    )
    # Request-header authentication: kcm and the scheduler read its CA from the
    # extension-apiserver-authentication ConfigMap and log an error twice a second without it.
    _write_pair(identities.front_proxy_cert, identities.front_proxy_key, pki.issue_client(paths, "front-proxy-client"))
    for component in (KUBE_CONTROLLER_MANAGER, KUBE_SCHEDULER):
        user = f"system:{component}"
        write_kubeconfig(identities.kubeconfig(component), server, paths, pki.issue_client(paths, user), user)
    return identities


def _write_pair(cert: Path, key: Path, credentials: pki.ClientCredentials) -> None:
    cert.write_bytes(credentials.cert_pem)
    pki.write_private(key, credentials.key_pem)


def apiserver_node_flags(paths: pki.PkiPaths, identities: Identities) -> list[str]:
    """Replacing ``--authorization-mode=RBAC`` and ``--disable-admission-plugins=ServiceAccount``."""
    return [
        # Kubelets authenticate as system:node:<name>; the Node authorizer grants exactly their
        # rights (their Node and Lease, their pods, tokens for those pods' ServiceAccounts).
        "--authorization-mode=Node,RBAC",
        "--enable-admission-plugins=NodeRestriction",
        f"--kubelet-client-certificate={identities.kubelet_client_cert}",
        f"--kubelet-client-key={identities.kubelet_client_key}",
        f"--kubelet-certificate-authority={paths.ca_cert}",
        # Hostname comes first by default and would need node names to resolve (/etc/hosts).
        "--kubelet-preferred-address-types=InternalIP",
        f"--requestheader-client-ca-file={paths.ca_cert}",
        "--requestheader-allowed-names=front-proxy-client",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        f"--proxy-client-cert-file={identities.front_proxy_cert}",
        f"--proxy-client-key-file={identities.front_proxy_key}",
    ]


def controller_manager_argv(
    binary: Path, identities: Identities, paths: pki.PkiPaths, port: int, options: ControllerOptions
) -> list[str]:
    kubeconfig = identities.kubeconfig(KUBE_CONTROLLER_MANAGER)
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        "--leader-elect=false",
        "--use-service-account-credentials=true",
        f"--service-account-private-key-file={paths.service_account_key}",
        f"--root-ca-file={paths.ca_cert}",
        f"--cluster-name={CLUSTER_NAME}",
        f"--controllers={','.join(options.controllers)}",
        f"--node-monitor-grace-period={options.node_monitor_grace_seconds}s",
    ]


def scheduler_argv(binary: Path, identities: Identities, port: int) -> list[str]:
    kubeconfig = identities.kubeconfig(KUBE_SCHEDULER)
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        "--leader-elect=false",
    ]
