"""``orca plan`` under hostile input (issue 7): every bad file is one ``error:`` line, exit 2.

The table holds the cases the issue lists (ids name them), each as the raw text a user could
hand over; the property test mutates valid manifests at random paths; the subprocess test runs
the bombs as a user would, in a process with a memory ceiling.
"""

from __future__ import annotations

import copy
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from controller.cli import main
from controller.inputs import safeyaml
from tests.support.cli import Orca
from tests.support.factories import node_object
from tests.support.properties import examples

NODE = """apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels: {labels}
spec: {spec}
status:
  allocatable: {{cpu: {cpu}, memory: {memory}}}
  conditions: {conditions}
"""


def node_yaml(
    name: str = "a",
    labels: str = "{zone: eu-1a}",
    spec: str = "{}",
    cpu: str = '"4"',
    memory: str = "8Gi",
    conditions: str = '[{type: Ready, status: "True"}]',
) -> str:
    return NODE.format(
        name=name, labels=labels, spec=spec, cpu=cpu, memory=memory, conditions=conditions
    )


WORKLOAD = """apiVersion: orca.cloudinit.dev/v1alpha1
kind: Workload
metadata: {{name: {name}, namespace: shop}}
spec: {spec}
"""


def workload_yaml(name: str = "web", spec: str = "{kind: Job}", status: str = "") -> str:
    text = WORKLOAD.format(name=name, spec=spec)
    return text + (f"status: {status}\n" if status else "")


def billion_laughs(key: str = "name") -> str:
    """The classic bomb, ~700 bytes: nine levels of nine aliases each (9^9 strings)."""
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, cur in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    return "\n".join(lines) + f"\nmetadata: {{{key}: *i}}\n"


def nested(depth: int) -> str:
    return "".join("  " * i + f"k{i}:\n" for i in range(depth)) + "  " * depth + "x\n"


