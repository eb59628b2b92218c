"""The shipped RBAC is least privilege, proven rule by rule on the real API server (issue 10).

The operator runs as its ServiceAccount's user (a client certificate for
``system:serviceaccount:<ns>:orca-controller``), as the Deployment runs it (HTTPS metrics behind
TokenReview and SubjectAccessReview, the webhook's certificate kept in a Secret and its CA in
the webhook configuration), and goes through one scenario: start (creating the certificate's
Secret), see that kube-controller-manager's node lifecycle controller runs (its Lease in
kube-system), take and renew the Lease, place a Workload that existed before it started, move it off
a cordoned Node, post a ``Scheduled`` Event, place a Workload created meanwhile, serve
``/metrics`` to a token allowed to read it, put its CA into the webhook configuration, hand
the Lease back on a graceful stop, renew a certificate that no longer fits when it starts
again, and log no permission denial.

- With the shipped ClusterRole and Role it all works: no permission is missing. The first run
  is the shipped objects exactly as ``kubectl apply -k manifests/default`` installs them, with the
  operator watching all namespaces as the Deployment runs it.
- Then, for every single permission (one verb on one resource), a copy of the roles without it
  makes a named step of the scenario fail: no permission is unused. These trials run in
  parallel, each in its own namespace (its Lease, Role and Workloads there; its own
  ClusterRole and bindings; its own Nodes, which only its Workloads may use), with
  ``-n <namespace>`` so that trials do not place each other's Workloads.
"""

from __future__ import annotations

import base64
import copy
import re
import ssl
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from kubernetes import client as k8s

from controller.devcluster.controlplane import ControlPlane, KubectlRunner
from controller.operator import tls
from tests.integration.conftest import api_client_from
from tests.support.factories import node_object, workload_obj
from tests.support.harness import INSTALL, REPO_ROOT, OperatorProcess, free_port, placements

pytestmark = pytest.mark.controlplane

SERVICE_ACCOUNT = "orca-controller"
LEASE = "orca-controller"
STEP_TIMEOUT = 40.0  # per step; generous for a loaded 2-core machine running 12 operators

# The scenario's steps, in order. A trial stops at the first step that fails.
LIVE = "starts (liveness answers)"
LIFECYCLE = "sees the node lifecycle controller (kube-controller-manager's Lease)"
LEASE_TAKEN = "takes the Lease"
LEASE_RENEWED = "renews the Lease"
PLACED = "places a Workload that existed before it started"
WATCHED = "places a Workload created after it started"
RESCHEDULED = "moves a replica off a cordoned Node"
EVENT = "posts a Scheduled Event"
METRICS = "serves /metrics to a token allowed to read it"
CA_BUNDLE = "puts its CA into the webhook configuration"
RELEASED = "hands the Lease back on a graceful stop"
RENEWED = "renews a serving certificate that no longer fits"
NO_DENIAL = "logs no permission denial"
# WATCHED comes after RESCHEDULED: the Node and Workload informers start together, so once
# a cordon has been seen, a Workload created next can only arrive through the Workload watch
# (not through the first LIST, which would pick it up without the watch right).
STEPS = (
    LIVE,
    LIFECYCLE,
    LEASE_TAKEN,
    LEASE_RENEWED,
    PLACED,
    RESCHEDULED,
    EVENT,
    WATCHED,
    METRICS,
    CA_BUNDLE,
    RELEASED,
    RENEWED,
    NO_DENIAL,
)
SECRET = "orca-controller-tls"
WEBHOOK_SERVICE = "orca-webhook"
READER_ROLE = REPO_ROOT / "manifests" / "rbac" / "metrics-reader.yaml"

#: What the operator logs once it knows the node lifecycle controller runs
#: (``controller.operator.lifecycle``).
CONTROLLER_SEEN = "kube-controller-manager holds Lease kube-system/kube-controller-manager"
#: Roles in their own namespace, not the operator's: their Permission says where.
KUBE_SYSTEM = "kube-system"

DENIAL = re.compile(r"\b403\b|forbidden|not enough permissions", re.IGNORECASE)
# A log line's own timestamp, "[2026-11-30 08:43:56,403] ", whose milliseconds can read 403.
TIMESTAMP = re.compile(r"^\[\d{4}-\d\d-\d\d [\d:,.]+\] ")


