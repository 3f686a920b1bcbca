"""DRA: which driver pools kube-scheduler skips, and that skipping one leaves the others counted.

Upstream, k8s.io/dynamic-resource-allocation structured/internal/stable:
- pools_stable.go GatherPools: ``pool.IsIncomplete = int64(len(pool.Slices)) !=
  pool.Slices[0].Spec.Pool.ResourceSliceCount`` (the incubating allocator's
  pools_incubating.go compares every slice of the generation the same way); poolIsInvalid: a
  device name listed twice in a pool.
- allocator_stable.go allocateOne: ``if pool.IsIncomplete || pool.IsInvalid { continue }``,
  "don't error out here since there might be available devices in other pools": only that pool
  is skipped, and a claim gets its devices from the node's other pools.

A node running DRANET beside NVIDIA's GPU DRA driver (DRANET's own EKS ``gpu-efa`` example)
keeps its EFA devices while the GPU driver's pool is republished. The slices are DRANET's
(``fabriccap_devtools.world``); the GPU driver's device is named as NVIDIA's driver names a GPU
(``gpu-<index>``, attribute ``type: gpu``).

Beside them, the claim side: an ``adminAccess`` request (KEP-5018) may be given devices other
claims hold (allocator_stable.go allocateDevice checks ``allocatedDevices`` only for a request
without admin access), so it takes none, and is not the pod's use of the fabric.
"""

from __future__ import annotations

from typing import Any

from fabriccap.core.facts import FactsExtractor, claim_request_classes
from fabriccap.core.index import DraDevices, FactIndex
from fabriccap.offline.snapshot import add_bodies
from support.builders import allocated_claim, dra_pool, facts_of, message, node, only_status, reason, resource_slice
from support.configs import default_config

EFA_CLASS = "efa.networking.k8s.aws"
GPU_DRIVER = "gpu.nvidia.com"


def dra(*bodies: dict[str, Any]) -> DraDevices:
    return facts_of([node("n1", efa=None), *bodies]).dra_devices("n1", "efa", (EFA_CLASS,))


def read_as_the_operator(*bodies: dict[str, Any]) -> DraDevices:
    """As the operator reads a cluster (a snapshot refuses an unreadable slice): the slice is
    kept with its problem."""
    index = FactIndex()
    config = default_config()
    index.configure(config)
    add_bodies(index, FactsExtractor(config), [node("n1", efa=None), *bodies], "cluster", strict_quantities=False)
    return index.dra_devices("n1", "efa", (EFA_CLASS,))


def gpu_slice(node_name: str, *, part: int, name: str) -> dict[str, Any]:
    """One of two slices of the GPU driver's pool on ``node_name``, both listing ``gpu-0``."""
    body = resource_slice(node_name, efa=0, driver=GPU_DRIVER, slice_count=2, part=part, name=name)
    body["spec"]["devices"] = [{"name": "gpu-0", "attributes": {"type": {"string": "gpu"}, "index": {"int": 0}}}]
    return body


# --- Completeness: exactly resourceSliceCount slices ---------------------------------------------


def test_more_slices_than_resource_slice_count_is_an_incomplete_pool() -> None:
    """Two gen-1 slices of pool n1, each saying resourceSliceCount 1, with distinct devices
    (not a duplicate): the scheduler finds 2 != 1, marks the pool incomplete and skips it, so an
    EFA claim gets none of its devices on n1."""
    first = resource_slice("n1", efa=16, slice_count=1, part=0, name="n1-a")
    second = resource_slice("n1", efa=16, slice_count=1, part=1, name="n1-b")
    devices = dra(first, second)
    assert (devices.count, devices.seen) == (0, 32)
    assert devices.problem == (
        "driver dra.net pool n1 has 2 ResourceSlices of generation 1, more than its resourceSliceCount 1"
    )


def test_slices_that_disagree_on_resource_slice_count_are_an_incomplete_pool() -> None:
    """Slices of one generation saying 1 and 2, both present: the scheduler compares with the
    first slice it lists, so whether it skips the pool depends on list order; fabriccap counts
    none of it rather than the larger count's 32."""
    first = resource_slice("n1", efa=16, slice_count=1, part=0, name="n1-a")
    second = resource_slice("n1", efa=16, slice_count=2, part=1, name="n1-b")
    devices = dra(first, second)
    assert devices.count == 0
    assert devices.problem == (
        "driver dra.net pool n1 has 2 ResourceSlices of generation 1 that disagree on resourceSliceCount (1, 2)"
    )


# --- A pool's problem skips that pool only --------------------------------------------------------


