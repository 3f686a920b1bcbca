"""The table's paths (core.workload_kinds) exist in the CRDs the projects released: each pod
template path, and each path where a TrainJob chooses its pool, leads through the CRD's
openAPIV3Schema to an object whose ``spec`` holds what the policy and explain read
(``nodeSelector``, ``affinity``; a pod template's ``containers`` too). The CRDs come from the
Go module proxy at pinned versions (fabriccap_devtools.workload_crds), never retyped: a path
that a release renamed or dropped fails here, not silently at admission.

Needs a Go toolchain and the module proxy (``go mod download``); without Go the tests skip on a
laptop and fail under CI=true.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

import pytest
import yaml

from fabriccap.core.workload_kinds import (
    JOBSET,
    LEADERWORKERSET,
    PYTORCHJOB,
    RAYCLUSTER,
    RAYJOB,
    TRAINJOB,
    WorkloadKind,
    parse_path,
)
from fabriccap_devtools import workload_crds
from fabriccap_devtools.gotools import GoToolError

Schema = dict[str, Any]

RELEASES: dict[WorkloadKind, tuple[workload_crds.ReleasedCrd, ...]] = {
    TRAINJOB: (workload_crds.TRAINJOB, workload_crds.TRAINJOB_V2_1),
    JOBSET: (workload_crds.JOBSET,),
    PYTORCHJOB: (workload_crds.PYTORCHJOB,),
    LEADERWORKERSET: (workload_crds.LEADERWORKERSET,),
    RAYJOB: (workload_crds.RAYJOB,),
    RAYCLUSTER: (workload_crds.RAYCLUSTER,),
}


def schema_of(crd: workload_crds.ReleasedCrd, version: str) -> Schema:
    if shutil.which("go") is None and os.environ.get("CI", "").lower() != "true":
        pytest.skip("reading the released CRDs needs a Go toolchain on PATH (go mod download)")
    try:
        document = yaml.safe_load(crd.file().read_text())
    except GoToolError as error:
        pytest.fail(str(error))
    (served,) = [v for v in document["spec"]["versions"] if v["name"] == version]
    return dict(served["schema"]["openAPIV3Schema"])


def reach(schema: Schema, path: str) -> list[Schema]:
    """The schemas at ``path`` (the table's grammar); empty when the CRD has no such field."""
    found = [schema]
    for step in parse_path(path):
        following: list[Schema] = []
        for node in found:
            if step.field == "*":
                child = node.get("additionalProperties")
            else:
                child = (node.get("properties") or {}).get(step.field)
            if not isinstance(child, dict):
                continue
            if step.iterate:
                child = child.get("items")
                if not isinstance(child, dict):
                    continue
                if step.where is not None:
                    holder = child
                    if step.where_list is not None:
                        holder = ((child.get("properties") or {}).get(step.where_list) or {}).get("items") or {}
                    if step.where[0] not in (holder.get("properties") or {}):
                        continue
            following.append(child)
        found = following
    return found


def pod_spec_fields(template: Schema) -> set[str]:
    spec = (template.get("properties") or {}).get("spec") or {}
    return set(spec.get("properties") or {})


@pytest.mark.parametrize("kind", list(RELEASES), ids=lambda kind: kind.group_kind)
def test_every_pod_template_path_is_in_the_released_crd(kind: WorkloadKind) -> None:
    for crd in RELEASES[kind]:
        schema = schema_of(crd, kind.versions[0])
        for path in kind.pod_templates:
            templates = reach(schema, path)
            assert templates, f"{crd.module}@{crd.version}: no {path}"
            for template in templates:
                assert {"containers", "nodeSelector", "affinity"} <= pod_spec_fields(template), (crd.version, path)


def test_each_trainer_release_chooses_its_pool_at_a_path_of_the_table() -> None:
    """Trainer v2.1.0 by podTemplateOverrides (filtered on targetJobs[].name), v2.3.0 by
    runtimePatches: each release holds one of the table's paths, and every path is some
    release's."""
    held: dict[str, list[str]] = {}
    for crd in RELEASES[TRAINJOB]:
        schema = schema_of(crd, TRAINJOB.versions[0])
        held[crd.version] = [
            path
            for path in TRAINJOB.selector_templates
            if any({"nodeSelector", "affinity"} <= pod_spec_fields(t) for t in reach(schema, path))
        ]
    assert held == {
        "v2.3.0": [TRAINJOB.selector_templates[0]],
        "v2.1.0": ["spec.podTemplateOverrides[targetJobs[name=node]]"],
    }
    assert TRAINJOB.resources_per_node == "spec.trainer.resourcesPerNode"
    for crd in RELEASES[TRAINJOB]:
        (resources,) = reach(schema_of(crd, TRAINJOB.versions[0]), "spec.trainer.resourcesPerNode")
        assert {"limits", "requests"} <= set(resources["properties"]), crd.version
