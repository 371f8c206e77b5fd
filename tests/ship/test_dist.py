"""What scripts/dist ships, tried as a user gets it. (Not in tests/dist/: pytest does not look
in directories named dist.)

The wheel, installed into fresh virtualenvs of CPython 3.9 and 3.13 with no Rust toolchain on
PATH, serves the demo, a WSGI app and an ASGI app; the standalone binary serves a Node app
through --cmd, and runs `load` and `lab`, with no Python on PATH. Both run under Debian
bullseye's glibc 2.31, older than this machine's (3.9 is bullseye's interpreter, run through
bullseye's loader by scripts/pythons; 3.13 is trixie's, on trixie's). Each is true to its
glibc 2.17 floor (`auditwheel show`, `objdump -T`), stripped, and names its version, commit and
target. The sdist holds the whole workspace a build reads.

The artefacts come from dist/ (scripts/dist), the interpreters from .pythons/ (scripts/pythons).
Where they are missing the tests are skipped, except under CI, where they fail.
"""

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path
from typing import NamedTuple

import pytest
from packaging.utils import parse_wheel_filename

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "server"))
from conftest import APPS, Server, missing  # noqa: E402

DIST = REPO / "dist"
PYTHONS = REPO / ".pythons"
AUDITWHEEL = REPO / ".dist-tools" / "bin" / "auditwheel"
TWINS = REPO / "python" / "headway" / "twins"
ARCH = platform.machine()
TARGET = f"{ARCH}-unknown-linux-gnu"
GLIBC_FLOOR = (2, 17)
# Bullseye's libc, which the servers below must have mapped.
BULLSEYE_LIBC = PYTHONS / "3.9" / "debian" / "lib" / f"{ARCH}-linux-gnu" / "libc-2.31.so"


def the_one(pattern):
    found = sorted(DIST.glob(pattern))
    if len(found) != 1:
        missing(f"dist/ holds {[path.name for path in found]} for {pattern}, not one (run scripts/dist)")
    return found[0]


@pytest.fixture(scope="module")
def version():
    metadata = subprocess.run(["cargo", "metadata", "--no-deps", "--format-version", "1"], cwd=REPO,
                              capture_output=True, text=True, timeout=120, check=True).stdout
    return next(package["version"] for package in json.loads(metadata)["packages"] if package["name"] == "headway")


@pytest.fixture(scope="module")
def wheel(version):
    return the_one(f"headway-{version}-cp39-abi3-manylinux*_{ARCH}.whl")


@pytest.fixture(scope="module")
def archive(version):
    return the_one(f"headway-{version}-{ARCH}-linux.tar.gz")


@pytest.fixture(scope="module")
def binary(archive, tmp_path_factory):
    """The standalone binary, unpacked from its archive as a user would."""
    where = tmp_path_factory.mktemp("binary")
    with tarfile.open(archive) as packed:
        packed.extractall(where, filter="data")
    return where / archive.name.removesuffix(".tar.gz") / "headway"


@pytest.fixture(scope="module")
def extension(wheel, tmp_path_factory):
    where = tmp_path_factory.mktemp("wheel")
    with zipfile.ZipFile(wheel) as packed:
        packed.extractall(where)
    (found,) = where.glob("headway/_native*.so")
    return found


def run_script(version):
    """.pythons/VERSION/run: runs a program under that Debian's loader and glibc."""
    run = PYTHONS / version / "run"
    if not run.is_file():
        missing(f"{run} (run scripts/pythons)")
    return run


def dynamic_symbols(path):
    """(name, version or None, undefined, weak) for each dynamic symbol, as `objdump -T` lists them."""
    listing = subprocess.run(["objdump", "-T", str(path)], capture_output=True, text=True, check=True).stdout
    line = re.compile(r"^[0-9a-f]+ (?P<flags>.{7}) (?P<section>\S+)\t[0-9a-f]+\s+(?:\(?(?P<version>[^\s()]+)\)?\s+)?"
                      r"(?P<name>\S+)$")
    symbols = [match.group("name", "version", "section", "flags") for match in map(line.match, listing.splitlines())
               if match]
    assert symbols, listing
    return [(name, version, section == "*UND*", "w" in flags) for name, version, section, flags in symbols]


