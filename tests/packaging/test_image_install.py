"""The image's build, replayed without a container engine (there is none here).

First the base image's Python, as ``python:3.11.X-slim`` lays it out in ``/usr/local``
(docker-library/python's Dockerfile: CPython ``make install`` with ``--with-ensurepip``, which
installs pip and, for 3.11, setuptools; then ``pip3 install ... 'wheel<0.46'``; then the
``pip -> pip3`` and ``python -> python3`` links): this machine's CPython 3.11 interpreter and
standard library copied to a temporary ``usr/local``, then its own ensurepip, the same
``pip3 install`` and the same links. The one difference: setuptools stays at the version
ensurepip bundles (the image upgrades it; which version is there does not change how it is
removed).

Then the build stage's ``RUN`` lines run as written, with ``/opt``, ``/wheels`` and
``/usr/local`` moved under the temporary directory, on exactly the files the Dockerfile
``COPY``s (as ``.dockerignore`` lets them through), and the runtime stage's, except the one
creating the image's user (it would change this machine's accounts; its UID is checked in
test_dockerfile.py). The one liberty: pip may use its cache (the Dockerfile sets
``PIP_NO_CACHE_DIR`` to keep the image small). Then the result is checked as the image would
run it: no pip, setuptools or wheel anywhere (the base had all three before the runtime stage
ran), ``orca run`` starts as far as its configuration without pip (with cryptography, which
it needs for its serving certificate), and ``orca dev-cluster`` says in one line what it
lacks.

This needs PyPI (or pip's cache) and a CPython installed from source under its own prefix (as
the image's is: pyenv's or python.org's; a Debian ``python3`` keeps packages outside its
prefix and cannot stand in for it); it takes a minute or so.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.packaging.dockerfile import REPO_ROOT, build_context, stages
from tests.packaging.test_lock import pins

# The module's image is built once, by three pip runs of up to 600 s each (the first test
# pays for it): more than the default per-test timeout allows on a slow machine.
pytestmark = pytest.mark.timeout(1800)

#: What the base image installs for building and the runtime stage removes.
PACKAGING_TOOLS = {"pip", "setuptools", "wheel"}
VERSION = f"{sys.version_info.major}.{sys.version_info.minor}"


@dataclass
class Image:
    root: Path  # stands for the image's /
    base_distributions: set[str] = field(
        default_factory=set
    )  # in /usr/local, before the runtime stage

    @property
    def venv(self) -> Path:
        return self.root / "opt" / "orca"

    @property
    def prefix(self) -> Path:
        """The base image's Python, ``/usr/local``."""
        return self.root / "usr" / "local"

    def distributions(self, python: Path) -> set[str]:
        """The distributions ``python`` sees (names as their metadata spells them)."""
        probe = (
            "import importlib.metadata as m, json; "
            "print(json.dumps(sorted({d.metadata['Name'].lower() for d in m.distributions()})))"
        )
        result = subprocess.run(
            [str(python), "-I", "-c", probe], capture_output=True, text=True, check=True, env={}
        )
        return set(json.loads(result.stdout))

    @property
    def build_pip(self) -> Path:
        return self.root / "opt" / "build" / "bin" / "pip"

    def run(self, *args: str, home: Path | None = None) -> subprocess.CompletedProcess[str]:
        """A command as the image's entrypoint environment would run it (the venv on PATH)."""
        env = {"PATH": f"{self.venv / 'bin'}:/usr/bin:/bin", "HOME": str(home or self.root)}
        return subprocess.run(
            args, capture_output=True, text=True, env=env, cwd=self.root, timeout=120, check=False
        )


