"""The image's build stage, replayed without a container engine (there is none here).

The build stage's ``RUN`` lines run as written, with ``/opt`` and ``/wheels`` moved under a
temporary directory and this machine's Python 3.11 for the base image's, on exactly the files
the Dockerfile ``COPY``s (as ``.dockerignore`` lets them through). The one liberty: pip may use
its cache (the Dockerfile sets ``PIP_NO_CACHE_DIR`` to keep the image small). Then the
resulting runtime virtualenv is checked as the image would run it: ``orca run`` starts as far
as its configuration without cryptography or pip, and ``orca dev-cluster`` says in one line
that it needs the development extra.

This needs PyPI (or pip's cache); it takes a minute or so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.packaging.dockerfile import REPO_ROOT, build_context, stages
from tests.packaging.test_lock import pins

# The module's image is built once, by three pip runs of up to 600 s each (the first test
# pays for it): more than the default per-test timeout allows on a slow machine.
pytestmark = pytest.mark.timeout(1800)


@dataclass
class Image:
    root: Path  # stands for the image's /

    @property
    def venv(self) -> Path:
        return self.root / "opt" / "orca"

    @property
    def build_pip(self) -> Path:
        return self.root / "opt" / "build" / "bin" / "pip"

    def run(self, *args: str, home: Path | None = None) -> subprocess.CompletedProcess[str]:
        """A command as the image's entrypoint environment would run it (the venv on PATH)."""
        env = {"PATH": f"{self.venv / 'bin'}:/usr/bin:/bin", "HOME": str(home or self.root)}
        return subprocess.run(
            args, capture_output=True, text=True, env=env, cwd=self.root, timeout=120, check=False
        )


def _replay(root: Path) -> None:
    build = stages()[0]
    (workdir,) = build.values("WORKDIR")
    src = root / workdir.lstrip("/")
    src.mkdir(parents=True)
    context = build_context()
    python = root / "bin" / "python"
    python.parent.mkdir()
    python.symlink_to(sys.executable)  # `python -m venv` then uses this interpreter's base
    env = {
        "PATH": f"{python.parent}:{os.environ['PATH']}",
        "HOME": os.environ.get("HOME", str(root)),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_NO_INPUT": "1",
    }
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
            command = value.replace("/opt/", f"{root}/opt/").replace("/wheels", f"{root}/wheels")
            result = subprocess.run(
                ["bash", "-c", command],
                cwd=src,
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            assert result.returncode == 0, f"RUN {command}\n{result.stdout}\n{result.stderr}"


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Image]:
    root = tmp_path_factory.mktemp("image")
    _replay(root)
    yield Image(root)


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


def test_no_pip_and_no_cryptography_in_the_runtime(image: Image) -> None:
    assert not (image.venv / "bin" / "pip").exists()
    probe = image.run("python", "-c", "import cryptography")
    assert probe.returncode != 0 and "No module named 'cryptography'" in probe.stderr


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
from controller.celcache import cache_path, install_cel_parser, shipped_cache_path
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


def test_dev_cluster_without_the_dev_extra_says_so_in_one_line(image: Image) -> None:
    result = image.run("orca", "dev-cluster", "start", "--dir", str(image.root / "dc"))
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "orca dev-cluster: needs the development extra (Python module 'cryptography' is not "
        "installed): pip install 'orca-controller[dev]'"
    )
