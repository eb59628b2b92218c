"""Tenants get Workloads through Kubernetes' own ``admin``, ``edit`` and ``view`` roles (issue
22), proven on the real API server with the real aggregation controller (kube-controller-manager's,
which the test control plane runs).

``manifests/default`` installs two ClusterRoles labelled
``rbac.authorization.k8s.io/aggregate-to-{admin,edit,view}: "true"``; the aggregation
controller copies their rules into the built-in roles. Three users are bound, each by a
RoleBinding in one namespace, to the built-in ``admin``, ``edit`` and ``view``, and act
through impersonation (``kubectl --as``: the API server authorizes the impersonated user):

- admin and edit create, read, patch, replace and delete a Workload, for real;
- view reads them and is refused every write;
- nobody writes ``workloads/status`` (only the operator's ClusterRole does);
- and with the same bindings but the shipped roles stripped of their aggregation labels, the
  same requests are refused: the labels are what grants them.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml

from controller.devcluster.controlplane import KubectlRunner
from tests.support.factories import workload_obj
from tests.support.harness import INSTALL

pytestmark = pytest.mark.controlplane

RESOURCE = "workloads.orca.cloudinit.dev"  # never a bare `workloads`: Kubernetes has one too
GROUP = "orca.cloudinit.dev"
AGGREGATE = "rbac.authorization.k8s.io/aggregate-to-"
BUILT_IN = ("admin", "edit", "view")
# user -> the built-in ClusterRole bound to them in the namespace
USERS = {"alice": "admin", "bob": "edit", "carol": "view"}
WRITERS = ("alice", "bob")
READ = {"get", "list", "watch"}
WRITE = {"create", "update", "patch", "delete", "deletecollection"}
TIMEOUT = 60.0


def tenant_roles(kubectl: KubectlRunner) -> list[dict[str, Any]]:
    """The ClusterRoles of ``manifests/default`` that aggregate into a built-in role."""
    rendered = yaml.safe_load_all(kubectl("kustomize", str(INSTALL), check=True).stdout)
    return [
        o
        for o in rendered
        if o["kind"] == "ClusterRole"
        and any(k.startswith(AGGREGATE) for k in o["metadata"].get("labels", {}))
    ]


def granted(rules: list[dict[str, Any]]) -> set[str]:
    """The verbs these rules grant on orca's Workloads (the resource itself, or its status)."""
    verbs = set()
    for rule in rules or []:
        if GROUP in rule.get("apiGroups", []):
            for resource in rule.get("resources", []):
                verbs |= {f"{resource}:{verb}" for verb in rule.get("verbs", [])}
    return verbs


def built_in_grants(kubectl: KubectlRunner) -> dict[str, set[str]]:
    roles = json.loads(kubectl("get", "clusterrole", *BUILT_IN, "-o", "json", check=True).stdout)
    return {r["metadata"]["name"]: granted(r.get("rules") or []) for r in roles["items"]}


def wait_for_grants(kubectl: KubectlRunner, want: dict[str, set[str]], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while (seen := built_in_grants(kubectl)) != want:
        if time.monotonic() > deadline:
            raise AssertionError(f"the built-in roles never {what}: {seen}, want {want}")
        time.sleep(0.3)


EDIT = {f"workloads:{v}" for v in READ | WRITE}
VIEW = {f"workloads:{v}" for v in READ}
AGGREGATED = {"admin": EDIT, "edit": EDIT, "view": VIEW}
NOT_AGGREGATED: dict[str, set[str]] = {"admin": set(), "edit": set(), "view": set()}


@pytest.fixture(scope="module")
def namespace(kubectl: KubectlRunner) -> Iterator[str]:
    """The install as a user applies it, and a namespace where each user holds one built-in
    role, bound the way namespaces are shared: a RoleBinding to the ClusterRole."""
    kubectl("apply", "-k", str(INSTALL), check=True)
    kubectl("wait", "--for=condition=established", f"crd/{RESOURCE}", check=True)
    wait_for_grants(kubectl, AGGREGATED, "aggregated the shipped roles")
    name = f"tenants-{uuid.uuid4().hex[:6]}"
    bindings = [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": f"{user}-{role}", "namespace": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role,
            },
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        }
        for user, role in USERS.items()
    ]
    kubectl("create", "namespace", name, check=True)
    kubectl("apply", "-f", "-", input=yaml.safe_dump_all(bindings), check=True)
    yield name
    kubectl("delete", RESOURCE, "--all", "-n", name, "--wait=false")


Run = Callable[..., Any]


@pytest.fixture
def as_user(kubectl: KubectlRunner, namespace: str) -> Run:
    """``as_user("bob", "get", RESOURCE, "x")``: kubectl in the namespace, impersonating."""

    def run(user: str, *args: str, input: str | None = None) -> Any:
        return kubectl("--as", user, "-n", namespace, *args, input=input)

    return run


def read(kubectl: KubectlRunner, namespace: str, name: str) -> dict[str, Any] | None:
    """The Workload as the admin sees it, or None when it does not exist."""
    result = kubectl("get", RESOURCE, name, "-n", namespace, "-o", "json")
    if result.returncode != 0:
        assert "NotFound" in result.stderr, result.stderr
        return None
    obj: dict[str, Any] = json.loads(result.stdout)
    return obj


def refused(result: Any) -> bool:
    return bool(result.returncode != 0 and "forbidden" in result.stderr.lower())


