"""`fabriccap explain KIND/NAMESPACE/NAME -f FILE`: the pool a workload selects, what it
requests, and the exact change for its kind, or "nothing to change"; bad queries are one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fabriccap_devtools.world import NODEGROUP, owner_reference, workload_pod
from support.builders import healthy_pool
from support.cli import assert_one_line_error, run, write_json
from support.nccl import REPO_ROOT

EFA = "vpc.amazonaws.com/efa"


def template(pool: str, limits: dict[str, str], *, affinity: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "node", "image": "x", "resources": {"limits": limits}}]}
    if affinity:
        term = {"matchExpressions": [{"key": NODEGROUP, "operator": "In", "values": [pool]}]}
        spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
        }
    else:
        spec["nodeSelector"] = {NODEGROUP: pool}
    return {"spec": spec}


def jobset(name: str, limits: dict[str, str], **kw: Any) -> dict[str, Any]:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {
            "replicatedJobs": [{"name": "node", "template": {"spec": {"template": template("p5", limits, **kw)}}}]
        },
    }


def explain_json(tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str, *objects: Any) -> dict[str, Any]:
    snapshot = write_json(
        tmp_path / "cluster.json", {"apiVersion": "v1", "kind": "List", "items": [*healthy_pool(), *objects]}
    )
    code, out, err = run(["explain", target, "-f", snapshot, "-o", "json"], capsys)
    assert (code, err) == (0, "")
    result: dict[str, Any] = json.loads(out)
    return result


def test_a_jobset_that_forgets_efa_is_told_what_to_set_in_its_manifest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A JobSet's template cannot be patched in place (its webhook refuses it): the change is the
    path and value to set in the manifest, not a kubectl patch (review 66d F5)."""
    result = explain_json(tmp_path, capsys, "jobset/ml/bert", jobset("bert", {"nvidia.com/gpu": "8"}, affinity=True))
    assert (result["pool"], result["ready"]) == (f"{NODEGROUP}=p5", True)
    assert result["change"] == (
        "in the manifest, set spec.replicatedJobs[0].template.spec.template.spec.containers[0]"
        '.resources.limits["vpc.amazonaws.com/efa"]: "32"'
    )
    assert "cannot be changed in place" in result["note"]


def test_a_jobset_that_asks_for_efa_has_nothing_to_change(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = explain_json(
        tmp_path, capsys, "jobsets.jobset.x-k8s.io/ml/ok", jobset("ok", {"nvidia.com/gpu": "8", EFA: "32"})
    )
    assert result["change"] == "nothing to change" and "note" not in result


def test_a_trainjob_is_told_what_to_set_in_its_resources_per_node(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    node = {"name": "node", "template": {"spec": {"template": {"spec": {"nodeSelector": {NODEGROUP: "p5"}}}}}}
    trainjob = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "bert", "namespace": "ml"},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {"resourcesPerNode": {"limits": {"nvidia.com/gpu": 8}}},
            "runtimePatches": [
                {"manager": "me", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [node]}}}}
            ],
        },
    }
    result = explain_json(tmp_path, capsys, "trainjob/ml/bert", trainjob)
    # spec.trainer is immutable (Trainer v2.3.0's CRD): the manifest is what changes.
    assert (
        result["change"] == 'in the manifest, set spec.trainer.resourcesPerNode.limits["vpc.amazonaws.com/efa"]: "32"'
    )
    assert "cannot be changed in place" in result["note"]
    assert "runtime torch-distributed already requests" in result["note"]


def test_a_job_that_selects_nothing_but_runs_on_the_pool_is_told_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "ml", "uid": "u1"},
        "spec": {
            "template": {
                "spec": {
                    "containers": [{"name": "node", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]
                }
            }
        },
    }
    pod = workload_pod("n1", "train-0", owner=owner_reference("Job", "batch/v1", "train"))
    result = explain_json(tmp_path, capsys, "job/ml/train", job, pod)
    assert result["runsOn"] == [f"{NODEGROUP}=p5 (1 pod)"]
    assert (
        result["change"]
        == 'in the manifest, set spec.template.spec.containers[0].resources.limits["vpc.amazonaws.com/efa"]: "32"'
    )