BAD_NODES: list[tuple[str, str | bytes, str]] = [
    ("non-utf8", b"kind: Node\nmetadata: {name: \xff\xfe}\n", "not UTF-8 text (byte 0xff"),
    ("latin1", node_yaml().replace("eu-1a", "z\u00fcrich").encode("latin-1"), "not UTF-8"),
    ("metadata-list", "kind: Node\nmetadata: [a, b]\n", "metadata: expected an object, got a list"),
    ("metadata-string", "kind: Node\nmetadata: a\n", "metadata: expected an object, got a string"),
    ("labels-list", node_yaml(labels="[a]"), "metadata.labels: expected an object, got a list"),
    ("labels-string", node_yaml(labels="x"), "metadata.labels: expected an object"),
    ("status-list", "kind: Node\nmetadata: {name: a}\nstatus: [1]\n", "status: expected an object"),
    ("conditions-string", node_yaml(conditions="Ready"), "status.conditions: expected a list"),
    ("condition-not-object", node_yaml(conditions="[Ready]"), "status.conditions[0]: expected"),
    (
        "allocatable-list",
        node_yaml().replace("allocatable: {", "allocatable: [").replace("8Gi}", "8Gi]"),
        "status.allocatable: expected an object",
    ),
    ("cpu-8Ei", node_yaml(cpu="8Ei"), "status.allocatable.cpu: '8Ei' is more than the maximum"),
    ("cpu-int64-max", node_yaml(cpu="9223372036854775807"), "9007199254740992 millicores (2^53)"),
    ("memory-8Ei", node_yaml(memory="8Ei"), "status.allocatable.memory: '8Ei' is more than"),
    ("cpu-1e999999999", node_yaml(cpu="1e999999999"), "status.allocatable.cpu"),
    ("cpu-inf", node_yaml(cpu=".inf"), "not a finite number"),
    ("cpu-negative", node_yaml(cpu='"-1"'), "status.allocatable.cpu: '-1' must not be negative"),
    ("memory-negative", node_yaml(memory="-1Gi"), "must not be negative"),
    ("cpu-newline", node_yaml(cpu='"1\\n"'), "is not a Kubernetes quantity"),
    ("cpu-bool", node_yaml(cpu="true"), "not bool"),
    ("cpu-list", node_yaml(cpu="[1]"), "not list"),
    ("name-list", node_yaml(name="[a, b]"), "metadata.name: expected a string, got a list"),
    ("name-int", node_yaml(name="7"), "metadata.name: expected a string, got an integer"),
    ("name-missing", node_yaml(name="''"), "metadata.name is required"),
    ("name-upper", node_yaml(name="Node_A"), "'Node_A' is not a valid Node name"),
    ("name-too-long", node_yaml(name="a" * 254), "is not a valid Node name"),
    ("name-newline", node_yaml(name='"a\\nb"'), "is not a valid Node name"),
    ("label-value-int", node_yaml(labels="{zone: 1}"), "metadata.labels[zone]: expected a string"),
    (
        "label-value-bool",
        node_yaml(labels="{runtime.orca.cloudinit.dev/wasm: true}"),
        "expected a string, got a boolean",
    ),
    ("label-key-int", node_yaml(labels="{1: a}"), "key '1' is an integer, not a string"),
    ("label-key-space", node_yaml(labels="{'a b': c}"), "'a b' is not a valid label key"),
    ("label-key-prefix", node_yaml(labels="{'Foo_/a': c}"), "prefix that is not a DNS-1123"),
    ("label-value-space", node_yaml(labels="{zone: 'eu 1'}"), "is not a valid label value"),
    ("label-value-long", node_yaml(labels="{zone: " + "a" * 64 + "}"), "not a valid label value"),
    ("unschedulable-string", node_yaml(spec='{unschedulable: "false"}'), "spec.unschedulable"),
    (
        "duplicate-name",
        node_yaml() + "---\n" + node_yaml(),
        "document 2: Node a appears twice (first in document 1)",
    ),
    ("not-a-node", "kind: Pod\nmetadata: {name: p}\n", "Pod p is not a Node"),
    ("scalar-document", "just text\n", "expected a Kubernetes object, got str"),
    ("deep-3000", nested(3000), "nested more than 100 levels deep"),
    ("deep-flow", "a: " + "[" * 3000 + "]" * 3000 + "\n", "nest"),
    ("billion-laughs", billion_laughs(), "aliases expand to more than"),
    ("alias-cycle", "kind: Node\nmetadata: &m {name: a, self: *m}\n", "(a cycle)"),
    ("alias-undefined", "kind: Node\nmetadata: *m\n", "found undefined alias"),
    ("tag-int-abc", node_yaml(cpu="!!int abc"), "'abc' is not a valid integer"),
    (
        "tag-int-empty",
        node_yaml(cpu="!!int ''"),
        "'' is not a valid integer",
    ),  # found by the fuzz test
    ("tag-bool-maybe", node_yaml(spec="{unschedulable: !!bool maybe}"), "not a valid boolean"),
    ("tag-timestamp", node_yaml(cpu="!!timestamp abc"), "could not determine a constructor"),
    ("tag-custom", node_yaml(cpu="!quantity 4"), "could not determine a constructor"),
    ("tag-python", node_yaml(cpu="!!python/object/apply:os.system [id]"), "constructor"),
    ("int-5000-digits", node_yaml(cpu="1" * 5000), "of 5000 characters is too long"),
    ("control-character", 'kind: Node\nmetadata: {name: "a\x07"}\n', "invalid YAML"),
]


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(node_yaml())
    workloads = tmp_path / "workloads.yaml"
    workloads.write_text(workload_yaml())
    return {"nodes": nodes, "workloads": workloads}


def plan(orca: Orca, nodes: Path, workloads: Path) -> tuple[int, str]:
    code, out, err = orca("plan", "--nodes", nodes, "--workloads", workloads)
    if code == 2:
        assert out == ""
    return code, err


def assert_one_error_line(err: str, path: Path, expected: str) -> None:
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert err.startswith(f"error: {path}"), err
    assert expected in err


def test_the_valid_files_plan(files: dict[str, Path], orca: Orca) -> None:
    code, err = plan(orca, files["nodes"], files["workloads"])
    assert (code, err) == (0, "")


@pytest.mark.parametrize(
    ("content", "expected"), [(c, e) for _, c, e in BAD_NODES], ids=[i for i, _, _ in BAD_NODES]
)
def test_bad_node_files_are_one_error_line(
    files: dict[str, Path],
    orca: Orca,
    content: str | bytes,
    expected: str,
) -> None:
    path = files["nodes"]
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    code, err = plan(orca, path, files["workloads"])
    assert code == 2
    assert_one_error_line(err, path, expected)


