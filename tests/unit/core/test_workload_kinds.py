"""The one table of workload kinds: its paths parse, the walker finds what the paths say in
real-shaped objects (and nothing, never an error, in broken ones), and kinds are known by
group and kind."""

from __future__ import annotations

from typing import Any

import pytest

from fabriccap.core.workload_kinds import (
    ADMITTED,
    BATCH_JOB,
    JOBSET,
    POD,
    PYTORCHJOB,
    TRAINJOB,
    VOLCANO_JOB,
    WORKLOAD_KINDS,
    find,
    kind_of,
    parse_path,
    walk,
)


@pytest.mark.parametrize("kind", WORKLOAD_KINDS, ids=lambda kind: kind.group_kind)
def test_every_path_of_the_table_parses(kind: Any) -> None:
    for path in (*kind.pod_templates, *kind.selector_templates):
        parse_path(path)
    assert kind.request_field and kind.source and kind.owner_from_pod


def test_identities_are_unique_and_the_issue_kinds_are_admitted() -> None:
    assert len({kind.group_kind for kind in WORKLOAD_KINDS}) == len(WORKLOAD_KINDS)
    assert {kind.kind for kind in ADMITTED} == {
        "TrainJob", "JobSet", "PyTorchJob", "MPIJob", "LeaderWorkerSet", "HyperPodPyTorchJob",
        "Job", "RayJob", "RayCluster", "Pod",
    }  # fmt: skip
    assert VOLCANO_JOB.group_kind == "Job.batch.volcano.sh" and BATCH_JOB.group_kind == "Job.batch"


def test_a_kind_its_pods_name_by_a_label_is_read_for_its_uid() -> None:
    """A label may carry no uid (a LeaderWorkerSet's pods never do), and an Event needs one."""
    assert [kind.kind for kind in WORKLOAD_KINDS if kind.uid_from_read] == ["JobSet", "LeaderWorkerSet"]
    assert all(kind.read_for_owner for kind in WORKLOAD_KINDS if kind.uid_from_read)


def test_a_bad_path_is_refused() -> None:
    malformed = ("spec..x", "spec.x[", "spec.x[name=]", "spec/x", "spec.x[l[name=a]", "spec.x[[name=a]]")
    for path in (*malformed, "spec.x[]\n", "spec.x[l[name=a]]\n"):  # $ alone takes a final newline
        with pytest.raises(ValueError):
            parse_path(path)


def test_the_walker_follows_lists_maps_and_filters_with_json_pointers() -> None:
    jobset = {"spec": {"replicatedJobs": [{"name": "a", "template": {"spec": {"template": {"spec": {"x": 1}}}}}, {}]}}
    assert list(walk(jobset, JOBSET.pod_templates[0])) == [
        ("/spec/replicatedJobs/0/template/spec/template", {"spec": {"x": 1}})
    ]
    pytorch = {"spec": {"pytorchReplicaSpecs": {"Master": {"template": {"spec": {}}}, "Worker/1": {"template": {}}}}}
    assert [pointer for pointer, _ in walk(pytorch, PYTORCHJOB.pod_templates[0])] == [
        "/spec/pytorchReplicaSpecs/Master/template",
        "/spec/pytorchReplicaSpecs/Worker~11/template",
    ]
    node = {"name": "node", "template": {"spec": {"template": {"spec": {"nodeSelector": {"k": "v"}}}}}}
    trainjob = {"spec": {"runtimePatches": [{"trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": "launcher", "template": {"spec": {"template": {}}}}, node]}}}}]}}  # fmt: skip
    assert [pointer for pointer, _ in walk(trainjob, TRAINJOB.selector_templates[0])] == [
        "/spec/runtimePatches/0/trainingRuntimeSpec/template/spec/replicatedJobs/1/template/spec/template"
    ]
    assert list(walk({"spec": {}}, POD.pod_templates[0])) == [("", {"spec": {}})]
    overrides = {"spec": {"podTemplateOverrides": [
        {"targetJobs": [{"name": "launcher"}], "spec": {}},
        {"targetJobs": "x"},
        {"targetJobs": [None, {"name": "dataset-initializer"}, {"name": "node"}], "spec": {"nodeSelector": {}}},
    ]}}  # fmt: skip
    assert [pointer for pointer, _ in walk(overrides, TRAINJOB.selector_templates[1])] == [
        "/spec/podTemplateOverrides/2"
    ]


@pytest.mark.parametrize("broken", [None, 3, "x", [], {"spec": None}, {"spec": {"replicatedJobs": "x"}},
                                    {"spec": {"replicatedJobs": [None, 1, {"template": []}]}}])  # fmt: skip
def test_the_walker_finds_nothing_in_broken_objects(broken: Any) -> None:
    assert list(walk(broken, JOBSET.pod_templates[0])) == []


def test_kinds_are_known_by_group() -> None:
    assert kind_of("batch/v1", "Job") is BATCH_JOB
    assert kind_of("batch.volcano.sh/v1alpha1", "Job") is VOLCANO_JOB
    assert kind_of("evil.example/v1", "TrainJob") is None
    assert kind_of("trainer.kubeflow.org/v1alpha1", "TrainJob") is TRAINJOB


def test_find_takes_what_kubectl_takes() -> None:
    assert find("trainjob") is TRAINJOB and find("trainjobs") is TRAINJOB and find("TrainJob") is TRAINJOB
    assert find("job") is BATCH_JOB and find("jobs.batch") is BATCH_JOB
    assert find("jobs.batch.volcano.sh") is VOLCANO_JOB and find("job.batch.volcano.sh") is VOLCANO_JOB
    assert find("nothing") is None