def test_a_volcano_job_is_not_found_as_a_batch_job(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    volcano = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "x", "namespace": "ml"},
        "spec": {},
    }
    snapshot = write_json(
        tmp_path / "cluster.json", {"apiVersion": "v1", "kind": "List", "items": [*healthy_pool(), volcano]}
    )
    assert_one_line_error(
        run(["explain", "job/ml/x", "-f", snapshot], capsys), "no Job (batch/v1) ml/x in the snapshots"
    )
    code, out, _ = run(["explain", "jobs.batch.volcano.sh/ml/x", "-f", snapshot], capsys)
    assert code == 0 and "Change: nothing to change" in out


def test_an_unknown_kind_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snapshot = write_json(tmp_path / "cluster.json", {"apiVersion": "v1", "kind": "List", "items": healthy_pool()})
    assert_one_line_error(run(["explain", "widget/ml/x", "-f", snapshot], capsys), "widget is not a workload kind")


# examples/eks-cluster.json: pod ml-training/bert-finetune-node-0-0-fvlvx runs on p5-training (Ready,
# 32 EFA a node), requests 8 GPUs and no EFA, and is owned by Job bert-finetune-node-0 of JobSet
# bert-finetune (review 64-cli F1).
OWNED_POD = "pod/ml-training/bert-finetune-node-0-0-fvlvx"
THE_JOBSETS_CHANGE = "fabriccap explain jobsets.jobset.x-k8s.io/ml-training/bert-finetune"


def example_with(tmp_path: Path, *objects: Any) -> str:
    cluster = json.loads((REPO_ROOT / "examples" / "eks-cluster.json").read_text())
    cluster["items"] += objects
    return write_json(tmp_path / "cluster.json", cluster)


def test_a_pod_a_jobset_owns_is_told_its_pool_and_where_its_owner_sets_the_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot = example_with(tmp_path)
    code, out, err = run(["explain", OWNED_POD, "-f", snapshot, "--require-ready", "-o", "json"], capsys)
    assert (code, err) == (0, "")
    result = json.loads(out)
    assert (result["pool"], result["ready"]) == ("eks.amazonaws.com/nodegroup=p5-training", True)
    assert result["runsOn"] == ["eks.amazonaws.com/nodegroup=p5-training (1 pod)"]
    # Not a patch of the pod: the JobSet would make it again without the request. The example
    # lacks the JobSet, where its explain would fail: the change says so (review 64c F5).
    assert result["change"].startswith("JobSet ml-training/bert-finetune is not in the snapshots: add it")
    assert "kubectl get jobsets.jobset.x-k8s.io bert-finetune -n ml-training -o json" in result["change"]
    assert result["change"].endswith(f"then {THE_JOBSETS_CHANGE}")
    assert result["requestField"].startswith("JobSet: spec.replicatedJobs[]")
    assert (
        "belongs to JobSet ml-training/bert-finetune" in result["note"]
        and "32 per pod that takes a node's accelerators" in result["note"]
    )
    code, out, _ = run(["explain", "p5-training", "-f", snapshot], capsys)
    assert code == 0 and "JobSet   bert-finetune   2      withoutFabric" in out


def test_a_jobsets_job_is_told_its_pool_and_the_jobsets_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "bert-finetune-node-0",
            "namespace": "ml-training",
            "ownerReferences": [owner_reference("JobSet", "jobset.x-k8s.io/v1alpha2", "bert-finetune", "ml-training")],
        },
        "spec": {"template": template("unused", {"nvidia.com/gpu": "8"})},
    }
    del job["spec"]["template"]["spec"]["nodeSelector"]
    the_jobset = jobset("bert-finetune", {"nvidia.com/gpu": "8"})
    the_jobset["metadata"]["namespace"] = "ml-training"
    snapshot = example_with(tmp_path, job, the_jobset)
    code, out, err = run(["explain", "job/ml-training/bert-finetune-node-0", "-f", snapshot, "-o", "json"], capsys)
    assert (code, err) == (0, "")
    result = json.loads(out)
    assert (result["pool"], result["ready"]) == ("eks.amazonaws.com/nodegroup=p5-training", True)
    assert result["change"] == THE_JOBSETS_CHANGE
    # The command it names works on the same snapshot (review 64c F5).
    code, _, err = run([*THE_JOBSETS_CHANGE.split()[1:], "-f", snapshot], capsys)
    assert (code, err) == (0, "")
    assert "the pods counted are all of that JobSet's" in result["note"]


