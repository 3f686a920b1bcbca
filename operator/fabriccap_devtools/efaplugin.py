"""The test EFA device plugin as real nodes run it: its DaemonSet, and its control files.

The DaemonSet is shaped like the aws/eks-charts ``stable/aws-efa-k8s-device-plugin`` chart
(v0.5.20, appVersion v0.5.13) installed as release ``aws-efa-k8s-device-plugin`` in
kube-system: the same name, the chart's labels on the DaemonSet (the pods carry only
``name``, as the chart's do), selector, hostNetwork, securityContext, priority class,
tolerations, requests and device-plugin hostPath. It differs in the image (built here,
``images``), the instance types it selects, a memory limit (the machine is shared: a plugin
that leaked would take memory from other people's tests), and the hostPath holding the health
files, which every node binds to a directory of its own (``RealNode.efa_state_dir``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from fabriccap_devtools.controlplane.images import EFA_PLUGIN_IMAGE
from fabriccap_devtools.world import EFA_DS, INSTANCE_TYPE, KUBE_SYSTEM

CHART_VERSION = "v0.5.20"
APP_VERSION = "v0.5.13"
POD_SELECTOR = {"name": EFA_DS}
STATE_DIR_IN_POD = "/var/lib/fabriccap-efa"
UNHEALTHY_FILE = "unhealthy"
COUNT_FILE = "count"
DEFAULT_INSTANCE_TYPES = ("p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge", "p4d.24xlarge", "p4de.24xlarge")


def daemon_set(
    *, devices: int = 4, instance_types: Sequence[str] = DEFAULT_INSTANCE_TYPES, name: str = EFA_DS
) -> dict[str, Any]:
    """The plugin's DaemonSet: every node of `instance_types` advertises `devices` devices
    (unless its count file says otherwise)."""
    labels = {
        "helm.sh/chart": f"aws-efa-k8s-device-plugin-{CHART_VERSION}",
        "app.kubernetes.io/name": EFA_DS,
        "app.kubernetes.io/instance": EFA_DS,
        "app.kubernetes.io/version": APP_VERSION,
        "app.kubernetes.io/managed-by": "Helm",
    }
    container = {
        "name": EFA_DS,
        "image": EFA_PLUGIN_IMAGE,
        "imagePullPolicy": "Never",
        "env": [
            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "EFA_DEVICE_COUNT", "value": str(devices)},
        ],
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            # uid 0 owns the kubelet's socket directory; no privilege is needed beyond that.
            "runAsNonRoot": False,
        },
        "resources": {"requests": {"cpu": "10m", "memory": "20Mi"}, "limits": {"memory": "64Mi"}},
        "volumeMounts": [
            {"name": "device-plugin", "mountPath": "/var/lib/kubelet/device-plugins"},
            {"name": "fabriccap-efa", "mountPath": STATE_DIR_IN_POD, "readOnly": True},
        ],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": KUBE_SYSTEM, "labels": labels},
        "spec": {
            "selector": {"matchLabels": dict(POD_SELECTOR)},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": dict(POD_SELECTOR)},
                "spec": {
                    "automountServiceAccountToken": False,
                    "hostNetwork": True,
                    "priorityClassName": "system-node-critical",
                    "terminationGracePeriodSeconds": 5,
                    "tolerations": [
                        {"key": "CriticalAddonsOnly", "operator": "Exists"},
                        {"key": "aws.amazon.com/efa", "operator": "Exists", "effect": "NoSchedule"},
                        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                    ],
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {
                                        "matchExpressions": [
                                            {"key": INSTANCE_TYPE, "operator": "In", "values": list(instance_types)},
                                            {
                                                "key": "eks.amazonaws.com/compute-type",
                                                "operator": "NotIn",
                                                "values": ["auto"],
                                            },
                                        ]
                                    }
                                ]
                            }
                        }
                    },
                    "containers": [container],
                    "volumes": [
                        {"name": "device-plugin", "hostPath": {"path": "/var/lib/kubelet/device-plugins"}},
                        {"name": "fabriccap-efa", "hostPath": {"path": STATE_DIR_IN_POD, "type": "Directory"}},
                    ],
                },
            },
        },
    }


def set_unhealthy(state_dir: Path, devices: Iterable[str]) -> None:
    """Mark devices (``efa3``, or ``all``) unhealthy on one node; an empty list heals them all."""
    _write_atomically(state_dir / UNHEALTHY_FILE, "".join(f"{device}\n" for device in devices))


def set_device_count(state_dir: Path, count: int | None) -> None:
    """Advertise `count` devices on one node; None goes back to the DaemonSet's count."""
    if count is None:
        (state_dir / COUNT_FILE).unlink(missing_ok=True)
        return
    if count < 0:
        raise ValueError(f"a device count cannot be negative ({count})")
    _write_atomically(state_dir / COUNT_FILE, f"{count}\n")


def _write_atomically(path: Path, text: str) -> None:
    # The plugin polls these files: it must never read half of one.
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text)
    os.replace(temporary, path)
