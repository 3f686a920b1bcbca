"""An OCI image archive read with the standard library only: no container engine, no registry.

An ``oci-archive`` (what ``buildah push IMAGE oci-archive:FILE`` writes, and what
``ctr images import`` reads) is a plain tar of an OCI image layout: ``index.json`` names a
manifest blob, which names the config blob and the layer blobs (gzip'd tars). ``load`` applies
the layers in order, with the OCI whiteouts, into a table of paths: every entry's metadata, and
the content of the few files the checks read. ``extract`` writes the same filesystem to a
directory. The ``find_*`` functions below are the image's properties, each returning what
breaks it (empty when it holds); tests/image/test_ociimage.py shows that each one can fail.
"""

from __future__ import annotations

import email.parser
import hashlib
import importlib.util
import json
import os
import posixpath
import re
import shutil
import struct
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

Kind = Literal["file", "dir", "symlink", "hardlink", "other"]
Json = dict[str, Any]

INDEX_TYPES = frozenset(
    {"application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json"}
)
WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"


@dataclass(frozen=True)
class Entry:
    kind: Kind
    mode: int
    uid: int
    gid: int
    size: int
    mtime: int
    link: str = ""  # symlink target as written; hardlink target as an absolute path
    data: bytes | None = None  # content, only for the paths `load` was asked to keep


@dataclass
class Image:
    manifest_digest: str
    manifest: Json
    config: Json
    files: dict[str, Entry] = field(default_factory=dict)

    @property
    def runtime(self) -> Json:
        """The config's ``config`` object: User, Env, Entrypoint, Cmd..."""
        runtime: Json = self.config.get("config", {})
        return runtime

    @property
    def env(self) -> dict[str, str]:
        pairs = (item.partition("=") for item in self.runtime.get("Env", []))
        return {name: value for name, _, value in pairs}


# ---------------------------------------------------------------------------------------------
# Reading


def _blob(outer: tarfile.TarFile, digest: str) -> IO[bytes]:
    algorithm, _, hexdigest = digest.partition(":")
    member = outer.extractfile(f"blobs/{algorithm}/{hexdigest}")
    if member is None:
        raise ValueError(f"blob {digest} is not in the archive")
    return member


def _json_blob(outer: tarfile.TarFile, digest: str) -> Json:
    data = _blob(outer, digest).read()
    algorithm, _, hexdigest = digest.partition(":")
    if algorithm != "sha256" or hashlib.sha256(data).hexdigest() != hexdigest:
        raise ValueError(f"blob {digest} does not hash to its name")
    document: Json = json.loads(data)
    return document


def _manifest(outer: tarfile.TarFile, index: Json, architecture: str) -> tuple[str, Json]:
    """The manifest for ``architecture`` (through nested indexes, as multi-platform images have)."""
    descriptors = index.get("manifests", [])
    matching = [d for d in descriptors if d.get("platform", {}).get("architecture", architecture) == architecture]
    if len(matching) != 1:
        raise ValueError(f"expected one {architecture} manifest in the index, found {len(matching)}")
    descriptor = matching[0]
    document = _json_blob(outer, descriptor["digest"])
    if descriptor.get("mediaType") in INDEX_TYPES or document.get("mediaType") in INDEX_TYPES:
        return _manifest(outer, document, architecture)
    return descriptor["digest"], document


def _layers(archive: Path, architecture: str) -> Iterator[tuple[str, Json, Json, tarfile.TarFile | None]]:
    """Yields (manifest digest, manifest, config, None), then (…, each layer as a tar stream)."""
    with tarfile.open(archive) as outer:
        index_file = outer.extractfile("index.json")
        if index_file is None:
            raise ValueError(f"{archive}: no index.json (not an OCI image layout)")
        digest, manifest = _manifest(outer, json.load(index_file), architecture)
        config = _json_blob(outer, manifest["config"]["digest"])
        yield digest, manifest, config, None
        for descriptor in manifest["layers"]:
            # A stream ("r|*"): members in order, each read once. Random access into a gzip'd
            # tar would decompress it again from the start for every backward seek.
            with tarfile.open(fileobj=_blob(outer, descriptor["digest"]), mode="r|*") as layer:
                yield digest, manifest, config, layer


def _path(name: str) -> str:
    normalised = posixpath.normpath("/" + name)
    return "/" if normalised in ("/", "//") else normalised


def _kind(member: tarfile.TarInfo) -> Kind:
    if member.isdir():
        return "dir"
    if member.issym():
        return "symlink"
    if member.islnk():
        return "hardlink"
    if member.isfile():
        return "file"
    return "other"


def _remove(files: dict[str, Entry], path: str, keep: set[str], tree: bool) -> None:
    """Removes ``path`` and, with ``tree``, everything under it, except what ``keep`` holds.

    A tar need not list a file's directories, so a tree is found by prefix, not by its entry.
    """
    if path in files and path not in keep:
        del files[path]
    if tree:
        prefix = path.rstrip("/") + "/"
        for child in [p for p in files if p.startswith(prefix) and p not in keep]:
            del files[child]