def test_another_drivers_incomplete_pool_leaves_the_efa_devices_counted_and_is_named() -> None:
    """d2 runs DRANET (32 EFA, complete) and a GPU DRA driver whose pool is mid-republish (1 of
    2 slices): the scheduler skips the GPU pool only and allocates an EFA claim of 32 on d2. The
    pool is Ready, and its message names the skipped pool."""
    bodies = dra_pool(count=32, nodes=2)
    bodies.append(resource_slice("d2", efa=0, driver=GPU_DRIVER, slice_count=2, name="d2-gpu"))
    status = only_status(bodies)
    assert reason(status, "Ready") == ("True", "UniformCapability"), message(status, "Ready")
    assert status.uniform_count == 32
    assert (
        "ResourceSlices: d2: driver gpu.nvidia.com pool d2 has 1 of 2 ResourceSlices of generation 1:"
        " not counted, as the scheduler skips it; it holds no efa device"
    ) in message(status, "Ready")


def test_another_drivers_duplicate_device_name_leaves_the_efa_devices_counted() -> None:
    """The GPU driver's pool invalid (``gpu-0`` in both its slices): the scheduler skips that
    pool only (pools_stable.go poolIsInvalid; allocateOne ``continue``)."""
    bodies = [
        *dra_pool(count=32, nodes=2),
        gpu_slice("d2", part=0, name="d2-gpu-a"),
        gpu_slice("d2", part=1, name="d2-gpu-b"),
    ]
    status = only_status(bodies)
    assert reason(status, "Ready") == ("True", "UniformCapability"), message(status, "Ready")
    assert "driver gpu.nvidia.com pool d2 is invalid: duplicate device name gpu-0" in message(status, "Ready")


def test_another_drivers_unreadable_slice_leaves_the_efa_devices_counted() -> None:
    """A GPU slice fabriccap cannot read (only a snapshot holds one) belongs to the GPU
    driver's pool, never to DRANET's: DRANET's devices count. What the slice holds is not
    known, so its pool is the node's problem, said."""
    broken = resource_slice("n1", efa=0, driver=GPU_DRIVER, name="n1-gpu")
    broken["spec"]["pool"]["generation"] = "x"
    devices = read_as_the_operator(resource_slice("n1", efa=32), broken)
    assert devices.count == 32
    assert devices.problem == "ResourceSlice n1-gpu: spec.pool.generation 'x' is not a count"


def test_a_slice_whose_pool_cannot_be_read_skips_every_pool_of_its_driver() -> None:
    """A DRANET slice without a readable pool name may be part of DRANET's pool on the node
    (whose count it would then make incomplete): none of DRANET's pools counts there. Another
    driver's pools are not its, and are not skipped for it."""
    nameless = resource_slice("n1", efa=16, name="n1-nameless")
    del nameless["spec"]["pool"]["name"]
    gpu = resource_slice("n1", efa=0, driver=GPU_DRIVER, name="n1-gpu")
    devices = read_as_the_operator(resource_slice("n1", efa=32), nameless, gpu)
    assert (devices.count, devices.seen) == (0, 32)
    assert devices.problem == (
        "ResourceSlice n1-nameless: spec.pool.name is missing; driver dra.net pool n1 not counted: a"
        " ResourceSlice of its driver whose pool cannot be read may belong to it"
    )
    assert devices.notes == ()


def test_devices_a_claim_holds_of_a_skipped_pool_do_not_count_but_those_of_others_do() -> None:
    """A device the driver no longer publishes counts from its claim, unless its pool is
    skipped: the scheduler allocates nothing from that pool either."""
    efa = [f"pci-0000-{0x10 + index:02x}-1b-0" for index in range(100, 104)]
    claim = allocated_claim("n1", efa, name="c")
    incomplete = dra(resource_slice("n1", efa=12, slice_count=2), claim)
    assert (incomplete.count, incomplete.allocated, incomplete.seen) == (0, 0, 16)
    beside_gpu = dra(resource_slice("n1", efa=12), resource_slice("n1", efa=0, driver=GPU_DRIVER, slice_count=2), claim)
    assert (beside_gpu.count, beside_gpu.allocated) == (16, 4)


# --- adminAccess requests ---------------------------------------------------------------------------

