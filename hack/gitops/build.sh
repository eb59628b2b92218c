#!/usr/bin/env bash
# Build the GitOps clients orca's tests ask whether a Workload is healthy, from the Go module
# proxy, pinned by the committed go.mod/go.sum next to this script:
#   kstatus     sigs.k8s.io/cli-utils' kstatus (status.Compute): what Flux's wait/healthChecks
#               and cli-utils' appliers compute for any object
#   argohealth  an Argo CD health.lua run the way Argo CD runs it, in gopher-lua
# (tests/integration/test_gitops_health.py feeds them real Workloads.)
#
# Binaries land in a cache keyed by the sources, outside the repository:
#   ${ORCA_GITOPS_CACHE:-$HOME/.cache/orca-gitops}/<hash>/bin/
# A second run with the binaries present only checks a stamp (no `go` at all).
#
# Usage:
#   hack/gitops/build.sh                 build if needed; stdout is the bin dir
#   hack/gitops/build.sh --print-bin-dir print the bin dir; exit 0 if built, 3 if not
#   hack/gitops/build.sh --force         rebuild even if the cache looks complete
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BINARIES=(kstatus argohealth)
RECIPE=1  # bump when the way binaries are built changes

say() { printf '[gitops] %s\n' "$*" >&2; }
die() { printf 'gitops: error: %s\n' "$*" >&2; exit 1; }

mode=build
case "${1-}" in
  "") ;;
  --print-bin-dir) mode=print ;;
  --force) mode=force ;;
  -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) die "unknown argument '$1' (try --help)" ;;
esac

export GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0
export GOFLAGS="-mod=readonly -buildvcs=false"

# The cache key: the recipe and every source file (go.mod, go.sum, *.go), by content.
key="$(cd "$HERE" && { echo "recipe=$RECIPE"; find . -name '*.go' -o -name 'go.mod' -o -name 'go.sum' \
  | LC_ALL=C sort | xargs sha256sum; } | sha256sum | cut -c1-16)"
ROOT="${ORCA_GITOPS_CACHE:-$HOME/.cache/orca-gitops}/$key"
BIN="$ROOT/bin"

is_complete() {
  local b
  for b in "${BINARIES[@]}"; do [[ -x $BIN/$b ]] || return 1; done
}

if [[ $mode == print ]]; then
  echo "$BIN"
  is_complete || exit 3
  exit 0
fi
if [[ $mode == build ]] && is_complete; then
  echo "$BIN"
  exit 0
fi

command -v go >/dev/null 2>&1 || die "Go toolchain not found in PATH (need go >= 1.26 to build the GitOps health clients)"
mkdir -p "$ROOT"
exec 9>"$ROOT/.lock"
if command -v flock >/dev/null 2>&1; then
  flock -n 9 || { say "another build holds $ROOT/.lock; waiting"; flock 9; }
  if [[ $mode == build ]] && is_complete; then echo "$BIN"; exit 0; fi
fi

start=$SECONDS
say "building ${BINARIES[*]} into $BIN ($(go version | cut -d' ' -f3))"
# Only the modules the two programs import (go mod download would fetch cli-utils' whole
# graph: kubectl, controller-runtime... five times the bytes).
if ! out="$(cd "$HERE" && go list -deps ./kstatus ./argohealth 2>&1 >/dev/null)"; then
  die "cannot fetch Go modules for hack/gitops: $(printf '%s\n' "$out" | grep -m1 -E 'error|go: |dial|verifying' || printf '%s\n' "$out" | tail -n1)"
fi
TMP="$ROOT/bin.tmp.$$"
rm -rf "$TMP"; mkdir -p "$TMP"
trap 'rm -rf "$TMP"' EXIT
if ! out="$(cd "$HERE" && go build -trimpath -ldflags '-s -w' -o "$TMP/" ./kstatus ./argohealth 2>&1)"; then
  die "go build in hack/gitops failed: $(printf '%s\n' "$out" | grep -m1 -v '^#' || echo "no output")"
fi
for b in "${BINARIES[@]}"; do [[ -x $TMP/$b ]] || die "go build did not produce $b"; done
old="$ROOT/bin.old.$$"
[[ -d $BIN ]] && mv "$BIN" "$old"
mv "$TMP" "$BIN"
rm -rf "$old"
say "built in $((SECONDS - start))s"
echo "$BIN"
