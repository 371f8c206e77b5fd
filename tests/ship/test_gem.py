"""The platform gem scripts/dist builds, tried as a Ruby team gets it.

`gem install --local` puts it into a fresh GEM_HOME with no cargo, rustc or cc on PATH (a PATH of
links to the Ruby, its `gem` and `bundle` alone), under Debian bookworm's Ruby 3.1 and trixie's
3.3 (scripts/rubies); then `headway serve config.ru` serves a Rack app and the Rails test app
(tests/rails_app.py: Debian's Rails 6.1 under 3.1, trixie's 7.2 under 3.3) on the extension built
for that Ruby's ABI, and so does `bundle exec headway serve config.ru` (that Ruby's own Bundler,
`bundle install --local`: no gem server) with a Gemfile naming the unpacked gem by `path:`. The
gem's executable runs a `--cmd` Node worker with no Ruby on PATH, and names its version, commit,
target and the Rubies it carries. A Ruby it has no extension for is told which it has.

The gem comes from dist/ (scripts/dist), Ruby 3.3 and its Rails from .rubies/ (scripts/rubies).
Where they are missing the tests are skipped, except under CI, where they fail.
"""

import gzip
import io
import shutil
import subprocess
import tarfile
import time
from pathlib import Path
from typing import NamedTuple

import pytest
from rails_app import RAILS_APP, assert_serves_the_rails_app, rails_version
from test_dist import (
    ARCH,
    GLIBC_FLOOR,
    TWINS,
    archive,  # noqa: F401 (a fixture)
    assert_stripped,
    binary,  # noqa: F401 (a fixture)
    dynamic_symbols,
    glibc_floor,
    the_one,
    version,  # noqa: F401 (a fixture)
)

from conftest import APPS, REPO, Server, missing

RUBIES = {"3.1": Path("/usr/bin/ruby"), "3.3": REPO / ".rubies" / "3.3" / "ruby"}


@pytest.fixture(scope="module")
def gem(version):  # noqa: F811
    return the_one(f"headway-{version}-{ARCH}-linux.gem")


def gem_files(gem):
    """{name: (mode, bytes)} of what the gem installs (its data.tar.gz)."""
    with tarfile.open(gem) as outer:
        data = outer.extractfile("data.tar.gz").read()
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(data))) as inner:
        return {member.name: (member.mode, inner.extractfile(member).read()) for member in inner.getmembers()
                if member.isfile()}


def test_the_gem_carries_the_front_the_ruby_side_and_an_extension_for_each_ruby(gem, binary, tmp_path):  # noqa: F811
    files = gem_files(gem)
    ruby_side = {f"lib/headway/{path.name}" for path in (REPO / "ruby" / "lib" / "headway").glob("*.rb")}
    extensions = {f"lib/headway/{abi}/headway_rack.so" for abi in RUBIES}
    assert set(files) == {"headway.gemspec", "bin/headway", "libexec/headway", "lib/headway/version.rb"} | ruby_side \
        | extensions
    mode, front = files["libexec/headway"]
    assert (mode & 0o777, front) == (0o755, binary.read_bytes()), "the standalone binary, as it ships"
    assert files["bin/headway"][0] & 0o111
    for name in extensions:
        extension = tmp_path / name.replace("/", "_")
        extension.write_bytes(files[name][1])
        assert glibc_floor(extension) <= GLIBC_FLOOR
        # Every strong symbol it needs has a version, but Ruby's C API: the interpreter's, unversioned.
        unversioned = [name for name, symbol_version, undefined, weak in dynamic_symbols(extension)
                       if undefined and not symbol_version and not weak and not name.startswith(("rb_", "ruby_"))]
        assert unversioned == []
        assert_stripped(extension)
        needed = subprocess.run(["readelf", "-d", str(extension)], capture_output=True, text=True, check=True).stdout
        assert "libruby" not in needed, "Ruby's symbols come from the Ruby that loads it"


class Installed(NamedTuple):
    abi: str
    ruby: Path  # the Ruby as the PATH below has it
    home: Path  # GEM_HOME
    env: dict
    installed_at: float


def ruby_or_skip(abi):
    ruby = RUBIES[abi]
    if not ruby.is_file():
        missing(f"{ruby} (run scripts/rubies)")
    return ruby


def only_on_path(bin_dir, tools):
    """A folder of links to TOOLS alone, for PATH: no cargo, rustc or cc."""
    bin_dir.mkdir()
    for name, target in tools.items():
        (bin_dir / name).symlink_to(target)
    assert not any(shutil.which(tool, path=str(bin_dir)) for tool in ("cargo", "rustc", "cc", "gcc")), "no compiler"
    return str(bin_dir)