def _run(
    command: list[str], env: dict[str, str], cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a step of the replay; it must succeed."""
    result = subprocess.run(
        command, capture_output=True, text=True, env=env, cwd=cwd, timeout=600, check=False
    )
    assert result.returncode == 0, f"{command}\n{result.stdout}\n{result.stderr}"
    return result


def _base_image(prefix: Path, env: dict[str, str]) -> None:
    """``/usr/local`` of ``python:3.11.X-slim``, from this machine's CPython (module docstring)."""
    executable = Path(os.path.realpath(getattr(sys, "_base_executable", sys.executable)))
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    (prefix / "bin").mkdir(parents=True)
    shutil.copy2(executable, prefix / "bin" / f"python{VERSION}")
    (prefix / "bin" / "python3").symlink_to(f"python{VERSION}")
    shutil.copytree(
        stdlib,
        prefix / "lib" / f"python{VERSION}",
        symlinks=True,
        ignore=shutil.ignore_patterns(
            "site-packages",
            "dist-packages",
            "test",
            "tests",
            "idle_test",
            "__pycache__",
            "config-*",
        ),
    )
    (prefix / "lib" / f"python{VERSION}" / "site-packages").mkdir()
    python = prefix / "bin" / "python3"
    where = json.loads(
        _run(
            [
                str(python),
                "-c",
                "import json, sys, sysconfig; "
                "print(json.dumps([sys.prefix, *sys.path[1:], *sysconfig.get_paths().values()]))",
            ],
            env={},
        ).stdout
    )
    outside = [p for p in where if not Path(p).is_relative_to(prefix)]
    if outside:  # pip would read or write this machine's own packages
        pytest.fail(
            f"{executable} cannot stand in for the image's Python: copied to {prefix} it still "
            f"uses {outside} (a CPython installed from source under its own prefix can)",
            pytrace=False,
        )
    _run([str(python), "-m", "ensurepip", "--upgrade"], env=env)
    _run([str(prefix / "bin" / "pip3"), "install", "--no-compile", "wheel<0.46"], env=env)
    for source in ("idle3", "pip3", "pydoc3", "python3", "python3-config"):
        if (prefix / "bin" / source).exists():
            (prefix / "bin" / source.replace("3", "")).symlink_to(source)


def _replay(root: Path) -> set[str]:
    """Replay the Dockerfile into ``root``; the distributions of the base image's Python
    before the runtime stage ran."""
    build, runtime = stages()
    (workdir,) = build.values("WORKDIR")
    src = root / workdir.lstrip("/")
    src.mkdir(parents=True)
    context = build_context()
    prefix = root / "usr" / "local"
    env = {
        "PATH": f"{prefix / 'bin'}:{os.environ['PATH']}",
        "HOME": os.environ.get("HOME", str(root)),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_NO_INPUT": "1",
        "PIP_ROOT_USER_ACTION": "ignore",
    }
    _base_image(prefix, env)
    base = Image(root).distributions(prefix / "bin" / "python3")
    for instruction, value in build.instructions:
        if instruction == "COPY":
            *sources, _dest = value.split()
            for source in sources:
                assert source in context, f"COPY {source}: not in the build context"
                target = src / source
                if (REPO_ROOT / source).is_dir():
                    shutil.copytree(
                        REPO_ROOT / source, target, ignore=shutil.ignore_patterns("__pycache__")
                    )
                else:
                    shutil.copy2(REPO_ROOT / source, target)
        elif instruction == "RUN":
            _run(["bash", "-c", _moved(value, root)], cwd=src, env=env)
    for command in runtime.values("RUN"):
        if command.startswith("groupadd "):
            continue  # the image's user (this machine's accounts are not to be touched)
        _run(["bash", "-c", _moved(command, root)], cwd=root, env=env)
    return base


def _moved(command: str, root: Path) -> str:
    """A RUN line with the image's absolute paths moved under ``root``."""
    for path in ("/opt/", "/wheels", "/usr/local/"):
        command = command.replace(path, f"{root}{path}")
    return command


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Image]:
    root = tmp_path_factory.mktemp("image")
    base = _replay(root)
    yield Image(root, base)