def test_an_owner_in_the_middle_of_the_walk_counts_its_pods(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deployment_ref = owner_reference("Deployment", "apps/v1", "serve")
    replica_set: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "serve-1", "namespace": "ml", "ownerReferences": [deployment_ref]},
        "spec": {"template": template("unused", {"nvidia.com/gpu": "8"})},
    }
    del replica_set["spec"]["template"]["spec"]["nodeSelector"]
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "serve", "namespace": "ml"},
        "spec": {"template": replica_set["spec"]["template"]},
    }
    pod = workload_pod("n1", "serve-1-x", owner=owner_reference("ReplicaSet", "apps/v1", "serve-1"))
    result = explain_json(tmp_path, capsys, "replicaset/ml/serve-1", replica_set, deployment, pod)
    assert result["runsOn"] == [f"{NODEGROUP}=p5 (1 pod)"]
    assert result["change"] == "fabriccap explain deployments.apps/ml/serve"


def test_a_long_template_pointer_is_cut_in_the_table_and_whole_in_the_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Review 64-cli F7: a 3,000-character replica key made a 3,235-character table line.
    replica = "Wor\x1b]0;PWN\x07\u202eker" + "K" * 3000
    job: dict[str, Any] = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "evil", "namespace": "ml"},
        "spec": {"pytorchReplicaSpecs": {replica: {"template": template("p5", {"nvidia.com/gpu": "8"})}}},
    }
    snapshot = write_json(
        tmp_path / "cluster.json", {"apiVersion": "v1", "kind": "List", "items": [*healthy_pool(), job]}
    )
    code, out, err = run(["explain", "pytorchjob/ml/evil", "-f", snapshot], capsys)
    assert (code, err) == (0, "")
    table, _, change = out.partition("\nChange: ")
    assert max(len(line) for line in table.splitlines()) < 300
    assert "/spec/pytorchReplicaSpecs/Wor\\x1b]0;PWN\\x07\\u202eker" in table and "\x1b" not in out
    assert "K" * 3000 in change


def test_an_owner_the_snapshots_lack_is_named_as_missing_not_as_a_failing_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Review 64c F5: a Deployment's pod, as `kubectl get pods,nodes -o json` gives it, sent the
    # user to `fabriccap explain replicasets.apps/ml/serve-1`, which exits 2 on that snapshot.
    pod = workload_pod("n1", "serve-1-x", owner=owner_reference("ReplicaSet", "apps/v1", "serve-1"))
    snapshot = write_json(
        tmp_path / "cluster.json", {"apiVersion": "v1", "kind": "List", "items": [*healthy_pool(), pod]}
    )
    code, out, err = run(["explain", "pod/ml/serve-1-x", "-f", snapshot, "-o", "json"], capsys)
    assert (code, err) == (0, "")
    change = json.loads(out)["change"]
    assert change == (
        "ReplicaSet ml/serve-1 is not in the snapshots: add it and what owns it "
        "(kubectl get replicasets.apps serve-1 -n ml -o json), then fabriccap explain replicasets.apps/ml/serve-1"
    )


def batch_job(name: str, owner: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "ml", "ownerReferences": [owner_reference("Job", "batch/v1", owner)]},
        "spec": {"template": template("unused", {"nvidia.com/gpu": "8"})},
    }


