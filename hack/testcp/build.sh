#!/usr/bin/env bash
# Build a real Kubernetes control plane (kube-apiserver, kubectl, kube-scheduler, etcd) from
# the Go module proxy, because prebuilt release downloads are unreachable from our machines.
#
# The versions are pinned by the two build-only Go modules next to this script:
#   hack/testcp/kube/go.mod  k8s.io/kubernetes + every staging module at its published v0.x.y
#   hack/testcp/etcd/go.mod  go.etcd.io/etcd/server/v3 (own module: cannot move kube's deps)
# Their go.sum files are committed, so a build is reproducible (-mod=readonly).
#
# Binaries land in a per-version cache outside the repository:
#   ${ORCA_TESTCP_CACHE:-$HOME/.cache/orca-testcp}/k8s-<ver>-etcd-<ver>/bin/
# A second run with the binaries present only checks files and a stamp (no `go` at all).
#
# Usage:
#   hack/testcp/build.sh                 build if needed; last stdout line is the bin dir
#   hack/testcp/build.sh --print-bin-dir print the bin dir; exit 0 if built, 3 if not
#   hack/testcp/build.sh --force         rebuild even if the cache looks complete
#   KUBE_VERSION=v1.36.3 hack/testcp/build.sh --regen
#                                        rewrite kube/go.mod from the tagged upstream go.mod
#                                        (its `=> ./staging/` lines) and re-tidy both modules
#
# Progress goes to stderr; stdout carries only the bin dir, so `BIN=$(build.sh)` works.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
KUBE_MOD="$HERE/kube"
ETCD_MOD="$HERE/etcd"
BINARIES=(kube-apiserver kubectl kube-scheduler etcd)
# Bump when the way binaries are built changes (flags, stamps), to invalidate old caches.
RECIPE=2

say() { printf '[testcp] %s\n' "$*" >&2; }
die() { printf 'testcp: error: %s\n' "$*" >&2; exit 1; }

mode=build
case "${1-}" in
  "") ;;
  --print-bin-dir) mode=print ;;
  --force) mode=force ;;
  --regen) mode=regen ;;
  -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) die "unknown argument '$1' (try --help)" ;;
esac

# Versions come from the committed go.mod files: they are the single source of truth.
mod_version() { # <go.mod> <module path>
  awk -v m="$2" '$1 == m && $2 ~ /^v/ { print $2; exit } $1 == "require" && $2 == m { print $3; exit }' "$1"
}

export GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0
export GOFLAGS="-mod=readonly -buildvcs=false"

need_go() {
  command -v go >/dev/null 2>&1 || die "Go toolchain not found in PATH (need go >= 1.26 to build the test control plane)"
  local v
  v="$(go env GOVERSION 2>/dev/null)" || die "'go env' failed; is the Go installation broken?"
  case "$v" in
    go1.2[6-9]*|go1.[3-9][0-9]*|go[2-9]*) ;;
    *) die "Go $v is too old (need go >= 1.26; GOTOOLCHAIN=local forbids auto-download)" ;;
  esac
}

# go mod download, collapsing the (often long) failure into one clear line.
fetch_modules() { # <module dir>
  local dir="$1" out
  if ! out="$(cd "$dir" && go mod download 2>&1)"; then
    die "cannot fetch Go modules for ${dir#"$HERE"/}: $(printf '%s\n' "$out" | grep -m1 -E 'error|go: |reading|dial|verifying' || printf '%s\n' "$out" | tail -n1)"
  fi
}

