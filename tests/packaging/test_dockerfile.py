"""What can be checked of the image without a container engine (there is none here): the
Dockerfile's structure and the build context. ``test_image_install.py`` runs its build steps."""

from __future__ import annotations

import re
import shlex

from tests.packaging.dockerfile import (
    REPO_ROOT,
    build_context,
    copy_sources,
    exec_form,
    stages,
)

PINNED_PYTHON = re.compile(r"^python:(\d+)\.(\d+)\.(\d+)-slim-[a-z]+(@sha256:[0-9a-f]{64})?$")


def test_every_stage_starts_from_the_same_slim_python_pinned_to_a_patch_version() -> None:
    images = {stage.image for stage in stages()}
    assert len(images) == 1, images
    (image,) = images
    match = PINNED_PYTHON.match(image)
    assert match, f"{image}: want python:X.Y.Z-slim-<debian release>"
    # The lock is resolved for this interpreter (make requirements.lock: --python-version).
    makefile = (REPO_ROOT / "Makefile").read_text()
    assert f"--python-version {match[1]}.{match[2]}" in makefile


def test_multi_stage_the_runtime_stage_only_copies_the_built_venv() -> None:
    build, runtime = stages()
    assert build.name == "build" and runtime.name is None
    copies = runtime.values("COPY")
    assert copies and all(c.startswith("--from=build ") for c in copies)
    # Nothing is installed in the runtime stage: no package manager, no compilers. pip appears
    # once, to remove itself with setuptools and wheel (test_image_install.py replays it).
    for command in runtime.values("RUN"):
        words = shlex.split(command)
        assert not {"apt-get", "apt", "pip3", "gcc", "make", "install"} & set(words), command
        if "pip" in words:
            assert words[:4] == ["python", "-m", "pip", "uninstall"], command


def test_runs_as_a_numeric_non_root_high_uid() -> None:
    runtime = stages()[-1]
    (user,) = runtime.values("USER")
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) >= 10000, user
    assert gid.isdigit() and int(gid) >= 10000, user


def test_entrypoint_cmd_and_healthcheck_are_exec_form() -> None:
    runtime = stages()[-1]
    (entrypoint,) = runtime.values("ENTRYPOINT")
    (cmd,) = runtime.values("CMD")
    assert exec_form(entrypoint) == ["/opt/orca/bin/orca"]
    assert exec_form(cmd) == ["run", "--log-format=json"]
    (healthcheck,) = runtime.values("HEALTHCHECK")
    assert exec_form(healthcheck.partition("CMD")[2].strip()) is not None, healthcheck


def test_dependencies_come_from_the_locks_with_hashes() -> None:
    build = stages()[0]
    text = " ".join(" ".join(build.values("RUN")).replace("\\", " ").split())
    for lock in ("requirements-build.lock", "requirements.lock"):
        assert f"install --require-hashes --no-deps --only-binary=:all: -r {lock}" in text
    # orca itself: built with the locked backend (no isolated build env fetched) and installed
    # without resolving anything (its dependencies are the locked ones above).
    assert "--no-build-isolation" in text and "--no-index" in text


def test_the_build_context_holds_what_is_copied_and_nothing_private() -> None:
    context = build_context()
    for source in copy_sources(stages()[0]):
        assert source in context, f"COPY {source}: excluded by .dockerignore"
    assert "controller/cli/__init__.py" in context
    for private in (".git", ".venv", ".venv-tools", "tests", ".dev-cluster", "bench", "hack"):
        assert not any(p == private or p.startswith(private + "/") for p in context), private
    assert not any("__pycache__" in p for p in context)