@pytest.mark.parametrize("user", WRITERS)
def test_admin_and_edit_create_read_change_and_delete_workloads(
    user: str, as_user: Run, kubectl: KubectlRunner, namespace: str
) -> None:
    name = f"{user}-web"
    body = workload_obj(name, namespace, kind="Service", count=2, resources={"cpu": "100m"})
    created = as_user(user, "create", "-f", "-", input=json.dumps(body))
    assert created.returncode == 0, created.stderr
    assert read(kubectl, namespace, name) is not None

    got = as_user(user, "get", RESOURCE, name, "-o", "json")
    assert got.returncode == 0 and json.loads(got.stdout)["spec"]["count"] == 2, got.stderr
    listed = as_user(user, "get", RESOURCE, "-o", "name")
    assert listed.returncode == 0 and name in listed.stdout, listed.stderr

    patched = as_user(user, "patch", RESOURCE, name, "--type=merge", "-p", '{"spec":{"count":3}}')
    assert patched.returncode == 0, patched.stderr
    assert (read(kubectl, namespace, name) or {})["spec"]["count"] == 3

    current = read(kubectl, namespace, name) or {}  # with its resourceVersion: an update
    current["spec"]["count"] = 4
    replaced = as_user(user, "replace", "-f", "-", input=json.dumps(current))
    assert replaced.returncode == 0, replaced.stderr
    assert (read(kubectl, namespace, name) or {})["spec"]["count"] == 4

    deleted = as_user(user, "delete", RESOURCE, name, "--wait=false")
    assert deleted.returncode == 0, deleted.stderr
    assert read(kubectl, namespace, name) is None


def test_view_reads_workloads_and_is_refused_every_write(
    as_user: Run, kubectl: KubectlRunner, namespace: str
) -> None:
    body = workload_obj("shared", namespace, kind="Job", resources={"cpu": "100m"})
    kubectl("apply", "-f", "-", input=json.dumps(body), check=True)
    before = read(kubectl, namespace, "shared")
    got = as_user("carol", "get", RESOURCE, "shared", "-o", "json")
    assert got.returncode == 0 and json.loads(got.stdout)["metadata"]["name"] == "shared"
    listed = as_user("carol", "get", RESOURCE, "-o", "name")
    assert listed.returncode == 0 and "shared" in listed.stdout, listed.stderr

    other = workload_obj("carols", namespace, kind="Job")
    assert refused(as_user("carol", "create", "-f", "-", input=json.dumps(other)))
    assert refused(
        as_user(
            "carol",
            "patch",
            RESOURCE,
            "shared",
            "--type=merge",
            "-p",
            '{"spec":{"kind":"Service"}}',
        )
    )
    assert refused(as_user("carol", "delete", RESOURCE, "shared", "--wait=false"))
    assert read(kubectl, namespace, "carols") is None
    assert read(kubectl, namespace, "shared") == before


@pytest.mark.parametrize("user", list(USERS))
def test_nobody_but_the_operator_writes_status(
    user: str, as_user: Run, kubectl: KubectlRunner, namespace: str
) -> None:
    """A placement is the operator's word: a tenant who could write status could claim Nodes."""
    name = f"status-{user}"
    kubectl(
        "apply", "-f", "-", input=json.dumps(workload_obj(name, namespace, kind="Job")), check=True
    )
    before = read(kubectl, namespace, name)
    claim = '{"status":{"phase":"Scheduled","placements":[{"node":"n1","allocId":"x"}]}}'
    result = as_user(
        user, "patch", RESOURCE, name, "--subresource=status", "--type=merge", "-p", claim
    )
    assert refused(result), (result.returncode, result.stderr)
    assert "workloads/status" in result.stderr
    assert read(kubectl, namespace, name) == before
    for verb in ("patch", "update"):
        can = as_user(user, "auth", "can-i", verb, RESOURCE, "--subresource=status")
        assert can.stdout.strip() == "no", (verb, can.stdout, can.stderr)


def test_without_the_aggregation_labels_the_same_users_are_refused(
    as_user: Run, kubectl: KubectlRunner, namespace: str
) -> None:
    """The negative control: same users, same RoleBindings, the shipped roles still installed
    but without their aggregation labels. The controller takes their rules back out of the
    built-in roles, and every request the tests above make succeed is refused."""
    roles = tenant_roles(kubectl)
    assert {r["metadata"]["name"] for r in roles}, "no aggregated ClusterRole is shipped"
    kubectl(
        "apply",
        "-f",
        "-",
        input=json.dumps(workload_obj("kept", namespace, kind="Job")),
        check=True,
    )
    try:
        for role in roles:
            labels = [k for k in role["metadata"]["labels"] if k.startswith(AGGREGATE)]
            kubectl(
                "label",
                "clusterrole",
                role["metadata"]["name"],
                *(f"{k}-" for k in labels),
                check=True,
            )
        wait_for_grants(kubectl, NOT_AGGREGATED, "dropped the unlabelled roles")
        for user in USERS:
            body = workload_obj(f"{user}-again", namespace, kind="Job")
            assert refused(as_user(user, "create", "-f", "-", input=json.dumps(body))), user
            assert refused(as_user(user, "get", RESOURCE, "kept")), user
            assert refused(as_user(user, "delete", RESOURCE, "kept", "--wait=false")), user
        assert read(kubectl, namespace, "kept") is not None
    finally:
        kubectl("apply", "-f", "-", input=yaml.safe_dump_all(roles), check=True)
        wait_for_grants(kubectl, AGGREGATED, "aggregated the shipped roles again")
    created = as_user(
        "bob",
        "create",
        "-f",
        "-",
        input=json.dumps(workload_obj("bob-again", namespace, kind="Job")),
    )
    assert created.returncode == 0, created.stderr