BAD_WORKLOADS: list[tuple[str, str | bytes, str]] = [
    ("count-int-abc", workload_yaml(spec="{kind: Service, count: !!int abc}"), "not a valid int"),
    (
        "alloc-id-5000-digits",
        workload_yaml(status="{placements: [{node: a, allocId: " + "7" * 5000 + ", score: 1}]}"),
        "of 5000 characters is too long",
    ),
    (
        "alloc-id-5000-chars",
        workload_yaml(status="{placements: [{node: a, allocId: " + "x" * 5000 + ", score: 1}]}"),
        "status.placements[0].allocId",
    ),
    (
        "score-huge",
        workload_yaml(
            status="{placements: [{node: a, allocId: shop/web-0, score: " + "9" * 30 + "}]}"
        ),
        "status.placements[0].score",
    ),
    (
        "cpu-8Ei",
        workload_yaml(spec="{kind: Job, resources: {cpu: 8Ei}}"),
        "spec.resources[cpu]: '8Ei' is more than the maximum",
    ),
    (
        "memory-8Ei",
        workload_yaml(spec="{kind: Job, resources: {memory: 8Ei}}"),
        "spec.resources[memory]",
    ),
    (
        "cpu-newline",
        workload_yaml(spec='{kind: Job, resources: {cpu: "1\\n"}}'),
        "spec.resources[cpu]",
    ),
    (
        "cpu-1e999999999",
        workload_yaml(spec="{kind: Job, resources: {cpu: 1e999999999}}"),
        "spec.resources[cpu]",
    ),
    # -- issue 46: resources by name, gangs, disruption budgets --
    (
        "gpu-500m",
        workload_yaml(spec="{kind: Job, resources: {nvidia.com/gpu: 500m}}"),
        "spec.resources[nvidia.com/gpu]: must be a whole number",
    ),
    (
        "resources-100-names",
        workload_yaml(
            spec="{kind: Job, resources: {"
            + ", ".join(f"example{i}.com/r: 1" for i in range(100))
            + "}}"
        ),
        "spec.resources: asks for 100 resources; at most 16 are allowed",
    ),
    *(
        (
            f"resource-name-{label}",
            workload_yaml(spec=f"{{kind: Job, resources: {{'{name}': 1}}}}"),
            f"spec.resources: resource '{name}' is not a resource a replica can ask for",
        )
        for label, name in (
            ("gpu", "gpu"),
            ("pods", "pods"),
            ("kubernetes-io", "kubernetes.io/foo"),
            ("leading-dash", "-x.com/y"),
            ("requests-prefix", "requests.example.com/r"),
        )
    ),
    (
        "gpu-past-2^63",
        workload_yaml(spec=f"{{kind: Job, resources: {{nvidia.com/gpu: {2**63}}}}}"),
        f"spec.resources[nvidia.com/gpu]: {2**63} is more than the maximum, {2**53} units",
    ),
    (
        "gpu-past-2^63-string",
        workload_yaml(spec=f"{{kind: Job, resources: {{nvidia.com/gpu: '{2**63}'}}}}"),
        f"spec.resources[nvidia.com/gpu]: '{2**63}' is more than the maximum",
    ),
    (
        "gpu-past-2^53",
        workload_yaml(spec=f"{{kind: Job, resources: {{nvidia.com/gpu: {2**53 + 1}}}}}"),
        f"spec.resources[nvidia.com/gpu]: {2**53 + 1} is more than the maximum, {2**53} units",
    ),
    (
        "ephemeral-storage-past-2^53",
        workload_yaml(spec="{kind: Job, resources: {ephemeral-storage: 8Ei}}"),
        f"spec.resources[ephemeral-storage]: '8Ei' is more than the maximum, {2**53} bytes",
    ),
    (
        "gang-min-count-0",
        workload_yaml(spec="{kind: Service, count: 2, gang: {minCount: 0}}"),
        "spec.gang.minCount: Input should be greater than or equal to 1",
    ),
    (
        "gang-min-count-over-count",
        workload_yaml(spec="{kind: Service, count: 2, gang: {minCount: 3}}"),
        "spec: gang.minCount must not be more than count",
    ),
    (
        "gang-on-job",
        workload_yaml(spec="{kind: Job, gang: {minCount: 1}}"),
        "spec: gang is only allowed when kind is Service",
    ),
    *(
        (
            f"budget-{label}",
            workload_yaml(spec=f"{{kind: Service, disruption: {budget}}}"),
            message,
        )
        for label, budget, message in (
            ("150-percent", "{minAvailable: '150%'}", "spec.disruption.minAvailable: must be a"),
            ("minus-1-percent", "{maxUnavailable: '-1%'}", "spec.disruption.maxUnavailable: must"),
            ("negative", "{maxUnavailable: -1}", "spec.disruption.maxUnavailable: must be a"),
            ("past-int32", f"{{minAvailable: {2**31}}}", "spec.disruption.minAvailable: must be a"),
            ("both", "{minAvailable: 1, maxUnavailable: 1}", "spec.disruption: exactly one of"),
            ("none", "{}", "spec.disruption: exactly one of minAvailable and maxUnavailable"),
        )
    ),
    *(
        (
            f"mode-{old}",
            workload_yaml(spec=f"{{kind: DaemonSet, schedule: {{mode: {old}}}}}"),
            f"spec.schedule.mode: '{old}' is now spelled '{new}'",
        )
        for old, new in (
            ("every-node", "EveryNode"),
            ("matching", "Matching"),
            ("mandatory", "Mandatory"),
        )
    ),
    ("mode-unknown", workload_yaml(spec="{kind: DaemonSet, schedule: {mode: All}}"), "EveryNode"),
    ("name-upper", workload_yaml(name="Web"), "metadata.name"),
    ("name-list", workload_yaml(name="[a, b]"), "metadata.name"),
    ("name-bomb", billion_laughs(), "aliases expand"),
    ("deep-3000", nested(3000), "nested more than 100"),
    ("non-utf8", b"kind: Workload\nx: \xc3\x28\n", "not UTF-8 text (byte 0xc3"),
]