@pytest.fixture(scope="module", params=list(RUBIES))
def installed(request, gem, tmp_path_factory):
    """The gem installed under each Ruby it carries."""
    return install(request.param, gem, tmp_path_factory)


@pytest.fixture(scope="module")
def installed_bookworm(gem, tmp_path_factory):
    """The gem installed under Debian bookworm's Ruby 3.1 alone: for what one Ruby shows."""
    return install("3.1", gem, tmp_path_factory)


def install(abi, gem, tmp_path_factory):
    """The gem installed by `gem install --local` into a fresh GEM_HOME under Ruby ABI, with a PATH
    of that Ruby, its gem and bundle alone."""
    ruby = ruby_or_skip(abi)
    where = tmp_path_factory.mktemp(f"ruby-{abi}")
    home = where / "gems"
    if abi == "3.1":
        # Bundler's binstubs name ruby3.1, its ruby_install_name.
        tools = {"ruby": ruby, "ruby3.1": "/usr/bin/ruby3.1", "gem": "/usr/bin/gem", "bundle": "/usr/bin/bundle"}
        options = []
    else:
        # trixie's Ruby runs only through its own loader (.rubies/3.3/ruby): its gem and bundle,
        # and the gem's executable, run through that script, found on PATH.
        commands = ruby.parent / "debian" / "usr" / "bin"
        tools = {"ruby": ruby, "ruby3.3": ruby, "gem": run_by(ruby, commands / "gem3.3", where / "gem-3.3"),
                 "bundle": run_by(ruby, commands / "bundle3.3", where / "bundle-3.3")}
        # --env-shebang names ruby3.3, its ruby_install_name.
        options = ["--env-shebang"]
    path = only_on_path(where / "bin", tools)
    # The gems it came with (Rack, and Rails where it has it): trixie's are where its loader's
    # GEM_PATH says, as its compiled-in default is this machine's /usr, the 3.1 gems.
    default_path = subprocess.run([ruby, "-e", 'print ENV["GEM_PATH"] || Gem.default_path.join(":")'],
                                  env={"PATH": path}, capture_output=True, text=True, check=True, timeout=60).stdout
    env = {"PATH": f"{home / 'bin'}:{path}", "HOME": str(where), "GEM_HOME": str(home),
           "GEM_PATH": f"{home}:{default_path}", "RUBYLIB": "", "RUBYOPT": "", "HEADWAY_RUBY": ""}
    if abi != "3.1":
        env["HEADWAY_RUBY"] = str(ruby)  # RbConfig.ruby, the bare interpreter, needs that loader
    started = time.monotonic()
    subprocess.run(["gem", "install", "--local", "--no-document", *options, gem], env=env, check=True, timeout=300)
    return Installed(abi, ruby, home, env, started)


def run_by(ruby, script, command):
    """COMMAND, written: runs Ruby SCRIPT with RUBY."""
    command.write_text(f'#!/bin/sh\nexec {ruby} {script} "$@"\n')
    command.chmod(0o755)
    return command


def rack_app(where):
    """tests/apps/rack/app.ru as a team's config.ru."""
    where.mkdir(exist_ok=True)
    shutil.copy(APPS / "rack" / "app.ru", where / "config.ru")
    return where


def worker_pids(server):
    tasks = Path(f"/proc/{server.process.pid}/task")
    return [int(pid) for task in tasks.iterdir() for pid in (task / "children").read_text().split()]


def assert_serves_app_ru(server):
    """app.ru's routes that both Debian's Rack 2.2 and trixie's Rack 3.1 pass (the others are under
    Rack::Lint, and 3.1's asks what app.ru's 2.2-era routes do not give)."""
    status, _, body = server.get("/callable")
    assert (status, body) == (200, b"streamed by call"), server.log().decode()
    status, _, body = server.get("/native")
    assert (status, body) == (200, bytes(range(256)) * 1024), server.log().decode()


def assert_runs_the_gems_extension(server, installed, gem_dir):
    """The worker runs the native core built for its Ruby's ABI, from the installed gem."""
    (worker,) = worker_pids(server)
    maps = Path(f"/proc/{worker}/maps").read_text()
    assert f"{gem_dir}/lib/headway/{installed.abi}/headway_rack.so" in maps, "the extension for its Ruby's ABI"
    assert f"libruby-{installed.abi}.so" in maps, f"under Ruby {installed.abi}"


def installed_gem(installed):
    (gem_dir,) = (installed.home / "gems").glob("headway-*")
    return gem_dir