def glibc_floor(path):
    """The newest glibc symbol version `path` needs."""
    versions = [version for _, version, undefined, _ in dynamic_symbols(path) if undefined and version]
    return max(tuple(map(int, version.split("_")[1].split(".")[:2])) for version in versions
               if version.startswith("GLIBC_"))


def assert_loads_on_glibc_floor(path, python_api=False):
    """No symbol needs a glibc newer than the floor; and every symbol it needs has a version, or is
    weak (probed for at run time, as Rust's standard library does for gettid or statx): a strong
    symbol without one binds to whatever the loading libc has, and glibc 2.17 lacks newer ones
    (memfd_create is 2.27's). An extension's unversioned Python C API is the interpreter's."""
    assert glibc_floor(path) <= GLIBC_FLOOR
    unversioned = [name for name, version, undefined, weak in dynamic_symbols(path)
                   if undefined and not version and not weak and not (python_api and re.match(r"_?Py", name))]
    assert unversioned == []


def assert_stripped(path):
    sections = subprocess.run(["readelf", "-S", "--wide", str(path)], capture_output=True, text=True, check=True).stdout
    assert ".text" in sections and ".symtab" not in sections, "no symbol table"


def test_the_wheel_is_abi3_manylinux2014_and_true_to_its_tag(wheel, extension, version):
    name, wheel_version, _, tags = parse_wheel_filename(wheel.name)
    assert (name, str(wheel_version)) == ("headway", version)
    assert {str(tag) for tag in tags} == {f"cp39-abi3-manylinux2014_{ARCH}", f"cp39-abi3-manylinux_2_17_{ARCH}"}
    if not AUDITWHEEL.is_file():
        missing(f"{AUDITWHEEL} (run scripts/dist)")
    shown = subprocess.run([AUDITWHEEL, "show", wheel], capture_output=True, text=True, check=True).stdout
    assert f'consistent with the following platform tag: "manylinux_2_17_{ARCH}"' in " ".join(shown.split()), shown
    assert_loads_on_glibc_floor(extension, python_api=True)
    assert_stripped(extension)
    exported = [name for name, _, undefined, _ in dynamic_symbols(extension) if not undefined]
    assert exported == ["PyInit__native"], "the extension exports its module's entry point alone"


def test_the_wheel_ships_the_package_and_nothing_else(wheel):
    with zipfile.ZipFile(wheel) as packed:
        tops = {Path(name).parts[0] for name in packed.namelist()}
        files = {name for name in packed.namelist() if name.startswith("headway/")}
    assert tops == {"headway", f"headway-{parse_wheel_filename(wheel.name)[1]}.dist-info"}
    in_tree = {str(path.relative_to(REPO / "python")) for path in (REPO / "python" / "headway").rglob("*")
               if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".so"}
    # The lab carries its own copies of these (pyproject.toml's [tool.maturin] exclude).
    lab_only = {"headway/twins/demo.ru", "headway/twins/demo.js"}
    # The extension itself; its stub (_native.pyi) and py.typed are in the tree.
    (native,) = {name for name in files if name.startswith("headway/_native") and name.endswith(".so")}
    assert files - {native} == in_tree - lab_only, "the package's sources and data, as in the tree"
    assert "headway/_native.pyi" in files and "headway/py.typed" in files, "the types, for type checkers"


def test_the_binary_archive_has_its_checksum_and_the_binary_alone(archive, binary):
    sums = (archive.parent / f"{archive.name}.sha256").read_text().split()
    assert sums == [hashlib.sha256(archive.read_bytes()).hexdigest(), archive.name], "as `sha256sum -c` reads it"
    with tarfile.open(archive) as packed:
        members = {member.name: member for member in packed.getmembers()}
    top = archive.name.removesuffix(".tar.gz")
    assert set(members) == {top, f"{top}/headway"}
    assert members[f"{top}/headway"].mode & 0o111 == 0o111
    assert_loads_on_glibc_floor(binary)
    assert_stripped(binary)
    needed = subprocess.run(["readelf", "-d", str(binary)], capture_output=True, text=True, check=True).stdout
    assert "libc.so.6" in needed and "python" not in needed.lower(), "needs no Python at all"