@dataclass(frozen=True, order=True)
class Permission:
    """One verb on one resource, from the ClusterRole or a Role: the operator's namespace's
    (leader election, serving certificate) or kube-system's (node lifecycle)."""

    role: str  # "ClusterRole" | "Role" | "Role@kube-system"
    group: str
    resource: str
    verb: str
    names: tuple[str, ...] = ()

    def __str__(self) -> str:
        where = f"{self.resource}.{self.group}" if self.group else self.resource
        named = f" {list(self.names)}" if self.names else ""
        return f"{self.role}: {self.verb} {where}{named}"


# Which step each permission is needed for: the first step that fails without it.
NEEDED_FOR: dict[tuple[str, str, str, str], str] = {
    ("ClusterRole", "orca.cloudinit.dev", "workloads", "list"): PLACED,
    ("ClusterRole", "orca.cloudinit.dev", "workloads", "watch"): WATCHED,
    ("ClusterRole", "orca.cloudinit.dev", "workloads/status", "update"): PLACED,
    ("ClusterRole", "", "nodes", "list"): PLACED,
    ("ClusterRole", "", "nodes", "watch"): RESCHEDULED,
    ("ClusterRole", "", "events", "create"): EVENT,
    # The PriorityClass informer lists them before anything is decided; its watch follows
    # them (and logs the refusal when it cannot).
    ("ClusterRole", "scheduling.k8s.io", "priorityclasses", "list"): PLACED,
    ("ClusterRole", "scheduling.k8s.io", "priorityclasses", "watch"): NO_DENIAL,
    ("Role", "coordination.k8s.io", "leases", "create"): LEASE_TAKEN,
    ("Role", "coordination.k8s.io", "leases", "get"): LEASE_TAKEN,
    ("Role", "coordination.k8s.io", "leases", "update"): LEASE_RENEWED,
    # kube-controller-manager's Lease, read once at start (--node-lifecycle=auto).
    (f"Role@{KUBE_SYSTEM}", "coordination.k8s.io", "leases", "get"): LIFECYCLE,
    # /metrics for who may read it: who is the token's (TokenReview), may they get /metrics
    # (SubjectAccessReview). Without either the scrape is answered 503.
    ("ClusterRole", "authentication.k8s.io", "tokenreviews", "create"): METRICS,
    ("ClusterRole", "authorization.k8s.io", "subjectaccessreviews", "create"): METRICS,
    # The webhook configuration's caBundle, read and replaced by name.
    ("ClusterRole", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "get"): (
        CA_BUNDLE
    ),
    (
        "ClusterRole",
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
        "update",
    ): CA_BUNDLE,
    # The serving certificate's Secret: read and created at start (the operator does not start
    # without its certificate), renewed when it no longer fits.
    ("Role", "", "secrets", "create"): LIVE,
    ("Role", "", "secrets", "get"): LIVE,
    ("Role", "", "secrets", "update"): RENEWED,
}


def permissions(role: dict[str, Any]) -> list[Permission]:
    """Every (verb, resource) pair a Role or ClusterRole grants, one by one."""
    found = []
    kind = role["kind"]
    if role["metadata"].get("namespace") == KUBE_SYSTEM:
        kind = f"{kind}@{KUBE_SYSTEM}"
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    names = tuple(rule.get("resourceNames") or ())
                    found.append(Permission(kind, group, resource, verb, names))
    return found


def rules_of(perms: list[Permission]) -> list[dict[str, Any]]:
    """Permissions back into RBAC rules (one rule each: the same grants, spelled out)."""
    rules = []
    for p in perms:
        rule: dict[str, Any] = {
            "apiGroups": [p.group],
            "resources": [p.resource],
            "verbs": [p.verb],
        }
        if p.names:
            rule["resourceNames"] = list(p.names)
        rules.append(rule)
    return rules