def load(archive: Path, keep: Callable[[str], bool] = lambda path: False, architecture: str = "amd64") -> Image:
    """The image's filesystem as the runtime assembles it, from the archive's layers in order.

    Whiteouts apply to the lower layers only (the OCI image spec), so what a layer adds itself
    stays even where its whiteout entry comes after it in the tar stream.
    """
    image: Image | None = None
    for digest, manifest, config, layer in _layers(archive, architecture):
        if layer is None:
            image = Image(digest, manifest, config)
            continue
        assert image is not None
        files = image.files
        added: set[str] = set()
        for member in layer:
            path = _path(member.name)
            parent, base = posixpath.split(path)
            if base == OPAQUE:
                prefix = parent.rstrip("/") + "/"
                for child in [p for p in files if p.startswith(prefix) and p not in added]:
                    del files[child]
                continue
            if base.startswith(WHITEOUT):
                _remove(files, posixpath.join(parent, base[len(WHITEOUT) :]), added, tree=True)
                continue
            kind = _kind(member)
            old = files.get(path)
            if old is not None and not (kind == "dir" and old.kind == "dir"):
                _remove(files, path, added, tree=old.kind == "dir")  # replaced, a directory with its tree
            data: bytes | None = None
            link = member.linkname if kind == "symlink" else ""
            if kind == "hardlink":
                link = _path(member.linkname)
                target = files.get(link)
                data = target.data if target is not None else None
            elif kind == "file" and keep(path):
                content = layer.extractfile(member)
                data = content.read() if content is not None else b""
            files[path] = Entry(kind, member.mode, member.uid, member.gid, member.size, int(member.mtime), link, data)
            added.add(path)
    if image is None:
        raise ValueError(f"{archive}: no manifest")
    return image


def resolve(files: dict[str, Entry], path: str, hops: int = 40) -> str | None:
    """``path`` with every symlink in it followed, as the kernel would inside the image's root."""
    pending = [part for part in path.split("/") if part]
    done = "/"
    while pending:
        part = pending.pop(0)
        if part == ".":
            continue
        if part == "..":
            done = posixpath.dirname(done)
            continue
        current = posixpath.join(done, part)
        entry = files.get(current)
        if entry is None:
            return None
        if entry.kind == "symlink":
            hops -= 1
            if hops < 0:
                return None
            pending = [p for p in entry.link.split("/") if p] + pending
            if entry.link.startswith("/"):
                done = "/"
            continue
        done = current
    return done


def extract(archive: Path, destination: Path, architecture: str = "amd64") -> Json:
    """Writes the image's filesystem under ``destination`` (as root: owners kept); returns the config.

    The same whiteout rules as ``load``. Members pass tarfile's "tar" filter: nothing lands
    outside ``destination`` (absolute paths, ``..``, symlinks followed on the way), and
    setuid/setgid bits are dropped.
    """
    config: Json = {}
    for _, _, layer_config, layer in _layers(archive, architecture):
        if layer is None:
            config = layer_config
            continue
        added: set[str] = set()
        for member in layer:
            path = _path(member.name)
            parent, base = posixpath.split(path)
            if not _inside(destination, destination / parent.lstrip("/")):
                raise ValueError(f"{member.name}: its directory resolves outside {destination}")
            if base == OPAQUE:
                directory = destination / parent.lstrip("/")
                if directory.is_dir():
                    for child in directory.iterdir():
                        if "/" + str(child.relative_to(destination)) not in added:
                            _delete(child)
                continue
            if base.startswith(WHITEOUT):
                gone = posixpath.join(parent, base[len(WHITEOUT) :])
                if gone not in added:
                    _delete(destination / gone.lstrip("/"))
                continue
            target = destination / path.lstrip("/")
            if target.is_symlink() or (target.exists() and not (member.isdir() and target.is_dir())):
                _delete(target)
            layer.extract(member, destination, set_attrs=True, numeric_owner=True, filter="tar")
            added.add(path)
    return config


def _inside(root: Path, path: Path) -> bool:
    """Whether ``path``, its symlinks followed on the host, stays under ``root``."""
    real_root = os.path.realpath(root)
    return os.path.commonpath([real_root, os.path.realpath(path)]) == real_root


