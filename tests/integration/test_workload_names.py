"""A name that cannot collide: every documented kubectl command reaches orca's Workload on a
control plane that also serves Kubernetes' own ``scheduling.k8s.io`` Workload (issue 22).

The commands are read from the docs users copy them from (the README, ``docs/``, and the hints
``make demo`` prints), never listed here by hand: a new command with a bare ``workloads`` or
``wl`` fails this test. Each runs, in the order of the docs (commands that change something
last), against a private control plane started with the in-tree Workload API switched on
(``--feature-gates=GenericWorkload=true --runtime-config=scheduling.k8s.io/v1alpha2=true``)
and the ``make demo`` state: the CRD, the example Nodes and Workloads, the operator placing
them. kubectl's own request log (``-v=6``) says which resource each command reached.
"""

from __future__ import annotations

import re
import shlex
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from controller.devcluster.binaries import BinariesNotFound
from controller.devcluster.controlplane import ControlPlane, ControlPlaneError
from tests.support.harness import REPO_ROOT, OperatorProcess

pytestmark = pytest.mark.controlplane

IN_TREE_WORKLOAD = (
    "--feature-gates=GenericWorkload=true",
    "--runtime-config=scheduling.k8s.io/v1alpha2=true",
)
#: What kubectl resolves to orca's Workload and nothing else.
OURS = {"orcawl", "workloads.orca.cloudinit.dev", "workload.orca.cloudinit.dev", "orca"}
#: What also names another API's resource: Kubernetes' Workload, Kueue's old short name.
COLLIDING = {"workload", "workloads", "wl"}
#: kubectl verbs whose first argument is a resource (or TYPE/NAME).
RESOURCE_VERBS = {
    "get", "describe", "edit", "patch", "delete", "label", "annotate", "wait", "explain",
    "scale", "rollout",
}  # fmt: skip
CHANGES = {"patch", "edit", "delete", "label", "annotate", "scale", "apply", "create"}
#: kubectl flags that take the next argument as their value (unless written ``--flag=value``).
VALUED = {
    "-n", "--namespace", "-o", "--output", "-l", "--selector", "--field-selector", "-f",
    "--filename", "-p", "--patch", "--type", "--for", "--timeout", "--context", "--kubeconfig",
    "-c", "--container", "--subresource",
}  # fmt: skip
DOCS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("**/*.md"))]
DEMO = REPO_ROOT / "hack" / "demo.sh"
URL = re.compile(r'url="?(https://[^"\s]+)')


@dataclass(frozen=True)
class Command:
    source: str  # file:line, for the failure message
    argv: tuple[str, ...]  # starting with "kubectl"

    def positional(self) -> list[str]:
        """The arguments that are not flags nor flags' values."""
        out, skip = [], False
        for arg in self.argv[1:]:
            if skip:
                skip = False
            elif arg.startswith("-"):
                skip = arg in VALUED
            else:
                out.append(arg)
        return out

    @property
    def verb(self) -> str:
        return next(iter(self.positional()), "")

    def resources(self) -> list[str]:
        """The resource names this command gives kubectl (``TYPE``, ``TYPE/NAME``, and for
        ``explain`` the type before the field path)."""
        if self.verb not in RESOURCE_VERBS:
            return []
        args = self.positional()[1:]
        if not args:
            return []
        first = args[0].split("/")[0]
        if self.verb == "explain":  # TYPE.field.path; a group makes it TYPE.GROUP.field...
            for name in sorted(OURS | COLLIDING, key=len, reverse=True):
                if first == name or first.startswith(name + "."):
                    return [name]
            return [first.split(".")[0]]
        return [first] + [a.split("/")[0] for a in args[1:] if "/" in a]

    @property
    def names_a_workload(self) -> bool:
        return any(r in OURS | COLLIDING for r in self.resources())

    @property
    def has_placeholders(self) -> bool:
        return any(re.fullmatch(r"<[^>]+>|[A-Z][A-Z_]+", a) for a in self.argv[1:])