@dataclass
class Shipped:
    """The RBAC objects ``kubectl kustomize manifests/default`` renders: the operator's
    ClusterRole, its Roles (leader election, serving certificate; node lifecycle in
    kube-system), the webhook configuration."""

    cluster_role: dict[str, Any]
    roles: list[dict[str, Any]]
    webhook: dict[str, Any]

    @property
    def permissions(self) -> list[Permission]:
        return permissions(self.cluster_role) + [p for r in self.roles for p in permissions(r)]


@pytest.fixture(scope="module")
def shipped(kubectl: KubectlRunner) -> Shipped:
    """Install the base as a user would (CRD, namespace, RBAC, Deployment...)."""
    rendered = list(yaml.safe_load_all(kubectl("kustomize", str(INSTALL), check=True).stdout))
    kubectl("apply", "-k", str(INSTALL), check=True)
    kubectl("wait", "--for=condition=established", "crd/workloads.orca.cloudinit.dev", check=True)
    # The operator's ClusterRole; of the others, some aggregate into the built-in user roles
    # (test_tenant_roles.py) and metrics-reader is for Prometheus: bound to nobody here.
    (cluster_role,) = [
        o
        for o in rendered
        if o["kind"] == "ClusterRole"
        and not any("aggregate-to-" in k for k in o["metadata"].get("labels", {}))
        and o["metadata"]["name"] != "orca-controller-metrics-reader"
    ]
    roles = [o for o in rendered if o["kind"] == "Role"]
    bindings = [o for o in rendered if o["kind"] in ("ClusterRoleBinding", "RoleBinding")]
    # The bindings give exactly these roles to exactly the operator's ServiceAccount.
    assert sorted((b["roleRef"]["kind"], b["roleRef"]["name"]) for b in bindings) == sorted(
        [("ClusterRole", cluster_role["metadata"]["name"])]
        + [("Role", r["metadata"]["name"]) for r in roles]
    )
    for binding in bindings:
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": "orca-system"}
        ]
    (webhook,) = [o for o in rendered if o["kind"] == "ValidatingWebhookConfiguration"]
    return Shipped(cluster_role, roles, webhook)