@pytest.mark.parametrize(
    ("content", "expected"),
    [(c, e) for _, c, e in BAD_WORKLOADS],
    ids=[i for i, _, _ in BAD_WORKLOADS],
)
def test_bad_workload_files_are_one_error_line(
    files: dict[str, Path],
    orca: Orca,
    content: str | bytes,
    expected: str,
) -> None:
    path = files["workloads"]
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    code, err = plan(orca, files["nodes"], path)
    assert code == 2
    assert_one_error_line(err, path, expected)


def test_a_file_over_the_size_limit_is_refused_before_parsing(
    files: dict[str, Path], orca: Orca, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(safeyaml, "MAX_FILE_BYTES", 1 << 20)
    path = files["nodes"]
    path.write_text(node_yaml() + "#" * (1 << 20))
    code, err = plan(orca, path, files["workloads"])
    assert code == 2
    assert_one_error_line(err, path, "larger than 1 MiB")


GOOD_NODES = [
    ("timestamp-label-is-a-string", node_yaml(labels="{built: 2024-01-01}")),
    ("prefixed-labels", node_yaml(labels="{example.com/a_b.c: x-1, k8s.io/empty: ''}")),
    ("int-and-float-quantities", node_yaml(cpu="4", memory="1.5")),
    ("cpu-at-the-maximum", node_yaml(cpu="9007199254740992m")),
    (
        "merge-key",
        "kind: List\nitems:\n- &base {apiVersion: v1, kind: Node, metadata: {name: a}}\n"
        "- <<: *base\n  metadata: {name: b}\n",
    ),
    (
        "aliases-within-budget",
        "kind: List\nitems:\n- {kind: Node, metadata: {name: a, labels: &l {zone: z}}}\n"
        "- {kind: Node, metadata: {name: b, labels: *l}}\n",
    ),
    ("kubectl-list", yaml.safe_dump({"kind": "List", "items": [node_object("a")]})),
]


@pytest.mark.parametrize("content", [c for _, c in GOOD_NODES], ids=[i for i, _ in GOOD_NODES])
def test_what_kubectl_accepts_is_accepted(files: dict[str, Path], orca: Orca, content: str) -> None:
    path = files["nodes"]
    path.write_text(content)
    code, err = plan(orca, path, files["workloads"])
    assert err == ""
    assert code in (0, 1)  # placed, or not (a node may be not ready): never bad input


# -- property: random mutations of valid manifests never escape as an exception ------------------

VALID_NODE: dict[str, Any] = node_object(
    "a",
    labels={"zone": "eu-1a"},
    tags=("ssd",),
    taints=[{"key": "dedicated", "value": "ml", "effect": "PreferNoSchedule"}],
)
VALID_WORKLOAD: dict[str, Any] = {
    "apiVersion": "orca.cloudinit.dev/v1alpha1",
    "kind": "Workload",
    "metadata": {"name": "web", "namespace": "shop"},
    "spec": {
        "kind": "Service",
        "count": 2,
        "resources": {"cpu": "500m", "memory": "1Gi"},
        "constraints": ['"ssd" in node.tags'],
        "affinity": [{"target": 'node.kind == "linux"', "weight": 10}],
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "ml"}],
    },
    "status": {"placements": [{"node": "a", "allocId": "shop/web-0", "score": 50}]},
}


def paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into a JSON-shaped value (dict keys and list indexes)."""
    out = [prefix]
    if isinstance(obj, dict):
        for key, value in obj.items():
            out += paths(value, (*prefix, key))
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            out += paths(value, (*prefix, i))
    return out


def replace(obj: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    copied = copy.deepcopy(obj)
    parent = copied
    for part in path[:-1]:
        parent = parent[part]
    parent[path[-1]] = value
    return copied


ODD_STRINGS = st.sampled_from(
    [
        "",
        " ",
        "-1",
        "1\n",
        "8Ei",
        "1e999999999",
        "9" * 30,
        "\u00e9",
        "a" * 300,
        "NaN",
        "0x10",
        "true",
        "null",
        "~",
        "[",
        "{a: b}",
        "*a",
        "&a",
        "!!int x",
        "\x00",
        "Ready",
        "True",
    ]
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    ODD_STRINGS,
    st.binary(max_size=8),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def deep_value(depth: int) -> Any:
    """Maps and lists nested ``depth`` deep (past ``safeyaml.MAX_DEPTH`` near 100; not much
    deeper, or PyYAML's recursive dumper, which writes the test's file, gives up)."""
    value: Any = "x"
    for i in range(depth):
        value = {"k": [value]} if i % 2 else {"k": value}
    return value


@st.composite
def mutated(draw: st.DrawFn, valid: dict[str, Any]) -> str:
    """A valid manifest with 1-3 values replaced (wrong types, odd strings, deep nesting), as
    YAML text, sometimes with a stray byte or YAML token spliced in."""
    obj = valid
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths(obj)))
        value = draw(st.one_of(VALUES, st.integers(60, 130).map(deep_value)))
        obj = replace(obj, path, value)
    text = yaml.safe_dump(obj)
    if draw(st.booleans()):
        at = draw(st.integers(0, len(text)))
        text = (
            text[:at]
            + draw(st.sampled_from(["\udcff", "&x ", "*x", "!!int ", "- ", "\t"]))
            + (text[at:])
        )
    return text


@settings(
    max_examples=examples(150),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(node_text=mutated(VALID_NODE), workload_text=mutated(VALID_WORKLOAD))
def test_mutated_manifests_exit_0_1_or_2_with_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], node_text: str, workload_text: str
) -> None:
    nodes, workloads = tmp_path / "nodes.yaml", tmp_path / "workloads.yaml"
    nodes.write_bytes(node_text.encode("utf-8", "surrogateescape"))
    workloads.write_bytes(workload_text.encode("utf-8", "surrogateescape"))
    code = main(["plan", "--nodes", str(nodes), "--workloads", str(workloads), "-o", "json"])
    _, err = capsys.readouterr()
    event(f"exit {code}")  # --hypothesis-show-statistics: how often each outcome came up
    assert code in (0, 1, 2)
    if code == 2:
        assert err.startswith("error: ") and err.count("\n") == 1, err


# -- as a user runs it: a process with a memory ceiling ----------------------------------------

MEMORY_CEILING = 1 << 30


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CEILING, MEMORY_CEILING))


@pytest.mark.parametrize(
    ("content", "expected"),
    [(billion_laughs(), "aliases expand"), (nested(5000), "nested more than 100")],
    ids=["billion-laughs", "nested-5000"],
)
def test_bombs_end_in_one_line_in_a_process_under_a_memory_ceiling(
    tmp_path: Path, content: str, expected: str
) -> None:
    """The bomb as a user would meet it: ``orca plan`` in its own process, 1 GiB of address
    space at most (the bomb needs more than that to expand) and a timeout as a hang guard."""
    (tmp_path / "nodes.yaml").write_text(content)
    (tmp_path / "workloads.yaml").write_text(workload_yaml())
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "controller.cli",
            "plan",
            "--nodes",
            "nodes.yaml",
            "--workloads",
            "workloads.yaml",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        preexec_fn=_limit_memory,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert result.stderr.startswith("error: nodes.yaml: ") and result.stderr.count("\n") == 1
    assert expected in result.stderr