def _split(line: str, source: str) -> list[Command]:
    """The kubectl commands of one shell line (``a && b``, ``a | b``, ``a; b``)."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        tokens = list(lexer)
    except ValueError:  # not shell (an unbalanced quote in prose)
        return []
    out: list[Command] = []
    current: list[str] = []
    redirect = False
    for token in [*tokens, ";"]:
        if redirect:  # the target of a redirection (>/dev/null, 2>&1)
            redirect = False
        elif token in ("&&", "||", "|", ";", "&"):
            if current and current[0] == "kubectl":
                out.append(Command(source, tuple(current)))
            current = []
        elif token in (">", ">>", ">&", "<"):
            redirect = True
            if current and current[-1].isdigit():
                current.pop()  # the 2 of 2>&1
        else:
            current.append(token)
    return out


def documented_commands() -> list[Command]:
    """Every kubectl command in the docs and the demo hints, in order."""
    commands: list[Command] = []
    for path in DOCS:
        text = path.read_text()
        name = path.relative_to(REPO_ROOT)
        fences = list(re.finditer(r"^```[^\n]*\n(.*?)^```", text, re.MULTILINE | re.DOTALL))
        for fence in fences:
            first = text.count("\n", 0, fence.start(1)) + 1
            for i, line in enumerate(fence.group(1).splitlines()):
                line = line.removeprefix("$ ").strip()
                if line.startswith("kubectl "):
                    commands += _split(line, f"{name}:{first + i}")
        prose = re.sub(r"^```[^\n]*\n.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
        for span in re.finditer(r"`([^`]+)`", prose):
            code = " ".join(span.group(1).split())  # a span may wrap across lines
            if code.startswith("kubectl "):
                commands += _split(code, f"{name}: `{code[:40]}...`")
    for i, line in enumerate(DEMO.read_text().splitlines(), 1):
        line = line.replace('"${KUBECTL[@]}"', "kubectl").strip()
        if line.startswith("kubectl "):
            commands += _split(line, f"{DEMO.relative_to(REPO_ROOT)}:{i}")
    return [c for c in commands if c.names_a_workload]


COMMANDS = documented_commands()
# Reading ones first, in doc order; then those that change something (a patch to count 8
# would otherwise make a later `kubectl wait --for=condition=Ready` wait in vain).
ORDERED = sorted(COMMANDS, key=lambda c: c.verb in CHANGES)


def test_the_docs_name_the_workload_resource_somewhere() -> None:
    """The extraction found the commands (an empty list would pass everything below)."""
    verbs = {c.verb for c in COMMANDS}
    assert len(COMMANDS) >= 8 and {"get", "describe", "patch", "wait", "explain"} <= verbs, [
        " ".join(c.argv) for c in COMMANDS
    ]


@pytest.mark.parametrize("command", COMMANDS, ids=[" ".join(c.argv[1:]) for c in COMMANDS])
def test_no_documented_command_uses_a_colliding_name(command: Command) -> None:
    colliding = [r for r in command.resources() if r in COLLIDING]
    assert colliding == [], (
        f"{command.source}: `{' '.join(command.argv)}` names {colliding}, which also names "
        "another API's resource; write orcawl or workloads.orca.cloudinit.dev"
    )


# -- on a control plane that serves both Workloads -------------------------------------------


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A private control plane with Kubernetes' Workload API on (not the session one)."""
    plane = ControlPlane(
        tmp_path_factory.mktemp("generic-workload"),
        stop_timeout=10.0,
        apiserver_args=IN_TREE_WORKLOAD,
    )
    problem = None
    try:
        plane.start()
    except (BinariesNotFound, ControlPlaneError) as e:
        problem = str(e)
    if problem is not None:
        pytest.fail(f"cannot start a control plane with the in-tree Workload API: {problem}")
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="module")
def demo(plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """What ``make demo`` sets up: the CRD, the example Nodes and Workloads, placed."""
    kubectl = plane.kubectl
    kubectl("apply", "-k", str(REPO_ROOT / "crds"), check=True)
    kubectl("wait", "--for=condition=established", "crd/workloads.orca.cloudinit.dev", check=True)
    for name in ("namespaces.yaml", "nodes.yaml"):
        kubectl("apply", "-f", str(REPO_ROOT / "examples" / name), check=True)
    log = tmp_path_factory.mktemp("operator") / "operator.log"
    lease = f"orca-names-{uuid.uuid4().hex[:6]}"
    operator = OperatorProcess(plane.kubeconfig_path, log, lease_name=lease)
    try:
        operator.wait_live()
        kubectl("apply", "-f", str(REPO_ROOT / "examples" / "workloads.yaml"), check=True)
        decided = kubectl(
            "wait", "workloads.orca.cloudinit.dev", "--all", "-A",
            "--for=jsonpath={.status.phase}", "--timeout=90s",
        )  # fmt: skip
        assert decided.returncode == 0, decided.stderr + operator.log()
        yield
    finally:
        operator.stop()


def _urls(stderr: str) -> list[str]:
    """The URLs of the requests kubectl made (``-v=6``), without discovery's own."""
    return [u for u in URL.findall(stderr) if "/workloads" in u or "/openapi/v3/apis/" in u]


def test_both_workloads_are_served_and_a_bare_name_is_not_orcas(
    plane: ControlPlane, demo: None
) -> None:
    """The collision is real here: two ``workloads``, and the bare name is Kubernetes' own."""
    resources = plane.kubectl("api-resources", "--no-headers", check=True).stdout
    groups = sorted(
        line.split()[-3] for line in resources.splitlines() if line.startswith("workloads ")
    )
    assert groups == ["orca.cloudinit.dev/v1alpha1", "scheduling.k8s.io/v1alpha2"], resources
    bare = plane.kubectl("get", "workloads", "-A", "-v=6")
    assert bare.returncode == 0, bare.stderr
    assert any("/apis/scheduling.k8s.io/" in u for u in _urls(bare.stderr)), bare.stderr
    assert "No resources found" in bare.stderr  # orca's example Workloads are not listed


@pytest.mark.parametrize("command", ORDERED, ids=[" ".join(c.argv[1:]) for c in ORDERED])
def test_every_documented_command_reaches_orcas_workload(
    plane: ControlPlane, demo: None, command: Command
) -> None:
    result = plane.kubectl(*command.argv[1:], "-v=6", timeout=120)
    where = f"{command.source}: `{' '.join(command.argv)}`"
    if not command.has_placeholders:
        assert result.returncode == 0, f"{where} failed: {result.stderr[-2000:]}"
    urls = _urls(result.stderr)
    assert urls, f"{where} made no request for a Workload: {result.stderr[-2000:]}"
    assert [u for u in urls if "orca.cloudinit.dev" not in u] == [], where
    assert not any("scheduling.k8s.io" in u for u in urls), where