@dataclass
class Trial:
    """One run of the scenario: its namespace, Nodes, operator and what it observed."""

    name: str
    namespace: str
    plane: ControlPlane
    log_path: Path
    namespaced: bool  # -n <namespace> (parallel trials) or all namespaces (the shipped setup)
    lease_namespace: str
    service_account_namespace: str  # whose ServiceAccount the operator authenticates as
    webhook_configuration: str  # the ValidatingWebhookConfiguration whose caBundle it keeps
    reader_token: str  # a token allowed to get /metrics
    failed: str | None = None  # the first step that did not happen
    detail: str = ""
    log: str = ""

    @property
    def tag(self) -> str:
        return self.name

    def run(self) -> Trial:
        """Set up Nodes and the first Workload, run the operator through the scenario."""
        api = api_client_from(self.plane.kubeconfig_path)
        core, custom = k8s.CoreV1Api(api), k8s.CustomObjectsApi(api)
        for node in ("a", "b"):
            core.create_node(cast(Any, node_object(f"{self.name}-{node}", tags=(self.tag,))))
        self._create_job(custom, "early")
        kubeconfig = self.plane.mint_kubeconfig(
            f"system:serviceaccount:{self.service_account_namespace}:{SERVICE_ACCOUNT}",
            ["system:serviceaccounts", f"system:serviceaccounts:{self.service_account_namespace}"],
            self.log_path.with_suffix(".kubeconfig"),
        )
        self.kubeconfig = kubeconfig
        op = self._operator()
        try:
            self._scenario(op, core, custom)
        finally:
            op.stop()
            self.log = self.log_path.read_text(errors="replace")
            for node in ("a", "b"):
                core.delete_node(f"{self.name}-{node}")
            api.close()  # type: ignore[no-untyped-call]
        return self

    def _operator(self) -> OperatorProcess:
        """``orca run`` as the Deployment runs it: HTTPS metrics, the webhook on, its
        certificate in the Secret, its CA kept in the webhook configuration."""
        return OperatorProcess(
            self.kubeconfig,
            self.log_path,
            namespaces=[self.namespace] if self.namespaced else [],
            lease_namespace=self.lease_namespace,
            lease_name=LEASE,
            metrics_insecure=False,
            extra=[
                f"--webhook-port={free_port()}",
                f"--webhook-service={self.lease_namespace}/{WEBHOOK_SERVICE}",
                f"--webhook-configuration={self.webhook_configuration}",
                f"--tls-secret={self.lease_namespace}/{SECRET}",
            ],
        )

    def _create_job(self, custom: k8s.CustomObjectsApi, name: str) -> None:
        body = workload_obj(
            name, self.namespace, kind="Job", constraints=[f'"{self.tag}" in node.tags']
        )
        custom.create_namespaced_custom_object(
            "orca.cloudinit.dev", "v1alpha1", self.namespace, "workloads", body
        )

    def _scenario(
        self,
        op: OperatorProcess,
        core: k8s.CoreV1Api,
        custom: k8s.CustomObjectsApi,
    ) -> None:
        def workload(name: str) -> dict[str, Any]:
            return cast(
                dict[str, Any],
                custom.get_namespaced_custom_object(
                    "orca.cloudinit.dev", "v1alpha1", self.namespace, "workloads", name
                ),
            )

        def lease_spec() -> dict[str, Any]:
            """The Lease's spec; empty while there is no Lease."""
            try:
                lease = custom.get_namespaced_custom_object(
                    "coordination.k8s.io", "v1", self.lease_namespace, "leases", LEASE
                )
            except k8s.ApiException as e:
                if e.status == 404:
                    return {}
                raise
            return cast(dict[str, Any], cast(dict[str, Any], lease).get("spec") or {})

        def holder() -> str:
            return str(lease_spec().get("holderIdentity") or "")

        def node_of(name: str) -> str | None:
            placed = placements(workload(name))
            return placed[0][1] if placed else None

        try:
            op.wait_live(STEP_TIMEOUT)
        except AssertionError as e:
            self.failed, self.detail = LIVE, str(e)[:300]
            return
        if not self._until(LIFECYCLE, lambda: CONTROLLER_SEEN in op.log()):
            self.detail = op.log()[-300:]
            return
        if not self._until(LEASE_TAKEN, lambda: holder() != ""):
            return
        first_renew = lease_spec().get("renewTime")
        if not self._until(LEASE_RENEWED, lambda: lease_spec().get("renewTime") != first_renew):
            return
        if not self._until(PLACED, lambda: node_of("early") is not None):
            return
        cordoned = node_of("early")
        core.patch_node(str(cordoned), {"spec": {"unschedulable": True}})
        if not self._until(RESCHEDULED, lambda: node_of("early") not in (None, cordoned)):
            return

        def scheduled_event() -> bool:
            events = core.list_namespaced_event(self.namespace).items
            return any(
                e.reason == "Scheduled" and e.involved_object.name == "early" for e in events
            )

        if not self._until(EVENT, scheduled_event):
            return
        self._create_job(custom, "late")
        if not self._until(WATCHED, lambda: node_of("late") is not None):
            return
        if not self._until(METRICS, lambda: scrape(op.metrics_port, self.reader_token) == 200):
            return
        admission = k8s.AdmissionregistrationV1Api(core.api_client)

        def ca_in_configuration() -> bool:
            secret = core.read_namespaced_secret(SECRET, self.lease_namespace)
            config = admission.read_validating_webhook_configuration(self.webhook_configuration)
            bundle = (config.webhooks or [])[0].client_config.ca_bundle
            return bool(bundle) and bundle == (secret.data or {}).get("ca.crt")

        if not self._until(CA_BUNDLE, ca_in_configuration):
            return
        code = op.stop()
        if code != 0 or holder() != "":
            self.failed, self.detail = RELEASED, f"exit code {code}, Lease holder {holder()!r}"
            return
        # A certificate that no longer fits (issued for other names): the next start renews it.
        stale = tls.generate(["elsewhere.example"])
        core.patch_namespaced_secret(
            SECRET,
            self.lease_namespace,
            {
                "data": {
                    "tls.crt": b64(stale.cert),
                    "tls.key": b64(stale.key),
                    "ca.crt": b64(stale.ca),
                }
            },
        )
        again = self._operator()
        try:

            def renewed() -> bool:
                data = core.read_namespaced_secret(SECRET, self.lease_namespace).data or {}
                return data.get("tls.crt") not in (None, b64(stale.cert))

            if not self._until(RENEWED, renewed):
                self.detail = again.log()[-300:]
                return
        finally:
            again.stop()
        denials = [
            line
            for line in self.log_path.read_text(errors="replace").splitlines()
            if DENIAL.search(TIMESTAMP.sub("", line))
        ]
        if denials:
            self.failed, self.detail = NO_DENIAL, denials[0][:300]

    def _until(self, step: str, happened: Callable[[], bool]) -> bool:
        """Poll ``happened`` until it holds (True) or the step times out (records the failure)."""
        deadline = time.monotonic() + STEP_TIMEOUT
        while time.monotonic() < deadline:
            if happened():
                return True
            time.sleep(0.5)
        self.failed = step
        return False


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def scrape(port: int, token: str) -> int:
    """The status of one HTTPS scrape of /metrics with ``token`` (0: no answer)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    request = urllib.request.Request(
        f"https://127.0.0.1:{port}/metrics", headers={"Authorization": f"Bearer {token}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return 0


def reader_token(kubectl: KubectlRunner, namespace: str) -> str:
    """A token of a ServiceAccount in ``namespace`` bound to the metrics-reader role."""
    kubectl("apply", "-f", str(READER_ROLE), check=True)
    kubectl("create", "serviceaccount", "reader", "-n", namespace, check=True)
    kubectl(
        "create",
        "clusterrolebinding",
        f"orca-reader-{namespace}",
        "--clusterrole=orca-controller-metrics-reader",
        f"--serviceaccount={namespace}:reader",
        check=True,
    )
    return kubectl("create", "token", "reader", "-n", namespace, check=True).stdout.strip()


def webhook_configuration_for(shipped: Shipped, namespace: str) -> dict[str, Any]:
    """A trial's own copy of the shipped webhook configuration, calling a Service in
    ``namespace``, named as its ClusterRole's rule allows (``trial_name``)."""
    config = copy.deepcopy(shipped.webhook)
    config["metadata"] = {"name": trial_name(namespace)}
    for hook in config["webhooks"]:
        hook["clientConfig"]["service"]["namespace"] = namespace
    return config


