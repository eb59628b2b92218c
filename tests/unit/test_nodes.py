"""Node object -> NodeInfo (DESIGN.md 3) and the NodeTable snapshot."""

from __future__ import annotations

import pytest

from controller.core.nodes import NodeError, NodeTable, node_info_from_node
from tests.factories import GiB, node, node_object


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
