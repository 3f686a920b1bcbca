"""A local Kubernetes control plane (etcd + kube-apiserver) for end-to-end tests and demos,
with real nodes on request.

`binaries` finds or builds the servers; `cluster` runs them (`fabriccap-dev controlplane
up|down`, in ``fabriccap_devtools.cli``). Real nodes: `controllers` (kcm, scheduler, the apiserver's
side), `nodes` (kubelet + containerd per node), `host` (what they change on the machine, and
undoing it), `images` (their container images). Underneath: `pki`, `access` (kubeconfigs),
`processes` (recorded PIDs), `state` (state.json). `binaries` is deliberately not imported
here, so that `python -m fabriccap_devtools.controlplane.binaries` does not load that module twice.
"""

from fabriccap_devtools.controlplane.cluster import (
    ControlPlaneError,
    ControlPlaneInfo,
    LocalControlPlane,
    down,
    kubeconfig_for,
    read_info,
    record_process,
    stop_recorded,
    up,
)

__all__ = [
    "ControlPlaneError",
    "ControlPlaneInfo",
    "LocalControlPlane",
    "down",
    "kubeconfig_for",
    "read_info",
    "record_process",
    "stop_recorded",
    "up",
]