def test_an_owner_loop_is_said_rather_than_pointing_at_a_member_of_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Review 64c F5: Job a owned by Job b owned by Job a sent each explain to the other.
    pod = workload_pod("n1", "loop-pod", owner=owner_reference("Job", "batch/v1", "job-a"))
    jobs = (batch_job("job-a", "job-b"), batch_job("job-b", "job-a"))
    for target, loop in (
        ("job/ml/job-a", "Job ml/job-a → Job ml/job-b → Job ml/job-a"),
        ("job/ml/job-b", "Job ml/job-b → Job ml/job-a → Job ml/job-b"),
        ("pod/ml/loop-pod", "Pod ml/loop-pod → Job ml/job-a → Job ml/job-b → Job ml/job-a"),
    ):
        result = explain_json(tmp_path, capsys, target, *jobs, pod)
        assert result["runsOn"] == [f"{NODEGROUP}=p5 (1 pod)"]
        assert result["change"] == f"none until the owner loop is fixed: {loop}"
        assert "fix their ownerReferences" in result["note"]


def job_loop(length: int, name: str = "job") -> list[dict[str, Any]]:
    """Jobs ``{name}-0`` owned by ``{name}-1`` ... owned by ``{name}-{length - 1}`` owned by ``{name}-0``."""
    return [batch_job(f"{name}-{i}", f"{name}-{(i + 1) % length}") for i in range(length)]


@pytest.mark.parametrize("length", [1, 2, 3, 4, 5, 8])
def test_an_owner_loop_of_any_length_is_named_once_round(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], length: int
) -> None:
    # Review 64e F1: the walk went 4 owners up, so a loop of 5 or more looked like a chain whose
    # top was one of the loop, and explain sent the user round it one command at a time.
    pod = workload_pod("n1", "loop-pod", owner=owner_reference("Job", "batch/v1", "job-0"))
    last = length - 1

    def round_from(first: int) -> str:
        return " → ".join(f"Job ml/job-{(first + step) % length}" for step in range(length + 1))

    for target, loop in (
        ("job/ml/job-0", round_from(0)),
        (f"job/ml/job-{last}", round_from(last)),
        ("pod/ml/loop-pod", f"Pod ml/loop-pod → {round_from(0)}"),
    ):
        result = explain_json(tmp_path, capsys, target, *job_loop(length), pod)
        assert result["runsOn"] == [f"{NODEGROUP}=p5 (1 pod)"], target
        assert result["change"] == f"none until the owner loop is fixed: {loop}", target
        assert "fix their ownerReferences" in result["note"]


def test_a_long_owner_loop_is_named_in_bounded_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Each name is cleaned where the facts are made; the loop shows its first owners and counts the rest.
    name = "j" * 200
    pod = workload_pod("n1", "loop-pod", owner=owner_reference("Job", "batch/v1", f"{name}-0"))
    result = explain_json(tmp_path, capsys, "pod/ml/loop-pod", *job_loop(1000, name), pod)
    change = result["change"]
    assert change.startswith(f"none until the owner loop is fixed: Pod ml/loop-pod → Job ml/{name}-0 → ")
    assert change.endswith(f" (+989 more) → Job ml/{name}-0")
    assert len(change) < 4000


def job_chain(length: int, *, top_held: bool = True) -> list[dict[str, Any]]:
    """Jobs ``job-0`` owned by ``job-1`` ... owned by ``job-{length - 1}``, which no one owns
    (or, without ``top_held``, owned by ``job-{length}``, which the snapshot lacks)."""
    jobs = [batch_job(f"job-{i}", f"job-{i + 1}") for i in range(length)]
    if top_held:
        del jobs[-1]["metadata"]["ownerReferences"]
    return jobs


def test_an_owner_chain_deeper_than_the_operator_walks_is_followed_to_its_top_and_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Review 64e F1: the walk stopped 4 owners up without a word and named job-4 as the top.
    pod = workload_pod("n1", "deep-pod", owner=owner_reference("Job", "batch/v1", "job-0"))
    result = explain_json(tmp_path, capsys, "pod/ml/deep-pod", *job_chain(7), pod)
    assert result["change"] == "fabriccap explain jobs.batch/ml/job-6"
    assert (
        "the operator follows a pod's owners 4 deep: its status names Job ml/job-4, not Job ml/job-6"
        in (result["note"])
    )
    top = explain_json(tmp_path, capsys, "job/ml/job-6", *job_chain(7), pod)
    assert top["runsOn"] == [f"{NODEGROUP}=p5 (1 pod)"]
    assert "its status names Job ml/job-4, not Job ml/job-6" in top["note"]
    # Within the operator's depth, nothing is said of it.
    shallow = explain_json(tmp_path, capsys, "pod/ml/deep-pod", *job_chain(5), pod)
    assert shallow["change"] == "fabriccap explain jobs.batch/ml/job-4"
    assert "the operator follows" not in shallow["note"]


