"""tests/image/ociimage.py on hand-made OCI archives: each check finds what it is there to find.

test_image.py asserts that these checks find nothing in the real image; here every one of them
is shown an image that breaks it. No root, no build: these run everywhere.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import io
import json
import struct
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest

import ociimage

EPOCH = 1735689600


@dataclass(frozen=True)
class Member:
    name: str
    kind: str = "file"  # file, dir, symlink, hardlink
    data: bytes = b""
    mode: int = 0o644
    uid: int = 0
    gid: int = 0
    link: str = ""
    mtime: int = EPOCH


def file(name: str, data: bytes = b"", mode: int = 0o644, uid: int = 0, gid: int = 0, mtime: int = EPOCH) -> Member:
    return Member(name, "file", data, mode, uid, gid, mtime=mtime)


def directory(name: str, mode: int = 0o755) -> Member:
    return Member(name, "dir", mode=mode)


def symlink(name: str, target: str) -> Member:
    return Member(name, "symlink", mode=0o777, link=target)


def hardlink(name: str, target: str) -> Member:
    return Member(name, "hardlink", link=target)


def whiteout(path: str) -> Member:
    parent, _, base = path.rpartition("/")
    return file(f"{parent}/.wh.{base}")


def opaque(path: str) -> Member:
    return file(f"{path}/.wh..wh..opq")


def layer(*members: Member) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for member in members:
            info = tarfile.TarInfo(member.name)
            info.mode, info.uid, info.gid, info.mtime = member.mode, member.uid, member.gid, member.mtime
            info.type = {
                "file": tarfile.REGTYPE,
                "dir": tarfile.DIRTYPE,
                "symlink": tarfile.SYMTYPE,
                "hardlink": tarfile.LNKTYPE,
            }[member.kind]
            info.linkname = member.link
            info.size = len(member.data) if member.kind == "file" else 0
            tar.addfile(info, io.BytesIO(member.data) if member.kind == "file" else None)
    return gzip.compress(buffer.getvalue(), mtime=0)


def write_archive(path: Path, *layers: bytes, config: dict[str, object] | None = None, corrupt: bool = False) -> str:
    """An oci-archive as buildah writes one; returns its manifest digest."""
    blobs: dict[str, bytes] = {}

    def add(data: bytes) -> str:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        blobs[digest] = data
        return digest

    config_blob = json.dumps({"os": "linux", "architecture": "amd64", "config": config or {}}).encode()
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": add(config_blob)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": add(b)} for b in layers],
    }
    manifest_blob = json.dumps(manifest).encode()
    manifest_digest = add(manifest_blob)
    if corrupt:
        blobs[manifest_digest] = manifest_blob + b" "
    index = {"schemaVersion": 2, "manifests": [{"mediaType": manifest["mediaType"], "digest": manifest_digest}]}
    with tarfile.open(path, "w") as tar:
        for name, data in [
            ("oci-layout", b'{"imageLayoutVersion": "1.0.0"}'),
            ("index.json", json.dumps(index).encode()),
            *((f"blobs/sha256/{d.partition(':')[2]}", b) for d, b in blobs.items()),
        ]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return manifest_digest


def load(tmp_path: Path, *layers: bytes, config: dict[str, object] | None = None) -> ociimage.Image:
    archive = tmp_path / "image.oci.tar"
    write_archive(archive, *layers, config=config)
    return ociimage.load(archive, keep=lambda path: path.endswith((".pyc", ".py", "METADATA", "status", "/tool")))


# ---------------------------------------------------------------------------------------------
# Reading


def test_layers_apply_in_order_with_whiteouts(tmp_path: Path) -> None:
    base = layer(
        directory("a"),
        file("a/gone"),
        file("a/kept"),
        directory("b"),
        file("b/old"),
        directory("b/sub"),
        file("b/sub/deep"),
        directory("c"),
        file("c/inside"),
        file("d", b"lower"),
    )
    upper = layer(
        whiteout("a/gone"),
        file("b/new"),  # added before this layer's opaque marker: stays
        opaque("b"),
        file("c", b"a file now"),  # replaces the directory and its tree
        file("d", b"upper"),
    )
    image = load(tmp_path, base, upper, config={"User": "65532:65532"})
    paths = {p for p, e in image.files.items() if e.kind != "dir"}
    assert paths == {"/a/kept", "/b/new", "/c", "/d"}
    assert "/b/sub" not in image.files and "/b" in image.files
    assert image.files["/d"].data is None  # not asked for: metadata only
    assert image.runtime == {"User": "65532:65532"}


def test_a_manifest_that_does_not_hash_to_its_digest_is_refused(tmp_path: Path) -> None:
    archive = tmp_path / "image.oci.tar"
    write_archive(archive, layer(file("x")), corrupt=True)
    with pytest.raises(ValueError, match="does not hash to its name"):
        ociimage.load(archive)


def test_the_manifest_digest_is_the_sha256_of_the_manifest_blob(tmp_path: Path) -> None:
    archive = tmp_path / "image.oci.tar"
    digest = write_archive(archive, layer(file("x")))
    assert ociimage.load(archive).manifest_digest == digest


def test_symlinks_resolve_inside_the_image(tmp_path: Path) -> None:
    image = load(
        tmp_path,
        layer(
            directory("usr"),
            directory("usr/bin"),
            file("usr/bin/python3.11", mode=0o755),
            symlink("usr/bin/python3", "python3.11"),
            symlink("bin", "usr/bin"),
            directory("opt"),
            directory("opt/venv"),
            directory("opt/venv/bin"),
            symlink("opt/venv/bin/python", "/bin/python3"),
            symlink("loop", "loop"),
            hardlink("usr/bin/tool", "usr/bin/python3.11"),
        ),
    )
    assert ociimage.resolve(image.files, "/opt/venv/bin/python") == "/usr/bin/python3.11"
    assert ociimage.resolve(image.files, "/bin/../bin/python3") == "/usr/bin/python3.11"
    assert ociimage.resolve(image.files, "/loop") is None
    assert ociimage.resolve(image.files, "/bin/missing") is None
    assert image.files["/usr/bin/tool"].link == "/usr/bin/python3.11"


# ---------------------------------------------------------------------------------------------
# Each check finds what breaks it


def test_find_compilers(tmp_path: Path) -> None:
    image = load(
        tmp_path,
        layer(
            file("usr/bin/x86_64-linux-gnu-gcc-12", mode=0o755),
            symlink("usr/bin/cc", "x86_64-linux-gnu-gcc-12"),
            file("usr/bin/ld.bfd", mode=0o755),
            file("usr/bin/as", mode=0o755),
            directory("usr/lib/gcc/x86_64-linux-gnu/12"),
            file("usr/bin/ascii", mode=0o755),  # not a compiler
            file("usr/share/doc/gcc", mode=0o644),  # not executable
        ),
    )
    assert ociimage.find_compilers(image.files) == [
        "/usr/bin/as",
        "/usr/bin/cc",
        "/usr/bin/ld.bfd",
        "/usr/bin/x86_64-linux-gnu-gcc-12",
        "/usr/lib/gcc/x86_64-linux-gnu/12",
    ]


def test_find_pip(tmp_path: Path) -> None:
    site = "opt/venv/lib/python3.11/site-packages"
    image = load(
        tmp_path,
        layer(
            file("usr/local/bin/pip3", mode=0o755),
            directory(f"{site}/pip"),
            directory(f"{site}/pip-25.0.dist-info"),
            directory("usr/lib/python3/dist-packages/pip"),
            file("usr/share/python-wheels/pip-23.0.1-py3-none-any.whl"),
            file("usr/share/python-wheels/setuptools-66.1.1-py3-none-any.whl"),  # not pip
            file("usr/bin/pipx-notes"),
        ),
    )
    assert ociimage.find_pip(image.files) == [
        f"/{site}/pip",
        f"/{site}/pip-25.0.dist-info",
        "/usr/lib/python3/dist-packages/pip",
        "/usr/local/bin/pip3",
        "/usr/share/python-wheels/pip-23.0.1-py3-none-any.whl",
    ]


def test_a_whiteout_removes_what_a_lower_layer_installed(tmp_path: Path) -> None:
    wheel = "usr/share/python-wheels/pip-23.0.1-py3-none-any.whl"
    image = load(tmp_path, layer(directory("usr/share/python-wheels"), file(wheel)), layer(whiteout(wheel)))
    assert ociimage.find_pip(image.files) == []


def metadata(name: str, version: str) -> bytes:
    return f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\nlong description\n".encode()


def test_distributions(tmp_path: Path) -> None:
    site = "opt/venv/lib/python3.11/site-packages"
    image = load(
        tmp_path,
        layer(
            file(f"{site}/typing_extensions-4.16.0.dist-info/METADATA", metadata("typing_extensions", "4.16.0")),
            file(f"{site}/PyYAML-6.0.4.dist-info/METADATA", metadata("PyYAML", "6.0.4")),
            file(f"{site}/six-1.16.0.dist-info/METADATA", metadata("six", "1.16.0")),
            file(f"{site}/idna-3.20.dist-info/METADATA", metadata("idna", "3.20")),
            directory(f"{site}/broken-1.0.dist-info"),
            directory(f"{site}/legacy-1.0.egg-info"),
        ),
        layer(whiteout(f"{site}/idna-3.20.dist-info")),
    )
    assert ociimage.site_packages(image.files, "/opt/venv") == [f"/{site}"]
    installed, other = ociimage.distributions(image.files, f"/{site}")
    assert installed == {"typing-extensions": "4.16.0", "pyyaml": "6.0.4", "six": "1.16.0"}
    assert sorted(other) == ["broken-1.0.dist-info (no METADATA)", "legacy-1.0.egg-info"]


def test_read_pins(tmp_path: Path) -> None:
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("# comment\nPyYAML==6.0.4  # why\ntyping_extensions==4.16.0\n\n")
    assert ociimage.read_pins(requirements) == {"pyyaml": "6.0.4", "typing-extensions": "4.16.0"}
    requirements.write_text("kopf>=1.44\n")
    with pytest.raises(ValueError, match="not a name==version pin"):
        ociimage.read_pins(requirements)


def test_find_writable(tmp_path: Path) -> None:
    image = load(
        tmp_path,
        layer(
            directory("opt/venv"),
            directory("opt/venv/bin"),
            file("opt/venv/bin/ok", mode=0o755),
            file("opt/venv/owned", mode=0o444, uid=65532),
            file("opt/venv/group", mode=0o664, gid=65532),
            file("opt/venv/other-group", mode=0o664, gid=100),
            file("opt/venv/world", mode=0o646),
            symlink("opt/venv/link", "/tmp"),
            file("tmp/elsewhere", mode=0o666),
        ),
    )
    assert ociimage.find_writable(image.files, "/opt/venv", 65532, 65532) == [
        "/opt/venv/group",
        "/opt/venv/owned",
        "/opt/venv/world",
    ]


def pyc(flags: int, fields: bytes) -> bytes:
    return importlib.util.MAGIC_NUMBER + struct.pack("<I", flags) + fields + b"code"


def test_find_stale_bytecode(tmp_path: Path) -> None:
    source = b"print('hello')\n"
    good_hash = importlib.util.source_hash(source)
    cache = "lib/__pycache__"
    image = load(
        tmp_path,
        layer(
            *(file(f"lib/{name}.py", source, mtime=EPOCH) for name in ("stamp", "moved", "hashed", "wrong", "free")),
            file(f"{cache}/stamp.cpython-311.pyc", pyc(0, struct.pack("<II", EPOCH, len(source)))),
            file(f"{cache}/moved.cpython-311.pyc", pyc(0, struct.pack("<II", EPOCH + 1, len(source)))),
            file(f"{cache}/hashed.cpython-311.pyc", pyc(0b11, good_hash)),
            file(f"{cache}/wrong.cpython-311.pyc", pyc(0b11, b"\0" * 8)),
            file(f"{cache}/free.cpython-311.pyc", pyc(0b01, b"\0" * 8)),  # unchecked: never validated
            file(f"{cache}/orphan.cpython-311.pyc", pyc(0, b"\0" * 8)),  # no source: used as it is
        ),
    )
    stale = ociimage.find_stale_bytecode(image.files)
    assert [s.split()[0] for s in stale] == [f"/{cache}/moved.cpython-311.pyc", f"/{cache}/wrong.cpython-311.pyc"]


def test_dpkg_packages(tmp_path: Path) -> None:
    status = (
        b"Package: zlib1g\nStatus: install ok installed\nVersion: 1:1.2.13.dfsg-1\n\n"
        b"Package: old\nStatus: deinstall ok config-files\nVersion: 1.0\n\n"
        b"Package: bash\nStatus: install ok installed\nEssential: yes\nVersion: 5.2.15-2+b13\n"
    )
    image = load(tmp_path, layer(file("var/lib/dpkg/status", status)))
    assert ociimage.dpkg_packages(image.files) == ["bash=5.2.15-2+b13", "zlib1g=1:1.2.13.dfsg-1"]


# ---------------------------------------------------------------------------------------------
# Extraction


def test_extract_applies_whiteouts_like_load(tmp_path: Path) -> None:
    base = layer(directory("a"), file("a/gone"), file("a/kept", b"kept"), directory("b"), file("b/old"))
    upper = layer(whiteout("a/gone"), file("b/new", b"new"), opaque("b"), symlink("c", "a/kept"))
    archive = tmp_path / "image.oci.tar"
    write_archive(archive, base, upper, config={"Entrypoint": ["x"]})
    rootfs = tmp_path / "rootfs"
    rootfs.mkdir()
    config = ociimage.extract(archive, rootfs)
    assert config["config"] == {"Entrypoint": ["x"]}
    assert sorted(str(p.relative_to(rootfs)) for p in rootfs.rglob("*")) == ["a", "a/kept", "b", "b/new", "c"]
    assert (rootfs / "c").read_bytes() == b"kept"
    loaded = {p for p in ociimage.load(archive).files if p != "/"}
    assert loaded == {"/a", "/a/kept", "/b", "/b/new", "/c"}


def test_extract_writes_nothing_outside_the_destination(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    archive = tmp_path / "image.oci.tar"
    write_archive(archive, layer(symlink("escape", str(outside))), layer(file("escape/planted", b"x")))
    rootfs = tmp_path / "rootfs"
    rootfs.mkdir()
    with pytest.raises((ValueError, tarfile.FilterError)):
        ociimage.extract(archive, rootfs)
    assert list(outside.iterdir()) == []