def _delete(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.is_symlink() or path.exists():
        path.unlink()


# ---------------------------------------------------------------------------------------------
# Properties: each find_* returns what breaks it


def _executable(entry: Entry) -> bool:
    return entry.kind in ("file", "hardlink", "symlink") and bool(entry.mode & 0o111)


COMPILER = re.compile(
    r"(?:[a-z0-9_]+-linux-gnu[a-z]*-)?"
    r"(?:gcc|cc|c\+\+|g\+\+|cpp|clang|clang\+\+|tcc|as|ld|ld\.bfd|ld\.gold|ld\.lld|lld|gold"
    r"|cc1|cc1plus|collect2|lto1|lto-wrapper|rustc|go)(?:-[0-9][0-9.]*)?"
)


def find_compilers(files: dict[str, Entry]) -> list[str]:
    """Compilers, assemblers, linkers (by executable name), and gcc's own tree."""
    found = [p for p, e in files.items() if _executable(e) and COMPILER.fullmatch(posixpath.basename(p))]
    found += [p for p in files if re.fullmatch(r"/usr/(lib|libexec)/gcc(-cross)?/[^/]+/[^/]+", p)]
    return sorted(found)


def find_pip(files: dict[str, Entry]) -> list[str]:
    """pip in any form: an executable, a module or its metadata, or a wheel ensurepip would install."""
    found = []
    for path, entry in files.items():
        base = posixpath.basename(path)
        executable = _executable(entry) and re.fullmatch(r"pip[0-9.]*", base)
        module = re.search(r"/(site|dist)-packages/(pip|pip-[^/]+\.(dist|egg)-info)$", path)
        wheel = re.fullmatch(r"pip-[^/]+\.whl", base)
        if executable or module or wheel:
            found.append(path)
    return sorted(found)


def canonical_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def site_packages(files: dict[str, Entry], venv: str) -> list[str]:
    pattern = re.compile(rf"({re.escape(venv)}/lib/python3\.\d+/site-packages)(?:/|$)")
    return sorted({match.group(1) for match in map(pattern.match, files) if match})


def distributions(files: dict[str, Entry], site: str) -> tuple[dict[str, str], list[str]]:
    """{canonical name: version} of the dist-infos in ``site``, and anything else that is a dist."""
    installed: dict[str, str] = {}
    unreadable: list[str] = []
    prefix = site + "/"
    children = {path[len(prefix) :].split("/", 1)[0] for path in files if path.startswith(prefix)}
    for name in sorted(children):
        if name.endswith(".dist-info"):
            metadata = files.get(prefix + name + "/METADATA")
            if metadata is None or metadata.data is None:
                unreadable.append(f"{name} (no METADATA)")
                continue
            headers = email.parser.BytesParser().parsebytes(metadata.data, headersonly=True)
            installed[canonical_name(headers["Name"])] = headers["Version"]
        elif name.endswith((".egg-info", ".egg")):
            unreadable.append(name)
    return installed, unreadable


def find_writable(files: dict[str, Entry], tree: str, uid: int, gid: int) -> list[str]:
    """Paths under ``tree`` that ``uid:gid`` may write (owner, group or world write bits)."""
    found = []
    for path, entry in files.items():
        if entry.kind == "symlink" or not (path == tree or path.startswith(tree + "/")):
            continue
        # The owner may chmod it even without a write bit.
        if entry.uid == uid or (entry.gid == gid and entry.mode & 0o020) or entry.mode & 0o002:
            found.append(path)
    return sorted(found)


def find_stale_bytecode(files: dict[str, Entry]) -> list[str]:
    """.pyc files their interpreter would not use: it would recompile the source at every start
    (in memory, as the root filesystem is read-only). A timestamp-based .pyc records its
    source's mtime and size; a checked hash-based one its source's hash (verified when the
    source's content was loaded).
    """
    stale = []
    for path, entry in files.items():
        match = re.fullmatch(r"(.*)/__pycache__/([^/.]+)\.cpython-\d+(?:\.opt-\d)?\.pyc", path)
        if not match or entry.kind != "file":
            continue
        source = files.get(f"{match.group(1)}/{match.group(2)}.py")
        if source is None:
            continue  # bytecode without source is used as it is
        header = entry.data
        if header is None or len(header) < 16:
            stale.append(f"{path} (header not read)")
            continue
        (flags,) = struct.unpack("<I", header[4:8])
        if flags & 0b01:  # hash-based
            if flags & 0b10 and source.data is not None and importlib.util.source_hash(source.data) != header[8:16]:
                stale.append(f"{path} (source hash differs)")
            continue
        mtime, size = struct.unpack("<II", header[8:16])
        if (mtime, size) != (source.mtime & 0xFFFFFFFF, source.size & 0xFFFFFFFF):
            stale.append(f"{path} (records mtime {mtime} size {size}, source has {source.mtime} {source.size})")
    return sorted(stale)


def dpkg_packages(files: dict[str, Entry]) -> list[str]:
    """``pkg=version`` of every package dpkg's database in the image holds, sorted."""
    status = files.get("/var/lib/dpkg/status")
    if status is None or status.data is None:
        return []
    packages = []
    for stanza in status.data.decode().split("\n\n"):
        fields = dict(re.findall(r"^([A-Za-z-]+): (.*)$", stanza, re.MULTILINE))
        if "Package" in fields and "installed" in fields.get("Status", "").split():
            packages.append(f"{fields['Package']}={fields['Version']}")
    return sorted(packages)


def read_pins(requirements: Path) -> dict[str, str]:
    """{canonical name: version} of a requirements file made of ``name==version`` lines."""
    pins = {}
    for raw in requirements.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*(\S+)", line)
        if not match:
            raise ValueError(f"{requirements}: not a name==version pin: {raw!r}")
        pins[canonical_name(match.group(1))] = match.group(2)
    return pins


def lock_pins(lock: Path) -> list[str]:
    """The ``pkg=version`` lines of a Debian lock file (scripts/base-packages-<arch>.lock), sorted."""
    lines = (line.strip() for line in lock.read_text().splitlines())
    return sorted(line for line in lines if line and not line.startswith("#"))
