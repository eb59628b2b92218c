"""The operator's image as ``make image`` builds it, once per test session, for the tests that
inspect it (tests/packaging) and those that run it on a real Node (tests/integration).

The build needs root (it runs the image's interpreter in a chroot) and Debian's package lists
(``apt-get download``); without either the fixture fails with the reason, it never skips."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

from controller.imagebuild.build import Built, build


@pytest.fixture(scope="session")
def built_image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    if os.geteuid() != 0 or not shutil.which("chroot"):
        pytest.fail("make image needs root (it runs the image's interpreter in a chroot)")
    out = tmp_path_factory.mktemp("dist")
    yield build(out)