ADMIN_EFA = {"name": "efa", "exactly": {"deviceClassName": EFA_CLASS, "adminAccess": True, "allocationMode": "All"}}
GPU = {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1}}
ADMIN_EFA_RESULT = {
    "request": "efa",
    "driver": "dra.net",
    "pool": "n1",
    "device": "pci-0000-10-1b-0",
    "adminAccess": True,
}
GPU_RESULT = {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-0"}


def test_an_admin_access_request_is_not_the_fabric_alone_or_beside_another_request() -> None:
    """An adminAccess request (KEP-5018, a monitoring agent's) watches devices others may hold
    and takes none: the pod does not use the fabric through it, whether its claim also holds a
    GPU or not, allocated or not (a claim template reads as an unallocated claim)."""
    alone = {"devices": {"requests": [ADMIN_EFA]}}
    with_gpu = {"devices": {"requests": [ADMIN_EFA, GPU]}}
    allocated_alone = {"allocation": {"devices": {"results": [ADMIN_EFA_RESULT]}}}
    allocated_with_gpu = {"allocation": {"devices": {"results": [ADMIN_EFA_RESULT, GPU_RESULT]}}}
    assert claim_request_classes(alone, None) == ()
    assert claim_request_classes(alone, allocated_alone) == ()
    assert claim_request_classes(with_gpu, None) == (("gpu", "gpu.nvidia.com"),)
    assert claim_request_classes(with_gpu, allocated_with_gpu) == (("gpu", "gpu.nvidia.com"),)


def test_a_skipped_pool_holding_the_fabrics_devices_is_said_even_when_every_node_counts_the_same() -> None:
    """Review 66e F1: d2's second DRANET pool (8 EFA devices) is mid-republish (1 of 2 slices):
    skipped, while both nodes count 32 from their complete pools, so the pool is Ready. The
    skipped pool was said only in a failing condition's message, never in Ready=True's; a GPU
    pool's skip (a note) was, so the case that mattered was the one hidden."""
    bodies = dra_pool(count=32, nodes=2)
    bodies.append(resource_slice("d2", efa=8, pool="d2-extra", slice_count=2, part=5, name="d2-extra"))
    status = only_status(bodies)
    assert reason(status, "Ready") == ("True", "UniformCapability"), message(status, "Ready")
    assert "driver dra.net pool d2-extra has 1 of 2 ResourceSlices of generation 1" in message(status, "Ready")


def test_a_skipped_pool_whose_fabric_devices_a_job_holds_is_not_said_to_hold_none() -> None:
    """Review 66e F2: DRANET moved its 4 interfaces into a pod (the claim holds them; the slice
    lists none) while its pool is mid-republish. The 4 are not counted, as the scheduler skips
    the pool; the node said "it holds no efa device" and named no problem for its 0."""
    efa = [f"pci-0000-{0x10 + index:02x}-1b-0" for index in range(100, 104)]
    devices = dra(resource_slice("n1", efa=0, slice_count=2), allocated_claim("n1", efa, name="c"))
    assert (devices.count, devices.seen) == (0, 4)
    assert devices.problem == "driver dra.net pool n1 has 1 of 2 ResourceSlices of generation 1"
    assert not any("holds no" in note for note in devices.notes), devices.notes


def test_a_pool_skipped_for_a_nameless_slice_is_not_said_to_be_skipped_by_the_scheduler() -> None:
    """Review 66e F4: the GPU driver's pool is complete and valid to kube-scheduler; only
    fabriccap cannot tell whether a slice it cannot read belongs to it."""
    nameless = resource_slice("n1", efa=0, driver=GPU_DRIVER, name="n1-gpu-nameless")
    del nameless["spec"]["pool"]["name"]
    gpu = resource_slice("n1", efa=0, driver=GPU_DRIVER, name="n1-gpu")
    devices = read_as_the_operator(resource_slice("n1", efa=32), nameless, gpu)
    assert devices.count == 32
    assert not any("as the scheduler skips it" in note for note in devices.notes), devices.notes
    assert any(note.startswith(f"driver {GPU_DRIVER} pool n1 not counted: ") for note in devices.notes), devices.notes


def test_a_skipped_fabric_pool_is_said_once_in_each_message() -> None:
    """Review 66h F1: with a node at 0 (its only pool incomplete) and another still counting
    while one of its pools is skipped, Advertised named the skipped pool twice: among the nodes'
    uncounted devices and among the notes."""
    bodies = [
        body
        for body in dra_pool(count=32, nodes=3)
        if not (body.get("kind") == "ResourceSlice" and body["spec"].get("nodeName") == "d3")
    ]
    bodies.append(resource_slice("d3", efa=32, slice_count=2, name="d3-half"))
    bodies.append(resource_slice("d2", efa=8, pool="d2-extra", slice_count=2, part=5, name="d2-extra"))
    status = only_status(bodies)
    for kind in ("Ready", "Advertised"):
        assert message(status, kind).count("pool d2-extra has 1 of 2") == 1, message(status, kind)
    assert "d3 (driver dra.net pool d3 has 1 of 2 ResourceSlices of generation 1)" in message(status, "Advertised")
