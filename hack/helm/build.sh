#!/usr/bin/env bash
# Helm, for the chart's tests (helm lint, helm template, helm install on the dev cluster) and
# `make release` (helm package): built from the Go module proxy at HELM_VERSION, in a writable
# copy of its module (its own go.sum pins every dependency), cached in
# ${ORCA_HELM_CACHE:-$HOME/.cache/orca-helm}/helm-<ver>/helm. The last stdout line is its path.
#
# Usage: hack/helm/build.sh [--print-path]
set -euo pipefail
HELM_VERSION=v3.22.0
RECIPE=2
die() { printf 'helm: error: %s\n' "$*" >&2; exit 1; }
CACHE="${ORCA_HELM_CACHE:-$HOME/.cache/orca-helm}"
ROOT="$CACHE/helm-$HELM_VERSION"
stamp="recipe=$RECIPE version=$HELM_VERSION"
complete() { [[ -x $ROOT/helm && "$(cat "$ROOT/stamp" 2>/dev/null)" == "$stamp" ]]; }
if [[ ${1-} == --print-path ]]; then echo "$ROOT/helm"; complete || exit 3; exit 0; fi
if complete; then echo "$ROOT/helm"; exit 0; fi
command -v go >/dev/null 2>&1 || die "Go toolchain not found in PATH (need go >= 1.26)"
export GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false"
mkdir -p "$ROOT"
exec 9>"$ROOT/.lock"
flock 9
if complete; then echo "$ROOT/helm"; exit 0; fi
src="$(cd /tmp && GOFLAGS=-mod=mod go mod download -json "helm.sh/helm/v3@$HELM_VERSION" \
  | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')" || true
[[ -d $src ]] || die "cannot fetch helm.sh/helm/v3@$HELM_VERSION from the module proxy"
tmp="$ROOT/src.tmp.$$"
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
cp -r "$src" "$tmp"; chmod -R u+w "$tmp"
start=$SECONDS
# The ldflags of helm's own Makefile: its version, and the Kubernetes version it assumes when no
# cluster is asked (helm template, helm lint) from the client-go it is built with (v0.N: 1.N).
kv="$(cd "$tmp" && go list -f '{{.Version}}' -m k8s.io/client-go)" || die "cannot read helm's client-go version"
kv="${kv#v0.}"; minor="${kv%%.*}"
ld="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
ld+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  ld+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$minor"
done
printf '[helm] go build helm.sh/helm/v3/cmd/helm %s\n' "$HELM_VERSION" >&2
(cd "$tmp" && go build -trimpath -ldflags "$ld" -o "$ROOT/helm.new" ./cmd/helm) \
  || die "go build of helm failed (see above)"
mv -f "$ROOT/helm.new" "$ROOT/helm"
"$ROOT/helm" version --short | grep -q "^$HELM_VERSION" || die "helm version does not report $HELM_VERSION"
echo "$stamp" >"$ROOT/stamp"
printf '[helm] built in %ss\n' "$((SECONDS - start))" >&2
echo "$ROOT/helm"
