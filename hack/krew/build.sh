#!/usr/bin/env bash
# krew, to prove that the plugin manifest `make release` writes installs as users install it
# (`kubectl krew install --manifest=... --archive=...`, tests/packaging/test_kubectl_plugin.py):
# built from the Go module proxy at KREW_VERSION (the newest the proxy serves), in a writable
# copy of its module (its own go.sum pins every dependency), cached in
# ${ORCA_KREW_CACHE:-$HOME/.cache/orca-krew}/krew-<ver>/kubectl-krew (the name kubectl finds a
# plugin by). The last stdout line is its path.
#
# Usage: hack/krew/build.sh [--print-path]
set -euo pipefail
KREW_VERSION=v0.4.4
RECIPE=1
die() { printf 'krew: error: %s\n' "$*" >&2; exit 1; }
CACHE="${ORCA_KREW_CACHE:-$HOME/.cache/orca-krew}"
ROOT="$CACHE/krew-$KREW_VERSION"
stamp="recipe=$RECIPE version=$KREW_VERSION"
complete() { [[ -x $ROOT/kubectl-krew && "$(cat "$ROOT/stamp" 2>/dev/null)" == "$stamp" ]]; }
if [[ ${1-} == --print-path ]]; then echo "$ROOT/kubectl-krew"; complete || exit 3; exit 0; fi
if complete; then echo "$ROOT/kubectl-krew"; exit 0; fi
command -v go >/dev/null 2>&1 || die "Go toolchain not found in PATH"
export GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false"
mkdir -p "$ROOT"
exec 9>"$ROOT/.lock"
flock 9
if complete; then echo "$ROOT/kubectl-krew"; exit 0; fi
src="$(cd /tmp && GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/krew@$KREW_VERSION" \
  | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')" || true
[[ -d $src ]] || die "cannot fetch sigs.k8s.io/krew@$KREW_VERSION from the module proxy"
tmp="$ROOT/src.tmp.$$"
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
cp -r "$src" "$tmp"; chmod -R u+w "$tmp"
start=$SECONDS
ld="-s -w -X sigs.k8s.io/krew/internal/version.gitTag=$KREW_VERSION"
printf '[krew] go build sigs.k8s.io/krew/cmd/krew %s\n' "$KREW_VERSION" >&2
(cd "$tmp" && go build -trimpath -ldflags "$ld" -o "$ROOT/kubectl-krew.new" ./cmd/krew) \
  || die "go build of krew failed (see above)"
mv -f "$ROOT/kubectl-krew.new" "$ROOT/kubectl-krew"
echo "$stamp" >"$ROOT/stamp"
printf '[krew] built in %ss\n' "$((SECONDS - start))" >&2
echo "$ROOT/kubectl-krew"