@pytest.mark.parametrize("length", [1, 6])
def test_an_owner_missing_midway_is_named_at_any_depth(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], length: int
) -> None:
    pod = workload_pod("n1", "deep-pod", owner=owner_reference("Job", "batch/v1", "job-0"))
    result = explain_json(tmp_path, capsys, "pod/ml/deep-pod", *job_chain(length, top_held=False), pod)
    missing = f"job-{length}"
    assert result["change"] == (
        f"Job ml/{missing} is not in the snapshots: add it and what owns it "
        f"(kubectl get jobs.batch {missing} -n ml -o json), then fabriccap explain jobs.batch/ml/{missing}"
    )


def leader_worker_set() -> list[dict[str, Any]]:
    """A LeaderWorkerSet as lws v0.8.0 makes it: its leader StatefulSet ``lws`` (controlled by the
    LWS), leader pod ``lws-0``, the worker StatefulSet ``lws-0`` controlled by the leader *pod*
    (pod_controller.go:173/187), and worker pod ``lws-0-1``; every pod on pool p5."""
    label = {"leaderworkerset.sigs.k8s.io/name": "lws"}
    lws_template = template("p5", {"nvidia.com/gpu": "8"})
    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "lws", "namespace": "ml", "uid": "uid-lws"},
        "spec": {"leaderWorkerTemplate": {"size": 2, "leaderTemplate": lws_template, "workerTemplate": lws_template}},
    }

    def stateful_set(name: str, owner: dict[str, Any]) -> dict[str, Any]:
        metadata = {"name": name, "namespace": "ml", "labels": label, "ownerReferences": [owner]}
        return {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": metadata,
            "spec": {"template": lws_template},
        }

    def pod(name: str, node: str, stateful: str) -> dict[str, Any]:
        made = workload_pod(node, name, owner=owner_reference("StatefulSet", "apps/v1", stateful))
        made["metadata"]["labels"] = label
        return made

    return [
        lws,
        stateful_set("lws", owner_reference("LeaderWorkerSet", "leaderworkerset.x-k8s.io/v1", "lws")),
        stateful_set("lws-0", owner_reference("Pod", "v1", "lws-0")),
        pod("lws-0", "n1", "lws"),
        pod("lws-0-1", "n2", "lws-0"),
    ]


def test_a_leaderworkersets_worker_statefulset_is_told_the_lws_worker_template(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Review 64c F4: its controller is the leader pod, which makes nothing from a template; it
    # was named as the owner to change ("Pod: spec.containers[].resources", "Runs on: -").
    result = explain_json(tmp_path, capsys, "statefulset/ml/lws-0", *leader_worker_set())
    lws = "fabriccap explain leaderworkersets.leaderworkerset.x-k8s.io/ml/lws"
    assert (
        result["requestField"]
        == "LeaderWorkerSet: spec.leaderWorkerTemplate.workerTemplate.spec.containers[].resources"
    )
    assert result["runsOn"] == [f"{NODEGROUP}=p5 (2 pods)"]
    assert result["change"] == lws
    assert "belongs to LeaderWorkerSet ml/lws" in result["note"]
    # Without the leader pod in the snapshot, the StatefulSet's own label names the LWS.
    without_leader = [o for o in leader_worker_set() if o["metadata"]["name"] != "lws-0" or o["kind"] != "Pod"]
    result = explain_json(tmp_path, capsys, "statefulset/ml/lws-0", *without_leader)
    assert result["requestField"].startswith("LeaderWorkerSet: spec.leaderWorkerTemplate.workerTemplate")
    assert result["change"] == lws