def test_version_names_the_version_the_commit_and_the_target(binary, version):
    line = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30, check=True).stdout
    match = re.fullmatch(rf"headway {re.escape(version)} \(commit ([0-9a-f]{{12}}), {TARGET}\)\n", line)
    assert match, line
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert head.startswith(match[1]), f"dist/ was built from {match[1]}, not HEAD {head.strip()} (run scripts/dist)"


def test_the_sdist_holds_the_workspace_a_build_reads(version, tmp_path):
    sdist = the_one(f"headway-{version}.tar.gz")
    with tarfile.open(sdist) as packed:
        packed.extractall(tmp_path, filter="data")
    root = tmp_path / f"headway-{version}"
    manifest = re.search(r'^manifest-path = "([^"]+)"', (root / "pyproject.toml").read_text(), re.M)[1]
    # Every member and the lock file are there: cargo resolves the build without the network.
    resolved = subprocess.run(["cargo", "metadata", "--format-version", "1", "--locked", "--offline",
                               "--manifest-path", root / manifest], capture_output=True, text=True, timeout=120)
    assert resolved.returncode == 0, resolved.stderr
    members = {Path(package["manifest_path"]).parent.name for package in json.loads(resolved.stdout)["packages"]
               if package["source"] is None}
    assert members == {path.name for path in (REPO / "crates").iterdir() if (path / "Cargo.toml").is_file()}
    assert (root / "crates" / "headway" / "build.rs").is_file() and (root / "python" / "headway" / "demo.py").is_file()


class Virtualenv(NamedTuple):
    version: str
    run: Path  # .pythons/VERSION/run: the interpreter's loader and glibc
    path: Path
    env: dict
    python: Path  # the venv's python under `run`, for HEADWAY_PYTHON
    installed_at: float


@pytest.fixture(scope="module", params=["3.9", "3.13"])
def fresh_virtualenv(request, wheel, tmp_path_factory):
    """A new virtualenv of Debian's CPython VERSION with the wheel installed by pip and nothing else,
    with no Rust toolchain on PATH."""
    version = request.param
    run = run_script(version)
    interpreter = PYTHONS / version / "debian" / "usr" / "bin" / f"python{version}"
    pip = sorted((PYTHONS / "wheels").glob("pip-*.whl"))
    if not pip:
        missing(".pythons/wheels/pip-*.whl (run scripts/pythons)")
    venv = tmp_path_factory.mktemp(f"venv-{version}")
    path = os.pathsep.join([str(venv / "bin"), "/usr/bin", "/bin"])
    assert not (shutil.which("cargo", path=path) or shutil.which("rustc", path=path)), "no Rust toolchain on PATH"
    env = {"PATH": path, "HOME": str(venv)}
    # Debian's builds have no ensurepip: the venv gets no pip, and pip runs from its wheel.
    subprocess.run([run, interpreter, "-m", "venv", "--without-pip", venv], env=env, check=True, timeout=120)
    started = time.monotonic()
    subprocess.run([run, venv / "bin" / "python", f"{pip[-1]}/pip", "install", "--quiet", "--no-index", "--no-deps",
                    "--only-binary", ":all:", "--disable-pip-version-check", "--root-user-action", "ignore", wheel],
                   env=env, check=True, timeout=300)
    python = venv / "python-under-its-glibc"
    python.write_text(f'#!/bin/sh\nexec {run} {venv / "bin" / "python"} "$@"\n')
    python.chmod(0o755)
    return Virtualenv(version, run, venv, env, python, started)