if [[ $mode == regen ]]; then
  need_go
  kv="${KUBE_VERSION:?set KUBE_VERSION, e.g. KUBE_VERSION=v1.36.3}"
  staging_v="v0.${kv#v1.}"
  say "fetching the tagged go.mod of k8s.io/kubernetes@$kv"
  gomod="$(cd /tmp && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$kv" \
    | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')" \
    || die "cannot fetch k8s.io/kubernetes@$kv from the module proxy"
  [[ -f $gomod ]] || die "cannot fetch k8s.io/kubernetes@$kv from the module proxy"
  gover="$(awk '$1 == "go" { print $2; exit }' "$gomod")"
  {
    echo '// Build-only module: pins k8s.io/kubernetes and points every staging module at its'
    echo '// published release, because the upstream go.mod redirects them to ./staging/ (which'
    echo '// a module consumer cannot see). Regenerate with hack/testcp/build.sh --regen.'
    echo 'module orca.local/hack/testcp/kube'
    echo
    echo "go $gover"
    echo
    grep -m1 '^godebug' "$gomod" && echo
    echo 'tool ('
    echo '	k8s.io/kubernetes/cmd/kube-apiserver'
    echo '	k8s.io/kubernetes/cmd/kube-scheduler'
    echo '	k8s.io/kubernetes/cmd/kubectl'
    echo ')'
    echo
    echo "require k8s.io/kubernetes $kv"
    echo
    echo 'replace ('
    grep '=> ./staging/' "$gomod" | awk -v v="$staging_v" '{ printf "\t%s => %s %s\n", $1, $1, v }'
    echo ')'
  } >"$KUBE_MOD/go.mod"
  say "$(grep -c '=> ./staging/' "$gomod") staging modules replaced by their $staging_v releases"
  rm -f "$KUBE_MOD/go.sum"
  for d in "$KUBE_MOD" "$ETCD_MOD"; do
    say "go mod tidy in ${d#"$HERE"/}"
    (cd "$d" && GOFLAGS=-mod=mod go mod tidy) || die "go mod tidy failed in ${d#"$HERE"/}"
  done
  say "done; review and commit hack/testcp/*/go.mod and go.sum"
  exit 0
fi

KUBE_VERSION="$(mod_version "$KUBE_MOD/go.mod" k8s.io/kubernetes)"
ETCD_VERSION="$(mod_version "$ETCD_MOD/go.mod" go.etcd.io/etcd/server/v3)"
[[ -n $KUBE_VERSION && -n $ETCD_VERSION ]] || die "cannot read pinned versions from $KUBE_MOD/go.mod / $ETCD_MOD/go.mod"

CACHE="${ORCA_TESTCP_CACHE:-$HOME/.cache/orca-testcp}"
ROOT="$CACHE/k8s-$KUBE_VERSION-etcd-$ETCD_VERSION"
BIN="$ROOT/bin"
STAMP="$ROOT/stamp"

# The stamp names the versions and the exact dependency set; a changed go.sum means rebuild.
expected_stamp() {
  printf 'recipe=%s\nkube=%s\netcd=%s\n' "$RECIPE" "$KUBE_VERSION" "$ETCD_VERSION"
  (cd "$HERE" && sha256sum kube/go.mod kube/go.sum etcd/go.mod etcd/go.sum)
}

is_complete() {
  [[ -f $STAMP ]] || return 1
  local b
  for b in "${BINARIES[@]}"; do [[ -x $BIN/$b ]] || return 1; done
  [[ "$(cat "$STAMP")" == "$(expected_stamp)" ]]
}

if [[ $mode == print ]]; then
  echo "$BIN"
  is_complete || exit 3
  exit 0
fi

if [[ $mode == build ]] && is_complete; then
  say "up to date: kubernetes $KUBE_VERSION, etcd $ETCD_VERSION"
  echo "$BIN"
  exit 0
fi

need_go
mkdir -p "$ROOT"
# Serialise concurrent builds (two pytest sessions, CI and a developer) on one cache dir.
exec 9>"$ROOT/.lock"
if command -v flock >/dev/null 2>&1; then
  flock -n 9 || { say "another build holds $ROOT/.lock; waiting"; flock 9; }
  if [[ $mode == build ]] && is_complete; then
    say "built by a concurrent run: kubernetes $KUBE_VERSION, etcd $ETCD_VERSION"
    echo "$BIN"
    exit 0
  fi
