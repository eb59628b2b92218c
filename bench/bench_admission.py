"""Admission latency of a burst of Workload creates, with orca's validating webhook and
without it, on one living control plane (``hack/testcp``'s build), side by side in one run.

The user's path: a create (a POST of a Workload, as ``kubectl apply`` sends for a new object)
through the real API server, which, with the webhook registered, calls ``orca run
--webhook-host 127.0.0.1 --webhook-port P`` over HTTPS and waits for its answer. Each round
creates ``--burst`` Workloads (``--concurrency`` in flight at once), half with constraints and
an affinity to compile, and measures each request from send to answer; the rounds alternate
webhook off / on so a noisy machine weighs on both alike. Also ``--dry-run=server`` of a bad
Workload (refused by the webhook: the user's error path), and ``kubectl apply`` itself, whose
process start dwarfs both. The API server's own histogram of the webhook's call
(``apiserver_admission_webhook_admission_duration_seconds``) is read for the ``on`` rounds.

    python bench/bench_admission.py --burst 300 --concurrency 16 --rounds 3

Prints p50/p99 per side, the webhook's mean as the API server measured it, and the operator's
peak RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import command_line, peak_rss_mb, print_table, record
from controller.devcluster.controlplane import ControlPlane
from controller.operator.kube import ApiError, KubeApi, load_configuration
from tests.support.harness import REPO_ROOT, OperatorProcess, free_port

GROUP_PATH = "/apis/orca.cloudinit.dev/v1alpha1/namespaces/{ns}/workloads"
CONFIGURATION = "orca-bench"


def workload(name: str, namespace: str, i: int) -> dict[str, Any]:
    spec: dict[str, Any] = {"kind": "Service", "count": 1 + i % 3}
    if i % 2:
        spec["constraints"] = [f'"t{i % 7}" in node.tags', "node.cpu >= 500"]
        spec["affinity"] = [{"target": 'node.kind == "linux"', "weight": 10}]
    return {
        "apiVersion": "orca.cloudinit.dev/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def burst(
    api: KubeApi, namespace: str, count: int, concurrency: int, tag: str, dry_run: bool = False
) -> list[float]:
    """``count`` creates, ``concurrency`` at a time; each one's latency in seconds."""
    gate = asyncio.Semaphore(concurrency)
    latencies: list[float] = []
    params = {"dryRun": "All"} if dry_run else None

    async def one(i: int) -> None:
        obj = workload(f"{tag}-{i}", namespace, i)
        if dry_run:
            obj["spec"]["constraints"] = ['"ssd" in node.tag']  # refused by the webhook
        async with gate:
            started = time.perf_counter()
            try:
                await api.request("POST", GROUP_PATH.format(ns=namespace), obj, params=params)
            except ApiError as exc:
                if not dry_run or exc.status not in (400, 422):
                    raise
            latencies.append(time.perf_counter() - started)

    await asyncio.gather(*(one(i) for i in range(count)))
    return latencies


def webhook_seconds(kubectl: Any) -> tuple[float, float]:
    """The API server's own sum and count of its calls to orca's webhook."""
    total = count = 0.0
    for line in kubectl("get", "--raw", "/metrics", check=True).stdout.splitlines():
        if "apiserver_admission_webhook_admission_duration_seconds" not in line:
            continue
        if 'name="validate-workloads.orca.cloudinit.dev"' not in line:
            continue
        if line.startswith("apiserver_admission_webhook_admission_duration_seconds_sum"):
            total += float(line.rsplit(" ", 1)[1])
        elif line.startswith("apiserver_admission_webhook_admission_duration_seconds_count"):
            count += float(line.rsplit(" ", 1)[1])
    return total, count


def kubectl_applies(plane: ControlPlane, namespace: str, count: int, tag: str) -> list[float]:
    out = []
    for i in range(count):
        text = json.dumps(workload(f"{tag}-k{i}", namespace, i))
        started = time.perf_counter()
        plane.kubectl("apply", "-f", "-", input=text, check=True)
        out.append(time.perf_counter() - started)
    return out