def test_the_runtime_venv_holds_exactly_the_lock_and_orca(image: Image) -> None:
    listed = subprocess.run(
        [
            str(image.build_pip),
            "--python",
            str(image.venv / "bin" / "python"),
            "list",
            "--format=freeze",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    installed = {}
    for line in listed.splitlines():
        name, _, version = line.partition("==")
        installed[name.lower().replace("_", "-")] = version
    expected = {
        name: version for name, (version, _) in pins(REPO_ROOT / "requirements.lock").items()
    }
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    expected["orca-controller"] = project["version"]
    assert installed == expected
    check = subprocess.run(
        [str(image.build_pip), "--python", str(image.venv / "bin" / "python"), "check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert check.returncode == 0, check.stdout


def test_no_pip_and_a_working_cryptography_in_the_runtime(image: Image) -> None:
    """cryptography is a runtime dependency (``orca run`` generates its serving certificate)
    and installs from its manylinux wheel: it loads its compiled part in the image."""
    assert not (image.venv / "bin" / "pip").exists()
    probe = image.run(
        "python", "-c", "from controller.operator import tls; print(len(tls.generate(['x']).ca))"
    )
    assert probe.returncode == 0 and int(probe.stdout) > 0, probe.stderr


def test_no_pip_setuptools_or_wheel_anywhere_in_the_runtime_image(image: Image) -> None:
    """The base image's Python had all three (ensurepip's pip and setuptools, and wheel); the
    runtime stage leaves none of them, their scripts, or the wheels ensurepip would reinstall
    pip from. The operator's venv never had them."""
    assert image.base_distributions >= PACKAGING_TOOLS, image.base_distributions
    python = image.prefix / "bin" / "python3"
    assert not PACKAGING_TOOLS & image.distributions(python)
    assert not PACKAGING_TOOLS & image.distributions(image.venv / "bin" / "python")
    left = {p.name for p in (image.prefix / "bin").iterdir()}
    assert not {n for n in left if n.startswith(("pip", "wheel", "easy_install"))}, left
    site = image.prefix / "lib" / f"python{VERSION}" / "site-packages"
    assert sorted(p.name for p in site.iterdir()) == []
    assert not (image.prefix / "lib" / f"python{VERSION}" / "ensurepip" / "_bundled").exists()
    pip = subprocess.run([str(python), "-m", "pip"], capture_output=True, text=True, env={})
    assert pip.returncode != 0 and "No module named pip" in pip.stderr, pip.stderr
    # ensurepip has nothing left to install pip from (into a scratch root, should it work).
    scratch = image.root / "scratch"
    again = subprocess.run(
        [str(python), "-m", "ensurepip", "--root", str(scratch)],
        capture_output=True,
        text=True,
        env={},
    )
    assert again.returncode != 0, again.stdout
    assert not scratch.exists() or not any(scratch.rglob("pip*")), again.stdout


def test_orca_reports_its_version(image: Image) -> None:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    for args in (("orca", "version"), ("orca", "--version")):
        result = image.run(*args)
        assert (result.returncode, result.stdout) == (0, f"orca {project['version']}\n")


def test_orca_run_starts_and_reports_a_missing_cluster_in_one_line(image: Image) -> None:
    """Everything ``orca run`` imports is there: it gets as far as loading its configuration."""
    assert image.run("orca", "run", "--help").returncode == 0
    result = image.run(
        "orca",
        "run",
        "--kubeconfig",
        str(image.root / "nowhere"),
        "--metrics-port",
        "0",
        "--liveness",
        "none",
    )
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr + result.stdout


# Run by the image's Python: where its CEL parser comes from, and whether the file was rewritten.
CEL_PARSER_PROBE = """
from celpy import Environment
from controller.scheduler.celcache import cache_path, install_cel_parser, shipped_cache_path
path = cache_path()
assert path == shipped_cache_path(), path
written = path.stat().st_mtime_ns
install_cel_parser(path)
Environment().compile('"gpu" in node.tags && node.kind == "vm"')
print(oct(path.stat().st_mode & 0o777), oct(path.parent.stat().st_mode & 0o777))
print("rewritten" if path.stat().st_mtime_ns != written else "loaded")
"""


def test_the_image_ships_cel_pythons_parser_analysed(image: Image) -> None:
    """The pod's user has no home (the Dockerfile's /nonexistent) to cache the parser in: the
    build put it beside the venv, readable by all, and it loads as it is (were its hash stale,
    Lark would rebuild it and, as its owner here, rewrite it)."""
    result = image.run("python", "-c", CEL_PARSER_PROBE, home=image.root / "nonexistent")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["0o644", "0o755", "loaded"]


def test_dev_cluster_in_the_image_says_what_it_lacks_in_one_line(image: Image) -> None:
    """cryptography is there (a runtime dependency now); the control plane's binaries are not:
    one line naming them and how to build them."""
    result = image.run("orca", "dev-cluster", "start", "--dir", str(image.root / "dc"))
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("orca dev-cluster: control-plane binaries missing in ")
    assert "build them with: hack/testcp/build.sh" in lines[0]


#: What each installer writes of its own in a dist-info (pip: REQUESTED, and direct_url.json
#: for the wheel it was given by path; both: INSTALLER and RECORD, naming themselves).
SKIP = ("INSTALLER", "RECORD", "REQUESTED", "direct_url.json")


def _dists(site: Path) -> dict[str, str]:
    found = {}
    for dist in site.glob("*.dist-info"):
        name, version = dist.name.removesuffix(".dist-info").rsplit("-", 1)
        found[name.lower().replace("_", "-")] = version
    return found


def _tree(root: Path, top: str) -> set[str]:
    """Paths under ``top``, but bytecode caches, the interpreter links (each names its image's
    own interpreter) and ``venv``'s shell activation scripts (make image writes no shell
    scripts into an image without a shell)."""
    base = root / top
    return {
        str(p.relative_to(root))
        for p in base.rglob("*")
        if "__pycache__" not in p.parts
        and not p.name.startswith(("python", "activate", "Activate"))
    }


def test_make_image_and_the_dockerfile_give_the_same_user_entrypoint_paths_and_packages(
    image: Image, built_image: Any, tmp_path: Path
) -> None:
    """Both ways of building the image (tests/packaging/test_image_build.py builds the one
    ``make image`` makes; this module replays the Dockerfile's)."""
    import io
    import tarfile

    from controller.imagebuild.oci import read_archive
    from tests.packaging.dockerfile import exec_form

    built = read_archive(built_image.archive.path)
    config = built["config"]["config"]
    runtime = stages()[-1]
    (user,) = runtime.values("USER")
    assert config["User"] == user
    assert config["Entrypoint"] == exec_form(runtime.values("ENTRYPOINT")[0])
    assert config["Cmd"] == exec_form(runtime.values("CMD")[0])
    assert set(config["ExposedPorts"]) == {f"{p}/tcp" for p in runtime.values("EXPOSE")[0].split()}
    env = dict(e.split("=", 1) for e in config["Env"])
    assert env["PATH"].split(":")[0] == "/opt/orca/bin"
    root = tmp_path / "built"
    with tarfile.open(fileobj=io.BytesIO(built["layers"][0])) as tar:
        tar.extractall(root, filter="fully_trusted")
    site = "opt/orca/lib/python3.11/site-packages"
    assert _dists(root / site) == _dists(image.root / site)
    assert _tree(root, "opt/orca/bin") == _tree(image.root, "opt/orca/bin")
    assert _tree(root, "opt/orca/share") == _tree(image.root, "opt/orca/share")
    ours = {p for p in _tree(root, site) if not p.endswith(SKIP)}
    theirs = {p for p in _tree(image.root, site) if not p.endswith(SKIP)}
    assert ours == theirs, sorted(ours ^ theirs)[:20]
