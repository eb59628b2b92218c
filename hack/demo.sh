#!/usr/bin/env bash
# `make demo`: a local living cluster (etcd, kube-apiserver, kube-controller-manager, kwok), seven
# sample Nodes that kwok keeps alive, the operator, sample Workloads.
# `make demo-stop` (or `hack/demo.sh stop`) stops the operator and the control plane.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

DIR="${ORCA_DEMO_DIR:-$PWD/.dev-cluster}"
ORCA=.venv/bin/orca
PY=.venv/bin/python
BIN_DIR="$(bash hack/testcp/build.sh --print-bin-dir)"
KUBECTL=("$BIN_DIR/kubectl" "--kubeconfig=$DIR/kubeconfig")

stop() {
  if [[ -f "$DIR/operator.pid" ]]; then
    kill "$(cat "$DIR/operator.pid")" 2>/dev/null || true
    rm -f "$DIR/operator.pid"
  fi
  "$ORCA" dev-cluster stop --dir "$DIR" || true
}

start() {
  if ! "$ORCA" dev-cluster status --dir "$DIR" >/dev/null 2>&1; then
    echo "==> starting etcd, kube-apiserver, kube-controller-manager and kwok in $DIR"
    "$ORCA" dev-cluster start --dir "$DIR" --bin-dir "$BIN_DIR"
  fi
  echo "==> installing the Workload CRD, sample namespaces and Nodes"
  "${KUBECTL[@]}" apply -k crds/ >/dev/null
  "${KUBECTL[@]}" wait --for=condition=established crd/workloads.orca.cloudinit.dev >/dev/null
  "${KUBECTL[@]}" apply -f examples/namespaces.yaml >/dev/null
  # The Nodes register as kubelets do, saying nothing of their readiness: kwok reports them
  # Ready through its heartbeats and the controller manager lifts the not-ready taint that
  # admission puts on every new Node. (examples/nodes.yaml shows them as a live cluster's
  # API returns them, Ready, for `orca plan`; a Node that claims Ready, kwok never sets up.)
  "$PY" -c '
import sys, yaml
nodes = yaml.safe_load(sys.stdin)
for node in nodes["items"]:
    status = node.setdefault("status", {})
    status.pop("conditions", None)
    status.setdefault("capacity", status.get("allocatable", {}))
yaml.safe_dump(nodes, sys.stdout)' <examples/nodes.yaml | "${KUBECTL[@]}" apply -f - >/dev/null
  "${KUBECTL[@]}" wait nodes --all --for=condition=Ready --timeout=120s >/dev/null
  for _ in $(seq 120); do  # ... and the controller manager has lifted the not-ready taint
    "${KUBECTL[@]}" get nodes -o jsonpath='{.items[*].spec.taints[*].key}' \
      | grep -q node.kubernetes.io/not-ready || break
    sleep 1
  done
  echo "==> $("${KUBECTL[@]}" get nodes --no-headers | grep -c ' Ready') Nodes Ready (kwok heartbeats)"
  if [[ -f "$DIR/operator.pid" ]] && kill -0 "$(cat "$DIR/operator.pid")" 2>/dev/null; then
    echo "==> the operator is already running (pid $(cat "$DIR/operator.pid"))"
  else
    echo "==> starting the operator (log: $DIR/operator.log, metrics: http://127.0.0.1:9090/metrics," \
      "admission webhook: https://127.0.0.1:9443)"
    # Local use: plain-HTTP metrics (--metrics-insecure); the webhook registers itself with
    # the dev cluster's API server by URL. Every port on loopback only: nothing the demo
    # serves is reachable from another machine.
    nohup "$ORCA" run --kubeconfig "$DIR/kubeconfig" --liveness http://127.0.0.1:8080/healthz \
      --metrics-insecure --metrics-bind-address 127.0.0.1 \
      --webhook-host 127.0.0.1 --webhook-port 9443 --webhook-bind-address 127.0.0.1 \
      >"$DIR/operator.log" 2>&1 &
    echo $! >"$DIR/operator.pid"
  fi
  for _ in $(seq 60); do  # ready: informers synced and the webhook registered
    curl -fsS http://127.0.0.1:9090/readyz >/dev/null 2>&1 \
      && "${KUBECTL[@]}" get validatingwebhookconfiguration orca-controller >/dev/null 2>&1 && break
    sleep 1
  done
  echo "==> applying examples/workloads.yaml"
  "${KUBECTL[@]}" apply -f examples/workloads.yaml
  "${KUBECTL[@]}" wait orcawl --all -A --for=jsonpath='{.status.phase}' --timeout=60s >/dev/null
  echo
  "${KUBECTL[@]}" get orcawl -A -o wide
  echo
  echo "==> a Workload with a typo in its constraint is refused at the door:"
  echo "    kubectl apply: constraints: ['\"ssd\" in node.tag']"
  "${KUBECTL[@]}" apply -f - <<'YAML' || true
apiVersion: orca.cloudinit.dev/v1alpha1
kind: Workload
metadata: {name: typo, namespace: shop}
spec:
  kind: Service
  count: 2
  constraints: ['"ssd" in node.tag']
YAML
  cat <<MSG

orca is running. Try:
  export KUBECONFIG=$DIR/kubeconfig PATH=$BIN_DIR:\$PATH
  kubectl describe orcawl -n ml trainer             # why it is Unschedulable
  kubectl get orcawl -A --field-selector status.phase=Unschedulable
  kubectl wait --for=condition=Ready orcawl -n shop web   # every replica placed
  kubectl explain orcawl.spec                       # the API, field by field
  kubectl scale orcawl -n shop web --replicas=8 && kubectl get orcawl -A   # /scale
  kubectl apply --dry-run=server -f my-workload.yaml   # checked by the webhook, nothing stored
  kubectl cordon node-b && kubectl get orcawl -n shop web -o yaml
  kubectl get nodes; kubectl get leases -n kube-node-lease   # kwok's heartbeats
  .venv/bin/orca dev-cluster silence --dir $DIR node-c  # Unknown + tainted after 50 s
  .venv/bin/orca dev-cluster revive --dir $DIR node-c
  .venv/bin/orca plan --from-cluster --workloads examples/workloads.yaml
  .venv/bin/orca plan --from-cluster --drain topology.kubernetes.io/zone=eu-1a   # before you drain
  .venv/bin/orca plan --from-cluster --drain topology.kubernetes.io/zone=eu-1a --add-nodes examples/spare-node.yaml:auto
  .venv/bin/orca explain -n ml trainer               # each node: the filter that rejects it
  .venv/bin/orca rebalance --from-cluster            # moves that would even out shop/web (dry run)
Stop everything with: make demo-stop
MSG
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