def set_webhook(plane: ControlPlane, on: bool, saved: dict[str, Any]) -> None:
    """Register (from ``saved``) or delete the webhook configuration."""
    if on:
        body = {k: saved[k] for k in ("apiVersion", "kind", "webhooks")}
        body["metadata"] = {"name": CONFIGURATION}
        plane.kubectl("create", "-f", "-", input=json.dumps(body), check=True)
    else:
        plane.kubectl("delete", "validatingwebhookconfiguration", CONFIGURATION, check=True)
    time.sleep(2)  # the API server's webhook informer follows the change


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--burst", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kubectl", type=int, default=20, help="kubectl applies per side")
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="orca-bench-admission-"))
    plane = ControlPlane(workdir / "cp", stop_timeout=10.0)
    plane.start()
    op = None
    try:
        plane.kubectl("apply", "-k", str(REPO_ROOT / "crds"), check=True)
        plane.kubectl(
            "wait", "--for=condition=established", "crd/workloads.orca.cloudinit.dev", check=True
        )
        namespace = f"bench-{uuid.uuid4().hex[:6]}"
        plane.kubectl("create", "namespace", namespace, check=True)
        op = OperatorProcess(
            plane.kubeconfig_path,
            workdir / "operator.log",
            namespaces=[namespace],
            lease_namespace=namespace,
            extra=[
                "--webhook-host=127.0.0.1",
                f"--webhook-port={free_port()}",
                f"--webhook-configuration={CONFIGURATION}",
            ],
        )
        op.wait_live()
        deadline = time.monotonic() + 60
        while plane.kubectl("get", "validatingwebhookconfiguration", CONFIGURATION).returncode:
            assert time.monotonic() < deadline, op.log()
            time.sleep(0.5)
        time.sleep(2)
        saved = json.loads(
            plane.kubectl(
                "get", "validatingwebhookconfiguration", CONFIGURATION, "-o", "json", check=True
            ).stdout
        )
        results: dict[str, list[float]] = {"off": [], "on": [], "refused (dry run)": []}
        kubectl_side: dict[str, list[float]] = {"off": [], "on": []}
        sums = [0.0, 0.0]

        async def rounds() -> None:
            api = KubeApi(load_configuration(str(plane.kubeconfig_path)), max_connections=64)
            try:
                for r in range(args.rounds):
                    for side in ("off", "on"):
                        set_webhook(plane, side == "on", saved)
                        before = webhook_seconds(plane.kubectl)
                        tag = f"r{r}-{side}"
                        results[side] += await burst(
                            api, namespace, args.burst, args.concurrency, tag
                        )
                        if side == "on":
                            results["refused (dry run)"] += await burst(
                                api,
                                namespace,
                                args.burst // 3,
                                args.concurrency,
                                tag + "-dry",
                                dry_run=True,
                            )
                            after = webhook_seconds(plane.kubectl)
                            sums[0] += after[0] - before[0]
                            sums[1] += after[1] - before[1]
                        kubectl_side[side] += kubectl_applies(
                            plane, namespace, args.kubectl // args.rounds or 1, tag
                        )
            finally:
                await api.close()

        asyncio.run(rounds())
        print(
            f"admission latency, {args.rounds} rounds x {args.burst} creates, "
            f"{args.concurrency} in flight (ms):"
        )
        sides = {
            **{("webhook " + k if k in ("on", "off") else k): v for k, v in results.items()},
            **{"kubectl apply, " + k: v for k, v in kubectl_side.items()},
        }
        figures: dict[str, Any] = {}
        for side, values in sides.items():
            ms = [v * 1000 for v in values]
            figures[side] = {
                "requests": len(ms),
                "p50_ms": statistics.median(ms),
                "p99_ms": percentile(ms, 0.99),
                "max_ms": max(ms),
            }
        print_table(
            ("side", "n", "p50", "p99", "max"),
            [(side, *f.values()) for side, f in figures.items()],
        )
        if sums[1]:
            print(
                f"the API server's call to the webhook: mean {sums[0] / sums[1] * 1000:.1f} ms "
                f"over {int(sums[1])} calls"
            )
            figures["the API server's call to the webhook, mean_ms"] = sums[0] / sums[1] * 1000
        rss = peak_rss_mb(op.process.pid)
        print(f"operator peak RSS: {rss:.0f} MB")
        figures["operator peak RSS_mb"] = rss
        record("bench_admission", figures, command_line(argv))
    finally:
        if op is not None:
            op.stop()
        plane.stop()
        subprocess.run(["rm", "-rf", str(workdir)], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
