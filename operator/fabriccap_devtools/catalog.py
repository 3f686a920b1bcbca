"""``fabriccap-dev catalog [--check]``: the EFA instance catalog, generated from Karpenter's AWS provider.

Source: the Go module ``github.com/aws/karpenter-provider-aws`` at a pinned version, as the Go
module proxy serves it (``go mod download`` fetches and unpacks the zip even though building
the module needs a newer Go than the machine's). Its ``pkg/providers/drametadata`` holds
``EFAMetadataByInstanceType`` (302 types in v1.15.2: the EFA count per type, EC2's
``MaximumEfaInterfaces``) and ``GPUMetadataByInstanceType`` (NVIDIA GPUs per type). Its
``pkg/providers/instancetype/zz_generated.vpclimits.go`` holds ``Limits``: per type, EC2's
network cards (``NetworkCards``: each card's index and ``MaximumNetworkInterfaces``), which
Karpenter's compatibility check holds an EC2NodeClass's pinned ``networkInterfaces`` to. All
are generated Go map literals; this reads them line by line and stops at any line it does not
expect, so an upstream change of shape fails here instead of producing a quietly wrong table.

What the module does not carry (architecture, vCPUs, memory, hypervisor, Neuron device counts
and the label values Karpenter derives from EC2's GpuInfo and NeuronInfo) comes from
``catalog_supplement.json`` beside this file, each entry naming its source. The module zip
holds no copy of Karpenter's generated instance-types reference page (checked for v1.15.2:
no ``website/`` in its 594 files), which is where those facts were taken from.

Family, category, generation and size come from the type's name by Karpenter's own rule
(``computeRequirements``, provider ``pkg/providers/instancetype/types.go``); the product
derives every label from these columns (``fabriccap.core.catalog``).

The output is package data of the product (``operator/fabriccap/data/efa-catalog.json``),
one row per line so that a regeneration diffs by instance type. ``--check`` compares instead
of writing (tests/repo/test_catalog_regeneration.py runs it against a module it downloads if need be).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from fabriccap.core.catalog import CATALOG_FORMAT, COLUMNS, name_labels, parse_catalog
from fabriccap_devtools.checkout import REPO

MODULE_PATH = "github.com/aws/karpenter-provider-aws"
MODULE_VERSION = "v1.15.2"
# The module's go.mod asks for go 1.26.11: an older local go still fetches and unpacks the zip
# but exits 1, so the download names a toolchain that is new enough (the proxy serves it).
DOWNLOAD_TOOLCHAIN = "go1.27.3"
DRAMETADATA = "pkg/providers/drametadata"
EFA_FILE = "zz_generated_efa_metadata.go"
GPU_FILE = "zz_generated_gpu_metadata.go"
TYPES_FILE = "types.go"
INSTANCETYPE = "pkg/providers/instancetype"
VPC_LIMITS_FILE = "zz_generated.vpclimits.go"
CRDS = "pkg/apis/crds"

SUPPLEMENT = Path(__file__).resolve().parent / "catalog_supplement.json"
SUPPLEMENT_FORMAT = "fabriccap.instance-type-supplement/v1"
CATALOG = REPO / "operator" / "fabriccap" / "data" / "efa-catalog.json"
EFA_RESOURCE = "vpc.amazonaws.com/efa"
NVIDIA_GPU = "nvidia.com/gpu"
NEURON = "aws.amazon.com/neuron"
NEURON_CORE = "aws.amazon.com/neuroncore"
EFA_PCI_DEVICE = "Elastic Fabric Adapter (EFA)"
GO_TIMEOUT_SECONDS = 600

# The attributes each generated device may carry: a new one means the generator upstream
# changed, and we stop rather than ignore it.
EFA_ATTRIBUTES = frozenset(
    {
        "dra.net/numaNode",
        "dra.net/pciDevice",
        "dra.net/pciSubsystem",
        "dra.net/pciVendor",
        "dra.net/rdma",
        "resource.kubernetes.io/pcieRoot",
    }
)
GPU_ATTRIBUTES = frozenset(
    {"architecture", "brand", "cudaComputeCapability", "productName", "resource.kubernetes.io/pcieRoot", "type"}
)


class CatalogSourceError(Exception):
    """A problem the user must fix; reported as one line."""


def _fail(message: str) -> NoReturn:
    raise CatalogSourceError(message)


# -- the generated Go map literals ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Device:
    attributes: Mapping[str, str | int | bool]
    capacity: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class DeviceMetadata:
    count: int
    devices: tuple[Device, ...]


_ENTRY_OPEN = re.compile(r'^\t"(?P<name>[^"]+)": \{$')
_COUNT = re.compile(r"^\t\tCount: (?P<count>\d+),$")
_ATTRIBUTE = re.compile(
    r'^\t{5}"(?P<key>[^"]+)":\s+\{(?:StringValue|VersionValue|IntValue|BoolValue): '
    r'(?:strPtr\("(?P<str>[^"]*)"\)|intPtr\((?P<int>-?\d+)\)|boolPtr\((?P<bool>true|false)\))\},$'
)
_CAPACITY = re.compile(r'^\t{5}"(?P<key>[^"]+)":\s+\{Value: resource\.MustParse\("(?P<quantity>[^"]+)"\)\},$')
_STRUCTURE = frozenset(
    {
        "Devices: []DRADevice{",
        "{",
        "Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{",
        "Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{",
    }
)


def _map_body(source: str, opening: str, file_name: str) -> tuple[int, list[str]]:
    """The lines of the generated Go map that ``opening`` begins, and the number of its first line."""
    lines = source.splitlines()
    if opening not in lines:
        _fail(f"{file_name}: no line {opening!r}; the generated Go source changed shape")
    start = lines.index(opening)
    if "}" not in lines[start:]:
        _fail(f"{file_name}: map {opening.split()[1]} is never closed")
    return start + 2, lines[start + 1 : lines.index("}", start)]


def _entries(body: Sequence[str], file_name: str) -> Iterator[tuple[str, list[str]]]:
    name: str | None = None
    block: list[str] = []
    for number, line in enumerate(body, start=1):
        if name is None:
            opened = _ENTRY_OPEN.match(line)
            if not opened:
                _fail(f"{file_name}: unexpected line {number} of the map: {line.strip()[:80]!r}")
            name, block = opened.group("name"), []
        elif line == "\t},":
            yield name, block
            name = None
        else:
            block.append(line)
    if name is not None:
        _fail(f"{file_name}: entry {name!r} is never closed")


def _entry(name: str, block: Sequence[str], file_name: str, allowed: frozenset[str]) -> DeviceMetadata:
    if not block or not (count_line := _COUNT.match(block[0])):
        _fail(f"{file_name}: entry {name!r} does not start with 'Count: N,'")
    devices: list[Device] = []
    attributes: dict[str, str | int | bool] = {}
    capacity: dict[str, str] = {}
    for line in block[1:]:
        stripped = line.strip()
        if attribute := _ATTRIBUTE.match(line):
            key = attribute.group("key")
            if key not in allowed:
                _fail(f"{file_name}: entry {name!r} has unknown attribute {key!r}")
            if attribute.group("int") is not None:
                attributes[key] = int(attribute.group("int"))
            elif attribute.group("bool") is not None:
                attributes[key] = attribute.group("bool") == "true"
            else:
                attributes[key] = attribute.group("str")
        elif capacity_line := _CAPACITY.match(line):
            capacity[capacity_line.group("key")] = capacity_line.group("quantity")
        elif stripped == "},":
            # Closes attributes, capacity, a device or the device list; at three tabs, a device.
            if line.startswith("\t\t\t}"):
                devices.append(Device(attributes, capacity))
                attributes, capacity = {}, {}
        elif stripped not in _STRUCTURE:
            _fail(f"{file_name}: entry {name!r} has an unexpected line: {stripped[:80]!r}")
    count = int(count_line.group("count"))
    if count != len(devices):
        _fail(f"{file_name}: entry {name!r} says Count {count} but lists {len(devices)} devices")
    return DeviceMetadata(count, tuple(devices))


def read_metadata(path: Path, variable: str, allowed: frozenset[str]) -> dict[str, DeviceMetadata]:
    try:
        source = path.read_text(encoding="utf-8")
    except OSError as error:
        _fail(f"cannot read {path}: {error.strerror}")
    parsed: dict[str, DeviceMetadata] = {}
    _, body = _map_body(source, f"var {variable} = map[string]*DeviceMetadata{{", path.name)
    for name, block in _entries(body, path.name):
        if name in parsed:
            _fail(f"{path.name}: entry {name!r} appears twice")
        parsed[name] = _entry(name, block, path.name, allowed)
    if not parsed:
        _fail(f"{path.name}: map {variable} is empty")
    return parsed


def _check_types_shape(path: Path) -> None:
    squeezed = re.sub(r"\s+", " ", path.read_text(encoding="utf-8"))
    if "type DeviceMetadata struct { Count int Devices []DRADevice }" not in squeezed:
        _fail(f"{path.name}: DeviceMetadata is no longer {{Count int; Devices []DRADevice}}")


# -- the network cards of zz_generated.vpclimits.go ------------------------------------------------

_LIMITS_OPENING = "var Limits = map[string]*VPCLimits{"
_LIMITS_ENTRY = re.compile(r'^\t"(?P<name>[^"]+)": \{$')
# Every other line an entry may hold, by shape: the scalar fields at two tabs, the card list
# and each card's braces, and a card's fields at four tabs.
_LIMITS_FIELD = re.compile(
    r"^\t\t(?:Interface|IPv4PerInterface|BranchInterface|DefaultNetworkCardIndex):\s+\d+,$"
    r"|^\t\t(?:IsTrunkingCompatible|IsBareMetal):\s+(?:true|false),$"
    r'|^\t\tHypervisor:\s+"[a-z]*",$'
    r'|^\t\t\t\tNetworkPerformance:\s+"[^"]*",$'
)
_CARD_MAXIMUM = re.compile(r"^\t\t\t\tMaximumNetworkInterfaces:\s+(?P<count>\d+),$")
_CARD_INDEX = re.compile(r"^\t\t\t\tNetworkCardIndex:\s+(?P<index>\d+),$")
_CARDS_STRUCTURE = frozenset({"\t\tNetworkCards: []NetworkCard{", "\t\t\t{", "\t\t\t},", "\t\t},", ""})


def _check_limits_shape(source: str, file_name: str) -> None:
    squeezed = re.sub(r"\s+", " ", source)
    for shape in (
        "type NetworkCard struct {",
        "MaximumNetworkInterfaces int64",
        "NetworkCardIndex int64",
        "NetworkCards []NetworkCard",
    ):
        if shape not in squeezed:
            _fail(f"{file_name}: no {shape!r}; the generated Go source changed shape")


def read_network_cards(path: Path) -> dict[str, tuple[int, ...]]:
    """Per instance type, its network cards' MaximumNetworkInterfaces by card index (the list's
    position is the index: the file lists cards 0..N-1 in order, and anything else stops here)."""
    try:
        source = path.read_text(encoding="utf-8")
    except OSError as error:
        _fail(f"cannot read {path}: {error.strerror}")
    _check_limits_shape(source, path.name)
    first, body = _map_body(source, _LIMITS_OPENING, path.name)
    cards: dict[str, tuple[int, ...]] = {}
    name: str | None = None
    found: list[tuple[int, int]] = []
    maximum: int | None = None
    for number, line in enumerate(body, start=first):
        if name is None:
            if not line:
                continue
            if not (opened := _LIMITS_ENTRY.match(line)):
                _fail(f"{path.name}:{number}: unexpected line {line.strip()[:80]!r}")
            name, found, maximum = opened.group("name"), [], None
            if name in cards:
                _fail(f"{path.name}: {name} appears twice")
        elif line == "\t},":
            indexes = [index for index, _ in found]
            if indexes != list(range(len(found))):
                _fail(f"{path.name}: {name}'s network cards are not indexes 0..{len(found) - 1} in order: {indexes}")
            cards[name] = tuple(count for _, count in found)
            name = None
        elif counted := _CARD_MAXIMUM.match(line):
            maximum = int(counted.group("count"))
        elif indexed := _CARD_INDEX.match(line):
            if maximum is None:
                _fail(f"{path.name}:{number}: {name}'s card has no MaximumNetworkInterfaces before its index")
            found.append((int(indexed.group("index")), maximum))
            maximum = None
        elif line not in _CARDS_STRUCTURE and not _LIMITS_FIELD.match(line):
            _fail(f"{path.name}:{number}: {name} has an unexpected line {line.strip()[:80]!r}")
    if name is not None:
        _fail(f"{path.name}: entry {name!r} is never closed")
    if not cards:
        _fail(f"{path.name}: map Limits is empty")
    return cards


# -- the module in the Go module cache ------------------------------------------------------------


def download_command(version: str = MODULE_VERSION) -> list[str]:
    return ["go", "mod", "download", "-json", f"{MODULE_PATH}@{version}"]


def download_line(version: str = MODULE_VERSION) -> str:
    """The download as a user types it (docs, messages)."""
    return f"GOTOOLCHAIN={DOWNLOAD_TOOLCHAIN} GOFLAGS=-mod=mod {' '.join(download_command(version))}"


def _go_env(name: str) -> str:
    try:
        result = subprocess.run(
            ["go", "env", name], check=True, capture_output=True, text=True, timeout=GO_TIMEOUT_SECONDS
        )
    except FileNotFoundError:
        _fail("the go command is not on PATH (it finds and downloads the module)")
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as error:
        _fail(f"'go env {name}' failed: {error}")
    return result.stdout.strip()


def _escaped(path: str) -> str:
    # The module cache writes an upper-case letter as "!" and the letter in lower case.
    return re.sub(r"[A-Z]", lambda match: "!" + match.group(0).lower(), path)


def cached_module(version: str = MODULE_VERSION) -> Path | None:
    cache = _go_env("GOMODCACHE")
    directory = Path(cache) / f"{_escaped(MODULE_PATH)}@{version}"
    return directory if (directory / DRAMETADATA).is_dir() else None


def download_module(version: str = MODULE_VERSION) -> Path:
    """The module's directory in the Go module cache, downloaded through the module proxy when
    missing (76 MB; about 10 s)."""
    found = cached_module(version)
    if found is not None:
        return found
    with tempfile.TemporaryDirectory(prefix="fabriccap-catalog-") as scratch:
        # `go mod download` of a module@version wants a main module to run in.
        Path(scratch, "go.mod").write_text("module example.invalid/catalog\n\ngo 1.26\n", encoding="utf-8")
        environment = {**os.environ, "GOTOOLCHAIN": DOWNLOAD_TOOLCHAIN, "GOFLAGS": "-mod=mod"}
        try:
            result = subprocess.run(
                download_command(version),
                cwd=scratch,
                env=environment,
                capture_output=True,
                text=True,
                timeout=GO_TIMEOUT_SECONDS,
                check=False,
            )
        except (FileNotFoundError, subprocess.TimeoutExpired) as error:
            _fail(f"{download_line(version)} failed: {error}")
    found = cached_module(version)
    if found is None:
        detail = (result.stdout + result.stderr).strip().splitlines()
        _fail(f"{download_line(version)} did not unpack the module: {(detail or ['no output'])[-1][:200]}")
    return found


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- the supplement and the catalog ---------------------------------------------------------------


def load_supplement(path: Path = SUPPLEMENT) -> dict[str, dict[str, Any]]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        _fail(f"cannot read the supplement {path}: {error}")
    types = document.get("types") if isinstance(document, dict) else None
    if document.get("format") != SUPPLEMENT_FORMAT or not isinstance(types, dict):
        _fail(f"{path} is not a {SUPPLEMENT_FORMAT} document with a 'types' object")
    sources = document.get("sources") or {}
    for name, entry in types.items():
        source = entry.get("source") if isinstance(entry, dict) else None
        if not isinstance(source, str) or not (source in sources or source.startswith("manual: ")):
            _fail(f"{path}: {name} names no source (a key of 'sources', or 'manual: ...')")
    return types


def _gpu_columns(name: str, gpu: DeviceMetadata | None, facts: Mapping[str, Any]) -> tuple[list[Any] | None, int]:
    """The instance-gpu-* label values (from the supplement: EC2's GpuInfo as Karpenter writes it)
    and the NVIDIA GPU count (the module's, checked against the supplement's)."""
    accelerators = facts.get("accelerators") or []
    labelled = next((a for a in accelerators if "memoryMiB" in a), None)
    count = gpu.count if gpu is not None else 0
    if gpu is not None and labelled is not None and labelled.get("kind") == NVIDIA_GPU and labelled["count"] != count:
        _fail(f"{name}: the module lists {count} GPUs, the supplement {labelled['count']}")
    if labelled is None:
        if gpu is not None:
            _fail(f"{name}: the module lists GPUs but the supplement has no instance-gpu-* labels for it")
        return None, 0
    if gpu is None and labelled.get("kind") == NVIDIA_GPU:
        count = int(labelled["count"])  # a GPU type the module's DRA metadata does not list
    return [labelled.get("name"), labelled.get("manufacturer"), labelled.get("count"), labelled.get("memoryMiB")], count


def _row(
    name: str,
    maximum: int,
    gpu: DeviceMetadata | None,
    facts: Mapping[str, Any],
    network_cards: tuple[int, ...] | None,
) -> list[Any]:
    family, category, generation, size = name_labels(name)
    gpu_labels, gpus = _gpu_columns(name, gpu, facts)
    resources: dict[str, int] = {}
    if gpus:
        resources[NVIDIA_GPU] = gpus
    accelerator = None
    for entry in facts.get("accelerators") or []:
        if "memoryMiB" in entry:
            if entry.get("kind") not in (None, NVIDIA_GPU):
                resources[str(entry["kind"])] = int(entry["count"])  # AMD GPUs
            continue
        accelerator = [entry.get("name"), entry.get("manufacturer"), entry.get("count")]
        if entry.get("kind") == NEURON:
            resources[NEURON] = int(entry["count"])
            if entry.get("cores"):
                resources[NEURON_CORE] = int(entry["cores"])
    values = {
        "name": name,
        "maximum": maximum,
        "family": family,
        "category": category,
        "generation": generation,
        "size": size,
        "arch": facts.get("arch"),
        "cpu": facts.get("cpu"),
        "memoryMiB": facts.get("memoryMiB"),
        "hypervisor": facts.get("hypervisor"),
        "gpu": gpu_labels,
        "accelerator": accelerator,
        "resources": dict(sorted(resources.items())),
        "networkCards": list(network_cards) if network_cards is not None else None,
    }
    return [values[column] for column in COLUMNS]


def build_catalog(module: Path, version: str = MODULE_VERSION, supplement: Path = SUPPLEMENT) -> dict[str, Any]:
    metadata = module / DRAMETADATA
    _check_types_shape(metadata / TYPES_FILE)
    efa = read_metadata(metadata / EFA_FILE, "EFAMetadataByInstanceType", EFA_ATTRIBUTES)
    gpus = read_metadata(metadata / GPU_FILE, "GPUMetadataByInstanceType", GPU_ATTRIBUTES)
    for name, entry in efa.items():
        if entry.count < 1 or any(d.attributes.get("dra.net/pciDevice") != EFA_PCI_DEVICE for d in entry.devices):
            _fail(f"{EFA_FILE}: {name} is not a list of {entry.count} EFA devices")
    network_cards = read_network_cards(module / INSTANCETYPE / VPC_LIMITS_FILE)
    facts = load_supplement(supplement)
    missing = sorted(name for name in efa if name not in facts)
    if missing:
        _fail(f"the supplement has no facts for {', '.join(missing[:10])}: add them with their source")
    # Accelerator types without EFA: a NodePool may launch them, and Launchable must know they have 0.
    without_fabric = sorted(
        (set(gpus) | {name for name, entry in facts.items() if entry.get("accelerators")}) - set(efa)
    )
    rows = [_row(name, efa[name].count, gpus.get(name), facts[name], network_cards.get(name)) for name in sorted(efa)]
    rows += [_row(name, 0, gpus.get(name), facts.get(name) or {}, network_cards.get(name)) for name in without_fabric]
    rows.sort(key=lambda row: str(row[0]))
    return {
        "format": CATALOG_FORMAT,
        "resource": EFA_RESOURCE,
        "source": {
            "module": f"{MODULE_PATH}@{version}",
            "files": {
                **{f"{DRAMETADATA}/{f}": _sha256(metadata / f) for f in (TYPES_FILE, EFA_FILE, GPU_FILE)},
                f"{INSTANCETYPE}/{VPC_LIMITS_FILE}": _sha256(module / INSTANCETYPE / VPC_LIMITS_FILE),
            },
            "supplement": {"file": str(supplement.relative_to(REPO)), "sha256": _sha256(supplement)},
        },
        "regenerate": f"{download_line(version)} && fabriccap-dev catalog",
        "notes": [
            "maximum: EFAMetadataByInstanceType[type].Count (EC2 MaximumEfaInterfaces); 0 for accelerator"
            " types without EFA.",
            "family, category, generation, size: Karpenter's karpenter.k8s.aws/instance-* values, from the name.",
            "arch, cpu, memoryMiB, hypervisor, gpu and accelerator labels, Neuron resources: the supplement"
            " (each entry names its source); GPU counts: GPUMetadataByInstanceType.",
            f"networkCards: {INSTANCETYPE}/{VPC_LIMITS_FILE} Limits[type].NetworkCards, each card's"
            " MaximumNetworkInterfaces by NetworkCardIndex (EC2's NetworkInfo.NetworkCards); null where"
            " Limits has no entry for the type.",
        ],
        "columns": list(COLUMNS),
        "types": rows,
    }


def render(document: Mapping[str, Any]) -> str:
    """Compact, diff-friendly JSON: the header indented, one instance type per line."""
    header = {key: value for key, value in document.items() if key != "types"}
    text = json.dumps(header, indent=1, ensure_ascii=False)
    rows = ",\n".join(json.dumps(row, separators=(",", ":"), ensure_ascii=False) for row in document["types"])
    return text[: text.rstrip().rfind("}")].rstrip() + ',\n "types": [\n' + rows + "\n ]\n}\n"


def generate(module: Path, version: str = MODULE_VERSION) -> str:
    text = render(build_catalog(module, version))
    parse_catalog(json.loads(text), "generated catalog")  # what the product will read must parse
    return text
