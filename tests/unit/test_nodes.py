"""Node object -> NodeInfo (docs/design.md 3) and the NodeTable snapshot."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from controller.scheduler.nodes import (
    NodeError,
    NodeTable,
    node_info_from_node,
    node_name,
    read_parts,
    unreadable_node_info,
)
from tests.support.factories import GiB, node, node_object, table_columns


def test_labels_become_runtimes_tags_and_kind() -> None:
    obj = node_object(
        "n1",
        runtimes=("Wasmtime", "docker"),
        tags=("ssd", "gpu"),
        labels={"topology.kubernetes.io/zone": "eu-1a"},
        kind="Proxmox",
    )
    obj["metadata"]["labels"]["runtime.orca.cloudinit.dev/process"] = "false"
    info = node_info_from_node(obj)
    assert info.hostname == "n1"
    assert info.runtimes == ("docker", "wasmtime")  # sorted, lower-cased, "false" ignored
    assert info.tags == ("gpu", "ssd")
    assert info.kind == "proxmox"
    assert info.labels["topology.kubernetes.io/zone"] == "eu-1a"


@pytest.mark.parametrize(
    ("cpu", "memory", "millicores", "bytes_"),
    [
        ("4", "8Gi", 4000, 8 * GiB),
        ("500m", "512Mi", 500, 512 << 20),
        ("1.5", "1G", 1500, 10**9),
        ("0.0001", "100", 1, 100),  # rounded up, like the kubelet does for requests
    ],
    ids=["cores", "milli", "decimal", "tiny"],
)
def test_allocatable_is_parsed_as_quantities(
    cpu: str, memory: str, millicores: int, bytes_: int
) -> None:
    info = node("n1", cpu=cpu, memory=memory)
    assert (info.cpu, info.memory) == (millicores, bytes_)


@pytest.mark.parametrize(
    ("ready", "cordoned", "eligible"),
    [(True, False, True), (False, False, False), (True, True, False)],
    ids=["ready", "not-ready", "cordoned"],
)
def test_eligibility(ready: bool, cordoned: bool, eligible: bool) -> None:
    assert node("n1", ready=ready, cordoned=cordoned).eligible is eligible


def test_defaults_for_a_bare_node() -> None:
    info = node_info_from_node({"metadata": {"name": "bare"}})
    assert info.kind == "linux"
    assert (info.cpu, info.memory, info.runtimes, info.tags) == (0, 0, (), ())
    assert info.ready is False  # no Ready condition: not ready


def test_bad_node_names_the_field() -> None:
    with pytest.raises(NodeError, match=r"metadata\.name"):
        node_info_from_node({"metadata": {}})
    obj = node_object("n1", cpu="lots")
    with pytest.raises(NodeError, match=r"status\.allocatable"):
        node_info_from_node(obj)


def test_table_is_sorted_by_hostname_whatever_the_input_order() -> None:
    a, b, c = node("c"), node("a"), node("b")
    table = NodeTable([a, b, c])
    assert table.hostnames == ("a", "b", "c")
    assert table.index == {"a": 0, "b": 1, "c": 2}
    assert NodeTable([c, a, b]).hostnames == table.hostnames
    assert NodeTable([a]).version != table.version


NOT_READY = {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}


@pytest.mark.parametrize(
    ("change", "reshaped"),
    [
        ({"ready": False, "taints": [NOT_READY]}, False),  # the flap a large cluster always has
        ({"cordoned": True}, False),
        ({"taints": [{"key": "k", "effect": "NoSchedule"}]}, False),
        ({"labels": {"zone": "b"}}, True),  # CEL reads labels
        ({"runtimes": ("wasmtime",)}, True),
        ({"tags": ("gpu",)}, True),
        ({"kind": "proxmox"}, True),
        ({"cpu": "8"}, True),  # CEL and the capacity scores read allocatable
        ({"memory": "1Gi"}, True),
    ],
    ids=lambda v: "-".join(v) if isinstance(v, dict) else str(v),
)
def test_a_table_with_rows_replaced_equals_one_built_anew(
    change: dict[str, Any], reshaped: bool
) -> None:
    """``replaced`` (the operator's path after a Node changed) must give the scheduler exactly
    what a table built from all the nodes gives; it keeps ``shape`` (and so the caches on it)
    only when the change is one CEL and capacity cannot see."""
    before = [
        node("a", taints=[{"key": "t", "effect": "PreferNoSchedule"}]),
        node("b", labels={"zone": "a"}),
        node("c"),
    ]
    table = NodeTable(before)
    changed = node("b", **{"labels": {"zone": "a"}, **change})
    after = table.replaced([changed])
    rebuilt = NodeTable([before[0], changed, before[2]])
    assert table_columns(after) == table_columns(rebuilt)
    assert table_columns(table) == table_columns(NodeTable(before))  # the old table is untouched
    assert after.version not in (table.version, rebuilt.version)
    assert (after.shape != table.shape) is reshaped


def test_replacing_every_kind_of_row_at_once_keeps_the_taint_index_sorted() -> None:
    taint = [{"key": "k", "effect": "NoSchedule"}]
    table = NodeTable([node("a"), node("b", taints=taint), node("c"), node("d")])
    after = table.replaced([node("d", taints=taint), node("b"), node("a", taints=taint)])
    assert after.tainted == (0, 3)
    assert after.shape == table.shape


def test_a_table_says_which_rows_changed_since_each_of_the_last_tables_it_came_from() -> None:
    first = NodeTable([node("a"), node("b"), node("c")])
    assert first.changed_since == {}  # built anew: nothing to start from
    second = first.replaced([node("b", ready=False)])
    third = second.replaced([node("c", cordoned=True)])
    assert third.changed_since == {second.version: {2}, first.version: {1, 2}}
    table = third
    for _ in range(NodeTable.LINEAGE + 3):
        table = table.replaced([node("a", ready=False)])
    assert len(table.changed_since) == NodeTable.LINEAGE
    assert first.version not in table.changed_since  # too far back: judged afresh
    assert NodeTable(table.nodes).changed_since == {}


def test_a_replaced_row_must_already_be_in_the_table() -> None:
    with pytest.raises(KeyError):
        NodeTable([node("a")]).replaced([node("z")])  # adding a node is a new table


# -- validation: what the API server refuses, and orca's own bounds ---------------------------


def _with(path: tuple[str, ...], value: object) -> dict[str, Any]:
    obj = node_object("n1")
    parent = obj
    for part in path[:-1]:
        parent = parent.setdefault(part, {})
    parent[path[-1]] = value
    return obj


#: A DNS-1123 subdomain of 253 characters, the most a Node name or a label prefix may have.
PREFIX_253 = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 61])
LABEL_KEY_RULE = (
    "is not a valid label key (a name of at most 63 letters, digits, '-', '_' or '.', "
    "optionally after a DNS-1123 prefix and '/')"
)
CPU_OVER = "is more than the maximum, 9007199254740992 millicores (2^53)"

# The whole line a user sees: the field, what is wrong, what would be right.
BAD_NODES = [
    ("not-an-object", None, ["a"], "expected an object, got a list"),
    ("metadata-list", ("metadata",), [1], "metadata: expected an object, got a list"),
    ("spec-string", ("spec",), "x", "spec: expected an object, got a string"),
    ("status-int", ("status",), 3, "status: expected an object, got an integer"),
    ("name-empty", ("metadata", "name"), "", "metadata.name is required"),
    ("name-list", ("metadata", "name"), ["a", "b"], "metadata.name: expected a string, got a list"),
    (
        "name-dns",
        ("metadata", "name"),
        "a..b",
        "metadata.name: 'a..b' is not a valid Node name (a DNS-1123 subdomain: lower-case "
        "letters, digits, '-' and '.', at most 253 characters)",
    ),
    (
        "labels-list",
        ("metadata", "labels"),
        ["a"],
        "metadata.labels: expected an object, got a list",
    ),
    (
        "label-value-int",
        ("metadata", "labels"),
        {"a": 1},
        "metadata.labels[a]: expected a string, got an integer",
    ),
    (
        "label-value-null",
        ("metadata", "labels"),
        {"a": None},
        "metadata.labels[a]: expected a string, got null",
    ),
    (
        "label-value-bool",
        ("metadata", "labels"),
        {"a": True},
        "metadata.labels[a]: expected a string, got a boolean",
    ),
    ("name-number", ("metadata", "name"), 1.5, "metadata.name: expected a string, got a number"),
    (
        "label-value-after-a-valid-one",
        ("metadata", "labels"),
        {"a": "b", "c": "d."},
        "metadata.labels[c]: 'd.' is not a valid label value (at most 63 letters, digits, '-', "
        "'_' or '.', starting and ending with a letter or digit)",
    ),
    (
        "label-value-40",  # shown whole: 40 characters at most
        ("metadata", "labels"),
        {"a": "a" * 39 + "."},
        f"metadata.labels[a]: '{'a' * 39}.' is not a valid label value (at most 63 letters, "
        "digits, '-', '_' or '.', starting and ending with a letter or digit)",
    ),
    (
        "label-value-date",  # a YAML timestamp: named by its Python type
        ("metadata", "labels"),
        {"a": datetime.date(2026, 12, 1)},
        "metadata.labels[a]: expected a string, got date",
    ),
    (
        "label-key-int",  # a YAML key
        ("metadata", "labels"),
        {1: "a"},
        "metadata.labels: key '1' is an integer, not a string",
    ),
    (
        "label-prefix-254",
        ("metadata", "labels"),
        {PREFIX_253 + "a/k": "a"},
        f"metadata.labels: key '{PREFIX_253[:37]}...' has a prefix that is not a DNS-1123 "
        "subdomain",
    ),
    (
        "condition-after-ready",  # every condition is read, also after the Ready one
        ("status", "conditions"),
        [{"type": "Ready", "status": "True"}, "junk"],
        "status.conditions[1]: expected an object, got a string",
    ),
    (
        "condition-after-ready-without-time",
        ("status", "conditions"),
        [{"type": "Ready", "status": "False"}, "junk"],
        "status.conditions[1]: expected an object, got a string",
    ),
    (
        "label-key-none",
        ("metadata", "labels"),
        {None: "a"},
        "metadata.labels: key 'None' is null, not a string",
    ),
    (
        "label-key-empty-name",
        ("metadata", "labels"),
        {"example.com/": "a"},
        f"metadata.labels: key 'example.com/' {LABEL_KEY_RULE}",
    ),
    (
        "label-key-upper-prefix",
        ("metadata", "labels"),
        {"Example.com/a": "a"},
        "metadata.labels: key 'Example.com/a' has a prefix that is not a DNS-1123 subdomain",
    ),
    (
        "label-key-64",  # shown cut to 40 characters
        ("metadata", "labels"),
        {"a" * 64: "a"},
        f"metadata.labels: key '{'a' * 37}...' {LABEL_KEY_RULE}",
    ),
    (
        "label-value-dot-end",
        ("metadata", "labels"),
        {"a": "b."},
        "metadata.labels[a]: 'b.' is not a valid label value (at most 63 letters, digits, '-', "
        "'_' or '.', starting and ending with a letter or digit)",
    ),
    (
        "allocatable-list",
        ("status", "allocatable"),
        [],
        "status.allocatable: expected an object, got a list",
    ),
    (
        "cpu-negative",
        ("status", "allocatable", "cpu"),
        "-500m",
        "status.allocatable.cpu: '-500m' must not be negative",
    ),
    (
        "cpu-negative-int",
        ("status", "allocatable", "cpu"),
        -1,
        "status.allocatable.cpu: -1 must not be negative",
    ),
    (
        "cpu-over",
        ("status", "allocatable", "cpu"),
        2**53,
        f"status.allocatable.cpu: 9007199254740992 {CPU_OVER}",
    ),
    (
        "memory-over",
        ("status", "allocatable", "memory"),
        "9Pi",
        "status.allocatable.memory: '9Pi' is more than the maximum, 9007199254740992 bytes (2^53)",
    ),
    (
        "cpu-space",
        ("status", "allocatable", "cpu"),
        " 1",
        "status.allocatable.cpu: ' 1' is not a Kubernetes quantity (examples: 500m, 2, 256Mi)",
    ),
    (
        "cpu-float-nan",
        ("status", "allocatable", "cpu"),
        float("nan"),
        "status.allocatable.cpu: nan is not a Kubernetes quantity",
    ),
    (
        "cpu-float-inf",
        ("status", "allocatable", "cpu"),
        float("inf"),
        f"status.allocatable.cpu: inf {CPU_OVER}",
    ),
    (
        "conditions-object",
        ("status", "conditions"),
        {},
        "status.conditions: expected a list, got an object",
    ),
    (
        "condition-string",
        ("status", "conditions"),
        ["Ready"],
        "status.conditions[0]: expected an object, got a string",
    ),
    (
        "transition-time",
        ("status", "conditions"),
        [{"type": "Ready", "status": "False", "lastTransitionTime": "yesterday"}],
        "status.conditions[0].lastTransitionTime: 'yesterday' is not an RFC 3339 timestamp",
    ),
    (
        "transition-time-no-zone",
        ("status", "conditions"),
        [{"type": "Ready", "status": "False", "lastTransitionTime": "2026-12-01T10:00:00"}],
        "status.conditions[0].lastTransitionTime: '2026-12-01T10:00:00' has no time zone "
        "(RFC 3339 needs Z or an offset)",
    ),
    (
        "unschedulable-string",
        ("spec", "unschedulable"),
        "no",
        "spec.unschedulable: expected true or false, got a string",
    ),
    ("taints-object", ("spec", "taints"), {"k": "v"}, "spec.taints: expected a list"),
    (
        "taint-not-object",  # no field to name: "spec.taints[1].: Input should be..." before
        ("spec", "taints"),
        [{"key": "a", "effect": "NoSchedule"}, "a=b:NoSchedule"],
        "spec.taints[1]: expected an object, got a string",
    ),
    (
        "taints-65",
        ("spec", "taints"),
        [{"key": f"k{i}", "effect": "NoSchedule"} for i in range(65)],
        "spec.taints: more than 64 taints",
    ),
    (
        "taint-without-key",
        ("spec", "taints"),
        [{"key": "a", "effect": "NoSchedule"}, {"effect": "NoSchedule"}],
        "spec.taints[1].key: Field required",
    ),
]


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [(p, v, e) for _, p, v, e in BAD_NODES],
    ids=[i for i, _, _, _ in BAD_NODES],
)
def test_unreadable_nodes_name_the_field(
    path: tuple[str, ...] | None, value: object, expected: str
) -> None:
    obj: Any = value if path is None else _with(path, value)
    with pytest.raises(NodeError) as caught:
        node_info_from_node(obj)
    assert str(caught.value) == expected


@pytest.mark.parametrize(
    ("labels", "cpu", "millicores"),
    [
        ({"example.com/a_b.c": "x-1", "k8s.io/e": ""}, "2", 2000),
        ({"a": "A.b_c-9"}, 3, 3000),  # an int quantity, as JSON gives it
        ({}, 1.5, 1500),  # a float quantity: the API server accepts numbers
        ({}, "9007199254740992m", 2**53),  # the maximum itself
    ],
    ids=["prefixed-keys-empty-value", "int-cpu", "float-cpu", "at-the-maximum"],
)
def test_what_the_api_server_accepts_reads(
    labels: dict[str, str], cpu: object, millicores: int
) -> None:
    obj = node_object("n1.example.com", labels=labels)
    obj["status"]["allocatable"]["cpu"] = cpu
    info = node_info_from_node(obj)
    assert info.cpu == millicores
    assert info.hostname == "n1.example.com"


def test_a_node_without_readable_parts_has_no_name_to_key_it_by() -> None:
    assert node_name({"metadata": {"name": "ok"}, "status": "broken"}) == "ok"
    assert node_name({"metadata": {"name": ["a"]}}) is None
    assert node_name({"metadata": "x"}) is None
    unreadable = unreadable_node_info("ok")
    assert (unreadable.eligible, unreadable.cpu, unreadable.labels) == (False, 0, {})


def test_names_labels_and_taints_at_their_bounds_read() -> None:
    """The largest of each that the API server accepts (a 253-character name and label
    prefix, a 63-character label name and value; orca's bound of 64 taints) reads."""
    labels = {f"{PREFIX_253}/{'n' * 63}": "v" * 63}
    obj = node_object(PREFIX_253, labels=labels)
    obj["spec"]["taints"] = [{"key": f"k{i:02}", "effect": "NoSchedule"} for i in range(64)]
    info = node_info_from_node(obj)
    assert info.hostname == PREFIX_253 and len(PREFIX_253) == 253
    assert info.labels[f"{PREFIX_253}/{'n' * 63}"] == "v" * 63
    assert [t.key for t in info.taints] == [f"k{i:02}" for i in range(64)]


def test_the_parts_read_tell_a_transition_from_a_heartbeat() -> None:
    """``read_parts`` changes with the Ready condition's status or ``lastTransitionTime`` (what
    the lifecycle taint's time is read from), not with a heartbeat; an object whose parts are
    not shaped to be told has none (the full read then says what is wrong)."""

    def parts(**ready: str) -> object:
        obj = node_object("a", ready=False)
        obj["status"]["conditions"][0].update(ready)
        return read_parts(obj)

    start = parts(lastTransitionTime="2026-12-01T10:00:00Z", lastHeartbeatTime="x")
    assert start == parts(lastTransitionTime="2026-12-01T10:00:00Z", lastHeartbeatTime="y")
    assert start != parts(lastTransitionTime="2026-12-01T10:00:05Z", lastHeartbeatTime="x")
    assert start != parts(lastTransitionTime="2026-12-01T10:00:00Z", status="Unknown")
    assert read_parts({"spec": {}, "status": "broken"}) is None
    assert read_parts({"spec": "broken", "status": {}}) is None
    assert read_parts({"status": {"allocatable": [], "conditions": []}}) is None
    assert read_parts({"status": {"allocatable": {}, "conditions": {}}}) is None
    not_an_object: Any = "a"
    assert node_name(not_an_object) is None


@pytest.mark.parametrize("replaced", [False, True], ids=["built", "replaced"])
def test_a_tables_columns_are_read_only(replaced: bool) -> None:
    """A table is shared by every cycle and cache built on it: a plugin that wrote into a
    column would change what all of them see, so every column refuses a write."""
    table = NodeTable([node("a"), node("b", cordoned=True)])
    if replaced:
        table = table.replaced([node("b")])
    for name in ("cpu", "memory", "ready", "cordoned", "readable", "eligible"):
        column = getattr(table, name)
        with pytest.raises(ValueError, match="read-only"):
            column[0] = column[1]
    for name in ("cpu_divisor", "memory_divisor"):
        with pytest.raises(ValueError, match="read-only"):
            getattr(table, name)[0] = 1.0


def test_a_share_of_allocatable_divides_by_it_however_small_and_none_only_where_it_is_zero() -> (
    None
):
    """The rebalancer's shares (used / allocatable) divide by each node's allocatable, a single
    millicore or byte included; only a node with none has no share (an infinite divisor: 0)."""
    table = NodeTable(
        [node("a", cpu="1m", memory="1"), node("b", cpu="0", memory="0"), node("c", cpu="2")]
    )
    assert table.cpu_divisor.tolist() == [1.0, float("inf"), 2000.0]
    assert table.memory_divisor.tolist() == [1.0, float("inf"), 8.0 * GiB]


@pytest.mark.parametrize(
    ("annotations", "kept"),
    [
        (None, False),
        ({}, False),
        ({"orca.cloudinit.dev/do-not-consolidate": "true"}, True),
        ({"orca.cloudinit.dev/do-not-consolidate": "false"}, False),
        ({"orca.cloudinit.dev/do-not-consolidate": "True"}, False),  # as Karpenter: "true" only
        ({"other.io/x": "true"}, False),
    ],
)
def test_a_node_annotated_do_not_consolidate_says_so(
    annotations: dict[str, str] | None, kept: bool
) -> None:
    obj = node_object("a")
    if annotations is not None:
        obj["metadata"]["annotations"] = annotations
    assert node_info_from_node(obj).do_not_consolidate is kept


def test_the_do_not_consolidate_annotation_is_read_as_the_api_server_keeps_it() -> None:
    obj = node_object("a")
    obj["metadata"]["annotations"] = {"orca.cloudinit.dev/do-not-consolidate": True}
    with pytest.raises(NodeError) as caught:
        node_info_from_node(obj)
    assert str(caught.value) == (
        "metadata.annotations[orca.cloudinit.dev/do-not-consolidate]: expected a string, "
        "got a boolean"
    )
    obj["metadata"]["annotations"] = ["x"]
    with pytest.raises(NodeError) as caught:
        node_info_from_node(obj)
    assert str(caught.value) == "metadata.annotations: expected an object, got a list"


def test_the_parts_read_tell_the_do_not_consolidate_annotation_changing() -> None:
    """An annotation-only update is not a heartbeat: the operator reads the Node again."""
    obj = node_object("a")
    before = read_parts(obj)
    obj["metadata"]["annotations"] = {"orca.cloudinit.dev/do-not-consolidate": "true"}
    assert read_parts(obj) != before
    obj["metadata"]["annotations"] = {"orca.cloudinit.dev/do-not-consolidate": "true", "x": "y"}
    assert read_parts(obj) == read_parts(
        {
            **obj,
            "metadata": {
                **obj["metadata"],
                "annotations": {"orca.cloudinit.dev/do-not-consolidate": "true"},
            },
        }
    )
