#!/usr/bin/env bash
# Build what a real Node of the dev cluster runs (`orca dev-cluster start --with-kubelet`), from
# the Go module proxy and Kubernetes' own source, cached like hack/testcp:
#
#   kubelet, kube-proxy   k8s.io/kubernetes at the control plane's version, from the build-only
#                         module hack/kubelet/node (go.mod + go.sum committed: -mod=readonly)
#   containerd, ctr,      github.com/containerd/containerd/v2 at CONTAINERD_VERSION, built in a
#   containerd-shim-runc-v2  writable copy of its module (its go.mod has exclude directives, so
#                         `go install pkg@version` refuses it; its own go.sum pins the rest)
#   pause                 build/pause/linux/pause.c from the k8s.io/kubernetes module, static
#
# runc and the CNI plugins come from Debian (hack/install-node-tools.sh): Debian's runc is built
# with seccomp, which the container runtime's default profile needs.
#
# Binaries land in ${ORCA_NODE_CACHE:-$HOME/.cache/orca-node}/k8s-<ver>-containerd-<ver>/bin/,
# with a stamp naming the versions and the dependency set; a run with everything present runs
# no `go` at all. The last stdout line is the bin dir.
#
# Usage: hack/kubelet/build.sh [--print-bin-dir | --force]
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
NODE_MOD="$HERE/node"
CONTAINERD_VERSION=v2.2.9
RECIPE=1

say() { printf '[node] %s\n' "$*" >&2; }
die() { printf 'node: error: %s\n' "$*" >&2; exit 1; }

mode=build
case "${1-}" in
  "") ;;
  --print-bin-dir) mode=print ;;
  --force) mode=force ;;
  -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) die "unknown argument '$1' (try --help)" ;;
esac

export GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0
export GOFLAGS="-mod=readonly -buildvcs=false"

KUBE_VERSION="$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" { print $3; exit } $1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }' "$NODE_MOD/go.mod")"
[[ -n $KUBE_VERSION ]] || die "cannot read the k8s.io/kubernetes version from hack/kubelet/node/go.mod"
CACHE="${ORCA_NODE_CACHE:-$HOME/.cache/orca-node}"
ROOT="$CACHE/k8s-$KUBE_VERSION-containerd-$CONTAINERD_VERSION"
BIN="$ROOT/bin"
FILES=(kubelet kube-proxy containerd containerd-shim-runc-v2 ctr pause)

expected_stamp() {
  printf 'recipe=%s\nkube=%s\ncontainerd=%s\n' "$RECIPE" "$KUBE_VERSION" "$CONTAINERD_VERSION"
  (cd "$HERE" && sha256sum node/go.mod node/go.sum)
}
complete() {
  local f
  [[ -f $ROOT/stamp && "$(cat "$ROOT/stamp")" == "$(expected_stamp)" ]] || return 1
  for f in "${FILES[@]}"; do [[ -x $BIN/$f ]] || return 1; done
}

if [[ $mode == print ]]; then
  echo "$BIN"
  complete || exit 3
  exit 0
fi
if [[ $mode == build ]] && complete; then
  say "up to date: kubelet $KUBE_VERSION, containerd $CONTAINERD_VERSION"
  echo "$BIN"
  exit 0
fi

command -v go >/dev/null 2>&1 || die "Go toolchain not found in PATH (need go >= 1.26)"
command -v cc >/dev/null 2>&1 || die "a C compiler (cc) is needed for the pause binary"
mkdir -p "$ROOT"
exec 9>"$ROOT/.lock"
flock 9
if [[ $mode == build ]] && complete; then echo "$BIN"; exit 0; fi

TMP="$ROOT/bin.tmp.$$"
rm -rf "$TMP"; mkdir -p "$TMP"
trap 'chmod -R u+w "$TMP" 2>/dev/null; rm -rf "$TMP"' EXIT

build_one() { # <dir> <ldflags> <tags> <name> <package>
  local start=$SECONDS
  say "go build $5"
  (cd "$1" && go build -trimpath -tags "$3" -ldflags "$2" -o "$TMP/$4" "$5") \
    || die "go build of $5 failed (see the output above)"
  say "  $4 built in $((SECONDS - start))s ($(du -h "$TMP/$4" | cut -f1))"
}

# kubelet and kube-proxy, stamped as hack/testcp stamps the control plane.
(cd "$NODE_MOD" && go mod download) || die "cannot fetch Go modules for hack/kubelet/node"
t="$(cd "$NODE_MOD" && go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes)"
minor="${KUBE_VERSION#v1.}"; minor="${minor%%.*}"
kube_ld="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kube_ld+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  kube_ld+=" -X $pkg.gitTreeState=archive -X $pkg.buildDate=$t -X $pkg.gitCommit="
done
build_one "$NODE_MOD" "$kube_ld" "" kubelet k8s.io/kubernetes/cmd/kubelet
build_one "$NODE_MOD" "$kube_ld" "" kube-proxy k8s.io/kubernetes/cmd/kube-proxy
v="$("$TMP/kubelet" --version 2>&1)"
[[ $v == "Kubernetes $KUBE_VERSION" ]] || die "kubelet --version reports '$v', not $KUBE_VERSION"

# containerd, in a writable copy of its module (the module cache is read-only).
src="$(cd /tmp && GOFLAGS=-mod=mod go mod download -json "github.com/containerd/containerd/v2@$CONTAINERD_VERSION" \
  | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')" || true
[[ -d $src ]] || die "cannot fetch github.com/containerd/containerd/v2@$CONTAINERD_VERSION from the module proxy"
cp -r "$src" "$TMP/containerd-src"
chmod -R u+w "$TMP/containerd-src"
ctr_ld="-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION"
ctr_ld+=" -X github.com/containerd/containerd/v2/version.Revision=module-proxy"
tags="no_btrfs no_devmapper no_zfs"
build_one "$TMP/containerd-src" "$ctr_ld" "$tags" containerd ./cmd/containerd
build_one "$TMP/containerd-src" "$ctr_ld" "$tags" containerd-shim-runc-v2 ./cmd/containerd-shim-runc-v2
build_one "$TMP/containerd-src" "$ctr_ld" "$tags" ctr ./cmd/ctr
rm -rf "$TMP/containerd-src"

# The pause binary of the sandbox image, from Kubernetes' own source.
kube_dir="$(cd "$NODE_MOD" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)"
pause_c="$kube_dir/build/pause/linux/pause.c"
[[ -f $pause_c ]] || die "k8s.io/kubernetes@$KUBE_VERSION has no build/pause/linux/pause.c"
pause_version="$(sed -n 's/^TAG ?= *//p' "$kube_dir/build/pause/Makefile" 2>/dev/null || true)"
cc -Os -Wall -Werror -static -DVERSION="${pause_version:-$KUBE_VERSION}" -o "$TMP/pause" "$pause_c" \
  || die "cc -static of pause.c failed (is libc6-dev installed?)"
strip "$TMP/pause" 2>/dev/null || true

rm -f "$ROOT/stamp"
mkdir -p "$BIN"
for f in "${FILES[@]}"; do mv -f "$TMP/$f" "$BIN/$f"; done
echo "${pause_version:-$KUBE_VERSION}" >"$BIN/pause.version"
expected_stamp >"$ROOT/stamp"
say "built kubelet $KUBE_VERSION, kube-proxy, containerd $CONTAINERD_VERSION, pause into $BIN"
echo "$BIN"