fi

say "building kubernetes $KUBE_VERSION and etcd $ETCD_VERSION into $BIN"
say "$(go version); GOMODCACHE=$(go env GOMODCACHE)"
say "a cold build takes tens of minutes on 2 cores; later runs reuse $BIN"

say "fetching modules (GOPROXY=$(go env GOPROXY))"
fetch_modules "$KUBE_MOD"
fetch_modules "$ETCD_MOD"

# Version stamps: without them /version reports v0.0.0-master. The build date is the tag's
# commit time from the proxy, so two builds of the same version produce the same bytes.
# The module zip does not carry the upstream commit hash: gitCommit is left empty rather
# than the unexpanded "$Format:%H$" placeholder.
kube_time="$(cd "$KUBE_MOD" && go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes 2>/dev/null || true)"
[[ -n $kube_time ]] || kube_time="1970-01-01T00:00:00Z"
minor="${KUBE_VERSION#v1.}"; minor="${minor%%.*}"
kube_ld="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kube_ld+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  kube_ld+=" -X $pkg.gitTreeState=archive -X $pkg.buildDate=$kube_time -X $pkg.gitCommit="
done
etcd_ld="-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=module-proxy-$ETCD_VERSION"

TMP="$ROOT/bin.tmp.$$"
rm -rf "$TMP"; mkdir -p "$TMP"
trap 'rm -rf "$TMP"' EXIT

# Sequential on purpose: each `go build` already uses every core, and running them in
# parallel only raises peak memory (kube-apiserver's link step alone takes ~2 GB).
build_one() { # <module dir> <ldflags> <name> <package>
  local start=$SECONDS
  say "go build $4"
  (cd "$1" && go build -trimpath -ldflags "$2" -o "$TMP/$3" "$4") \
    || die "go build of $4 failed (see the output above)"
  say "  $3 built in $((SECONDS - start))s ($(du -h "$TMP/$3" | cut -f1))"
}
total_start=$SECONDS
build_one "$KUBE_MOD" "$kube_ld" kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
build_one "$KUBE_MOD" "$kube_ld" kubectl k8s.io/kubernetes/cmd/kubectl
build_one "$KUBE_MOD" "$kube_ld" kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler
build_one "$ETCD_MOD" "$etcd_ld" etcd go.etcd.io/etcd/server/v3

# Check the stamps really took before declaring the cache complete. Capture first: with
# pipefail, `cmd | grep -q` fails when grep exits early and cmd gets SIGPIPE.
v="$("$TMP/kube-apiserver" --version 2>&1)" || die "kube-apiserver --version failed: $v"
[[ $v == "Kubernetes $KUBE_VERSION" ]] || die "kube-apiserver --version reports '$v', not $KUBE_VERSION"
v="$("$TMP/kubectl" version --client 2>&1)" || die "kubectl version --client failed: $v"
grep -q "^Client Version: $KUBE_VERSION\$" <<<"$v" || die "kubectl version --client does not report $KUBE_VERSION: $v"
v="$("$TMP/etcd" --version 2>&1)" || die "etcd --version failed: $v"
grep -q "^etcd Version: ${ETCD_VERSION#v}\$" <<<"$v" || die "etcd --version does not report $ETCD_VERSION: $v"

# Swap by renames so a concurrently starting test never finds the directory missing
# (running servers keep their already-open executables either way).
old="$ROOT/bin.old.$$"
[[ -d $BIN ]] && mv "$BIN" "$old"
mv "$TMP" "$BIN"
rm -rf "$old"
expected_stamp >"$STAMP"   # written last: its presence means the bin dir is complete
say "built in $((SECONDS - total_start))s: $(du -sh "$BIN" | cut -f1) in $BIN"
echo "$BIN"