def serve_from(virtualenv, monkeypatch, args, cwd):
    """`headway serve ARGS` as the venv's `headway` script runs it, on its interpreter's glibc."""
    monkeypatch.setenv("HEADWAY_BIN", str(virtualenv.path / "bin" / "headway"))
    return Server(args, cwd=cwd, wrapper=[virtualenv.run, virtualenv.path / "bin" / "python"],
                  env={**virtualenv.env, "PYTHONPATH": "", "HEADWAY_PYTHON": str(virtualenv.python)})


def mapped(pid):
    return Path(f"/proc/{pid}/maps").read_text()


@pytest.mark.parametrize("app, args, path, body", [
    ("the demo", ["-w", "1", "-t", "2"], "/hello", b"Hello, world!\n"),
    ("a WSGI app", ["-w", "1", "-t", "2", "probe:app"], "/bytes?n=5", b"bbbbb"),
    ("an ASGI app", ["-w", "1", "-t", "2", "--interface", "asgi", "asgi_probe:app"], "/hello", b"hello"),
])
def test_the_wheel_in_a_fresh_virtualenv_serves(fresh_virtualenv, monkeypatch, app, args, path, body):
    server = serve_from(fresh_virtualenv, monkeypatch, args, cwd=APPS)
    try:
        status, _, answer = server.get(path)
        assert (status, answer) == (200, body), f"{app}: {server.log().decode()}"
        if app == "the demo":
            print(f"pip install to the first answer: {time.monotonic() - fresh_virtualenv.installed_at:.1f} s")
        maps = mapped(server.process.pid)
        assert f"{fresh_virtualenv.path}/lib/" in maps and "_native.abi3.so" in maps, "the front: the installed wheel"
        if fresh_virtualenv.version == "3.9":
            assert str(BULLSEYE_LIBC) in maps, "on bullseye's glibc"
    finally:
        server.stop()


def test_the_wheel_says_the_same_version_as_the_binary(fresh_virtualenv, binary):
    venv = fresh_virtualenv.path
    from_wheel = subprocess.run([fresh_virtualenv.run, venv / "bin" / "python", venv / "bin" / "headway", "--version"],
                                env=fresh_virtualenv.env, capture_output=True, text=True, timeout=60, check=True).stdout
    from_binary = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30, check=True).stdout
    assert from_wheel == from_binary


@pytest.fixture
def no_python(tmp_path):
    """A PATH with node on it and no Python."""
    node = shutil.which("node")
    if not node:
        missing("node")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "node").symlink_to(node)
    assert not any(shutil.which(name, path=str(bin_dir)) for name in ("python3", "python")), "no Python on PATH"
    # $HEADWAY_PYTHON too names none (the tests' Server always sets it).
    return {"PATH": str(bin_dir), "HOME": str(tmp_path), "PYTHONPATH": "", "HEADWAY_PYTHON": str(bin_dir / "python3")}


def test_the_binary_serves_node_loads_and_runs_the_lab_without_python_on_bullseye_glibc(binary, no_python,
                                                                                         monkeypatch):
    run = run_script("3.9")
    monkeypatch.setenv("HEADWAY_BIN", str(binary))
    server = Server(["-w", "1", "-t", "2", "--cmd", f"node {TWINS / 'demo.js'}"], wrapper=[run], env=no_python)
    try:
        status, _, body = server.get("/hello")
        assert (status, body) == (200, b"Hello, world!\n"), server.log().decode()
        assert str(BULLSEYE_LIBC) in mapped(server.process.pid), "on bullseye's glibc"
        load = subprocess.run([run, binary, "load", "-n", "40", "-c", "4", f"http://127.0.0.1:{server.port}/hello"],
                              env=no_python, capture_output=True, text=True, timeout=120)
        assert load.returncode == 0 and re.search(r"\[200\]\s+40 responses", load.stdout), load.stdout + load.stderr
    finally:
        server.stop()
    lab = subprocess.run([run, binary, "lab", "run", "pipelining", "--quick", "--servers", "node", "--json"],
                         env=no_python, capture_output=True, text=True, timeout=600)
    assert lab.returncode == 0, lab.stderr
    rows = json.loads(lab.stdout)["scenarios"][0]["rows"]
    assert rows and all(row["server"] == "node" and row["errors"] == 0 for row in rows), rows