def trial_name(namespace: str) -> str:
    return f"orca-trial-{namespace}"


def install_roles(
    kubectl: KubectlRunner, shipped: Shipped, namespace: str, without: Permission | None
) -> None:
    """The shipped ClusterRole and Role, minus ``without``, bound to ``namespace``'s
    ServiceAccount (the Role and its binding in ``namespace``, where that trial's Lease is; a
    kube-system Role stays there, named for the trial)."""
    cluster_role = copy.deepcopy(shipped.cluster_role)
    roles = copy.deepcopy(shipped.roles)
    cluster_role["metadata"] = {"name": trial_name(namespace)}
    for obj in (cluster_role, *roles):
        obj["rules"] = rules_of([p for p in permissions(obj) if p != without])
    for role in roles:
        if role["metadata"].get("namespace") == KUBE_SYSTEM:
            role["metadata"] = {"name": trial_name(namespace), "namespace": KUBE_SYSTEM}
        else:
            role["metadata"] = {"name": role["metadata"]["name"], "namespace": namespace}
    for rule in cluster_role["rules"]:  # the trial's own webhook configuration, by name
        if rule["resources"] == ["validatingwebhookconfigurations"]:
            rule["resourceNames"] = [trial_name(namespace)]
    subjects = [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": namespace}]
    objects = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": SERVICE_ACCOUNT, "namespace": namespace},
        },
        cluster_role,
        *roles,
        webhook_configuration_for(shipped, namespace),
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": cluster_role["metadata"]["name"]},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": cluster_role["metadata"]["name"],
            },
            "subjects": subjects,
        },
        *(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": dict(role["metadata"]),
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Role",
                    "name": role["metadata"]["name"],
                },
                "subjects": subjects,
            }
            for role in roles
        ),
    ]
    kubectl("apply", "-f", "-", input=yaml.safe_dump_all(objects), check=True)