def test_the_installed_gem_serves_a_rack_app(installed, monkeypatch, tmp_path):
    monkeypatch.setenv("HEADWAY_BIN", str(installed.home / "bin" / "headway"))
    server = Server(["-w", "1", "-t", "2", "config.ru"], cwd=rack_app(tmp_path / "app"), env=installed.env)
    try:
        assert server.get("/callable")[0] == 200, server.log().decode()
        # Quoted by the closing note: run with -s to see it.
        took = time.monotonic() - installed.installed_at
        print(f"Ruby {installed.abi}: from gem install to the first answered request: {took:.1f} s")
        assert_serves_app_ru(server)
        assert_runs_the_gems_extension(server, installed, installed_gem(installed))
    finally:
        server.stop()


def test_the_installed_gem_serves_the_rails_app(installed, monkeypatch, tmp_path):
    rails = rails_version(installed.ruby, env=installed.env)
    if rails is None:
        where = "apt-get install ruby-rails" if installed.abi == "3.1" else "scripts/rubies"
        missing(f"Rails under Ruby {installed.abi} ({where})")
    app = tmp_path / "app"
    shutil.copytree(RAILS_APP, app)
    monkeypatch.setenv("HEADWAY_BIN", str(installed.home / "bin" / "headway"))
    server = Server(["-w", "1", "-t", "2", "config.ru"], cwd=app, env=installed.env)
    try:
        assert_serves_the_rails_app(server, rails)
        assert_runs_the_gems_extension(server, installed, installed_gem(installed))
    finally:
        server.stop()


def test_bundle_exec_serves_with_the_gem_vendored_by_path(installed, gem, monkeypatch, tmp_path):
    app = rack_app(tmp_path / "app")
    subprocess.run(["gem", "unpack", gem, "--target", app / "vendor"], env=installed.env, check=True, timeout=120,
                   capture_output=True)
    (vendored,) = (app / "vendor").iterdir()
    (app / "Gemfile").write_text(f'gem "headway", path: "vendor/{vendored.name}"\n')
    # A GEM_HOME of the bundle's own: Bundler writes its binstubs there, not over gem install's.
    home = tmp_path / "bundle"
    env = {**installed.env, **{name: installed.env[name].replace(str(installed.home), str(home))
                               for name in ("GEM_HOME", "GEM_PATH", "PATH")}}
    # No gem server: what the Gemfile asks is on this machine.
    installed_bundle = subprocess.run(["bundle", "install", "--local"], cwd=app, env=env,
                                      capture_output=True, text=True, timeout=300)
    assert installed_bundle.returncode == 0, installed_bundle.stdout + installed_bundle.stderr
    monkeypatch.setenv("HEADWAY_BIN", "headway")
    server = Server(["-w", "1", "-t", "2", "config.ru"], cwd=app, env=env, wrapper=["bundle", "exec"])
    try:
        assert_serves_app_ru(server)
        assert_runs_the_gems_extension(server, installed, vendored)
    finally:
        server.stop()


def test_version_names_the_front_and_the_rubies_the_gem_carries(installed, binary):  # noqa: F811
    said = subprocess.run(["headway", "--version"], env=installed.env, capture_output=True, text=True, timeout=60,
                          check=True).stdout
    front = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30, check=True).stdout
    assert said == f"{front}Rubies: {', '.join(RUBIES)}\n"


def test_a_ruby_the_gem_has_no_extension_for_is_told_which_it_has(installed_bookworm, tmp_path):
    installed = installed_bookworm
    lib = tmp_path / "lib"
    shutil.copytree(installed_gem(installed) / "lib", lib)
    shutil.rmtree(lib / "headway" / "3.1")
    told = subprocess.run([installed.ruby, "-I", lib, "-r", "headway/worker", "-e", "exit Headway::Worker.main(ARGV)",
                           "--", "--socket", tmp_path / "socket", "config.ru"],
                          env=installed.env, capture_output=True, text=True, timeout=60)
    assert told.returncode == 1
    assert "carries the Rack worker's extension for Ruby 3.3, not for 3.1." in told.stderr, told.stderr
    assert "--cmd" in told.stderr, "and the way that still works"


def test_the_gems_executable_runs_a_node_worker_with_no_ruby_on_path(installed_bookworm, monkeypatch, tmp_path):
    installed = installed_bookworm
    node = shutil.which("node")
    if not node:
        missing("node")
    path = only_on_path(tmp_path / "bin", {"node": node})
    assert not shutil.which("ruby", path=path)
    monkeypatch.setenv("HEADWAY_BIN", str(installed.home / "bin" / "headway"))
    env = {**installed.env, "PATH": path}
    server = Server(["-w", "1", "-t", "2", "--cmd", f"node {TWINS / 'demo.js'}"], env=env)
    try:
        status, _, body = server.get("/hello")
        assert (status, body) == (200, b"Hello, world!\n"), server.log().decode()
    finally:
        server.stop()

