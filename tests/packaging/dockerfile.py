"""The Dockerfile, read the way the tests need it: stages, their instructions, the build context
(``.dockerignore`` applied with docker-py's implementation of Docker's own rules)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from docker.utils.build import exclude_paths
from dockerfile_parse import DockerfileParser

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO_ROOT / "Dockerfile"


@dataclass
class Stage:
    """One ``FROM`` and the instructions up to the next."""

    image: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)  # (INSTRUCTION, value)

    def values(self, instruction: str) -> list[str]:
        return [v for i, v in self.instructions if i == instruction]


def stages(path: Path = DOCKERFILE) -> list[Stage]:
    parsed = DockerfileParser(str(path))
    result: list[Stage] = []
    for item in parsed.structure:
        instruction, value = item["instruction"], item["value"]
        if instruction == "COMMENT":
            continue
        if instruction == "FROM":
            image, _, name = value.partition(" AS ")
            result.append(Stage(image.strip(), name.strip() or None))
        else:
            result[-1].instructions.append((instruction, value))
    return result


def exec_form(value: str) -> list[str] | None:
    """The argument list of an exec-form ENTRYPOINT/CMD (a JSON array), else None."""
    try:
        parsed = json.loads(value)
    except ValueError:
        return None
    return parsed if isinstance(parsed, list) and all(isinstance(a, str) for a in parsed) else None


def build_context(root: Path = REPO_ROOT) -> set[str]:
    """The paths ``docker build`` would send: everything not excluded by ``.dockerignore``."""
    lines = (root / ".dockerignore").read_text().splitlines()
    patterns = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    return set(exclude_paths(str(root), patterns))


def copy_sources(stage: Stage) -> list[str]:
    """The context paths a stage COPYs (not ``COPY --from``)."""
    sources: list[str] = []
    for value in stage.values("COPY"):
        if value.startswith("--from"):
            continue
        *srcs, _dest = value.split()
        sources.extend(srcs)
    return sources