def cleanup(kubectl: KubectlRunner, namespace: str) -> None:
    """Workloads go (namespaces never finish deleting without a controller-manager)."""
    kubectl("delete", "workloads", "--all", "-n", namespace, "--wait=false", check=True)
    kubectl(
        "delete",
        "clusterrole,clusterrolebinding,validatingwebhookconfiguration",
        trial_name(namespace),
        "--ignore-not-found",
    )
    kubectl("delete", "clusterrolebinding", f"orca-reader-{namespace}", "--ignore-not-found")
    kubectl(
        "delete", "role,rolebinding", trial_name(namespace), "-n", KUBE_SYSTEM, "--ignore-not-found"
    )


def test_the_shipped_roles_let_the_operator_do_its_whole_job(
    shipped: Shipped, control_plane: ControlPlane, kubectl: KubectlRunner, tmp_path: Path
) -> None:
    name = f"rbac-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name, check=True)
    # As on a fresh install: no certificate Secret yet.
    kubectl("delete", "secret", SECRET, "-n", "orca-system", "--ignore-not-found", check=True)
    trial = Trial(
        name,
        namespace=name,
        plane=control_plane,
        log_path=tmp_path / "shipped.log",
        namespaced=False,  # all namespaces, as the Deployment runs it
        # The shipped ServiceAccount, bindings, Roles and webhook configuration, as installed.
        lease_namespace="orca-system",
        service_account_namespace="orca-system",
        webhook_configuration=shipped.webhook["metadata"]["name"],
        reader_token=reader_token(kubectl, name),
    )
    try:
        trial.run()
        assert trial.failed is None, f"{trial.failed}: {trial.detail}\n{trial.log[-3000:]}"
        # And what it must not do, it cannot: write a Workload's spec, or delete one.
        as_operator = str(trial.log_path.with_suffix(".kubeconfig"))
        for attempt in (
            ("patch", "workload", "early", "--type=merge", "-p", '{"spec":{"kind":"Job"}}'),
            ("delete", "workload", "early"),
        ):
            denied = kubectl(*attempt, "-n", name, kubeconfig=as_operator)
            assert denied.returncode != 0 and "forbidden" in denied.stderr, attempt
    finally:
        cleanup(kubectl, name)


def test_every_permission_is_needed(
    shipped: Shipped, control_plane: ControlPlane, kubectl: KubectlRunner, tmp_path: Path
) -> None:
    perms = shipped.permissions
    keys = {(p.role, p.group, p.resource, p.verb) for p in perms}
    assert len(keys) == len(perms), "a permission is granted twice"
    assert keys == set(NEEDED_FOR), (
        "the shipped roles and this test disagree: permissions without a scenario step "
        f"{sorted(keys - set(NEEDED_FOR))}, steps for permissions no longer shipped "
        f"{sorted(set(NEEDED_FOR) - keys)}"
    )
    trials: list[tuple[Permission, Trial]] = []
    for i, perm in enumerate(sorted(perms)):
        namespace = f"rbac-{i}-{uuid.uuid4().hex[:4]}"
        install_roles(kubectl, shipped, namespace, without=perm)
        token = reader_token(kubectl, namespace)
        trials.append(
            (
                perm,
                Trial(
                    namespace,
                    namespace=namespace,
                    plane=control_plane,
                    log_path=tmp_path / f"{namespace}.log",
                    namespaced=True,
                    lease_namespace=namespace,
                    service_account_namespace=namespace,
                    webhook_configuration=trial_name(namespace),
                    reader_token=token,
                ),
            )
        )
    try:
        with ThreadPoolExecutor(max_workers=len(trials)) as pool:
            done = list(pool.map(lambda t: t[1].run(), trials))
    finally:
        for _, trial in trials:
            cleanup(kubectl, trial.namespace)
    outcome = {str(perm): trial.failed for (perm, _), trial in zip(trials, done, strict=True)}
    expected = {
        str(perm): NEEDED_FOR[(perm.role, perm.group, perm.resource, perm.verb)]
        for perm, _ in trials
    }
    details = "\n".join(
        f"- without {perm}: {trial.failed or 'nothing failed'} {trial.detail}"
        for perm, trial in trials
        if outcome[str(perm)] != expected[str(perm)]
    )
    assert outcome == expected, f"first failing step per missing permission differs:\n{details}"
