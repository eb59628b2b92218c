#!/usr/bin/env bash
# Build the binaries of a living Kubernetes control plane from the Go module proxy, because
# prebuilt release downloads are unreachable from our machines: kube-apiserver, kubectl,
# kube-scheduler and etcd (the core), kube-controller-manager, and kwok (simulated kubelets:
# Node heartbeats through Leases, Ready conditions), plus the kwok Stages the dev cluster uses.
#
# The versions are pinned by the build-only Go modules next to this script:
#   hack/testcp/kube/go.mod  k8s.io/kubernetes + every staging module at its published v0.x.y
#   hack/testcp/kcm/go.mod   the same pins, for kube-controller-manager alone (its own module so
#                            that adding it left kube/go.sum, and caches stamped with it, alone)
#   hack/testcp/etcd/go.mod  go.etcd.io/etcd/server/v3 (own module: cannot move kube's deps)
#   hack/testcp/kwok/go.mod  sigs.k8s.io/kwok (own module: it pins its own k8s.io/* versions)
# Their go.sum files are committed, so a build is reproducible (-mod=readonly).
#
# Binaries land in a per-version cache outside the repository:
#   ${ORCA_TESTCP_CACHE:-$HOME/.cache/orca-testcp}/k8s-<ver>-etcd-<ver>/bin/
# Each group (core, kube-controller-manager, kwok) has its own stamp naming its versions and the
# exact dependency set (go.mod + go.sum): a run builds only the groups whose stamp is missing or
# stale, so adding a binary never rebuilds the others. A run with everything present only checks
# files and stamps (no `go` at all).
#
# Usage:
#   hack/testcp/build.sh                 build what is missing; last stdout line is the bin dir
#   hack/testcp/build.sh --print-bin-dir print the bin dir; exit 0 if all is built, 3 if not
#   hack/testcp/build.sh --force         rebuild every group even if the cache looks complete
#   KUBE_VERSION=v1.36.3 hack/testcp/build.sh --regen
#                                        rewrite kube/go.mod and kcm/go.mod from the tagged
#                                        upstream go.mod (its `=> ./staging/` lines) and re-tidy
#                                        every module (bump kwok by editing kwok/go.mod first)
#
# Progress goes to stderr; stdout carries only the bin dir, so `BIN=$(build.sh)` works.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
KUBE_MOD="$HERE/kube"
KCM_MOD="$HERE/kcm"
ETCD_MOD="$HERE/etcd"
KWOK_MOD="$HERE/kwok"
GROUPS_ALL=(core kcm kwok)
# Per group: bump when the way its binaries are built changes (flags, files), to invalidate
# the caches of that group only. core stays at 2: its stamp predates the other groups.
CORE_RECIPE=2
KCM_RECIPE=1
KWOK_RECIPE=1
# The kwok Stages the dev cluster runs, from kwok's own module (kwok refuses to start without
# Stages; the binary embeds none): initialise a Node (Ready, addresses, capacity), then refresh
# its status now and then while its Lease, renewed by kwok, is the heartbeat.
KWOK_STAGES=(
  kustomize/stage/node/fast/node-initialize.yaml
  kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml
)

say() { printf '[testcp] %s\n' "$*" >&2; }
die() { printf 'testcp: error: %s\n' "$*" >&2; exit 1; }

mode=build
case "${1-}" in
  "") ;;
  --print-bin-dir) mode=print ;;
  --force) mode=force ;;
  --regen) mode=regen ;;
  -h|--help) sed -n '2,33p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
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

# A build-only go.mod pinning k8s.io/kubernetes, with its staging modules replaced by their
# published releases (the upstream go.mod redirects them to ./staging/, which a module consumer
# cannot see).
write_kube_gomod() { # <upstream go.mod> <kube version> <module> <tool package>...
  local gomod="$1" kv="$2" module="$3" staging_v="v0.${2#v1.}" gover t
  shift 3
  gover="$(awk '$1 == "go" { print $2; exit }' "$gomod")"
  echo '// Build-only module: pins k8s.io/kubernetes and points every staging module at its'
  echo '// published release, because the upstream go.mod redirects them to ./staging/ (which'
  echo '// a module consumer cannot see). Regenerate with hack/testcp/build.sh --regen.'
  echo "module $module"
  echo
  echo "go $gover"
  echo
  grep -m1 '^godebug' "$gomod" && echo
  echo 'tool ('
  for t in "$@"; do printf '\t%s\n' "$t"; done
  echo ')'
  echo
  echo "require k8s.io/kubernetes $kv"
  echo
  echo 'replace ('
  grep '=> ./staging/' "$gomod" | awk -v v="$staging_v" '{ printf "\t%s => %s %s\n", $1, $1, v }'
  echo ')'
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
  write_kube_gomod "$gomod" "$kv" orca.local/hack/testcp/kube \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler \
    k8s.io/kubernetes/cmd/kubectl >"$KUBE_MOD/go.mod"
  write_kube_gomod "$gomod" "$kv" orca.local/hack/testcp/kcm \
    k8s.io/kubernetes/cmd/kube-controller-manager >"$KCM_MOD/go.mod"
  say "$(grep -c '=> ./staging/' "$gomod") staging modules replaced by their $staging_v releases"
  rm -f "$KUBE_MOD/go.sum" "$KCM_MOD/go.sum"
  for d in "$KUBE_MOD" "$KCM_MOD" "$ETCD_MOD" "$KWOK_MOD"; do
    say "go mod tidy in ${d#"$HERE"/}"
    (cd "$d" && GOFLAGS=-mod=mod go mod tidy) || die "go mod tidy failed in ${d#"$HERE"/}"
  done
  say "done; review and commit hack/testcp/*/go.mod and go.sum"
  exit 0
fi

KUBE_VERSION="$(mod_version "$KUBE_MOD/go.mod" k8s.io/kubernetes)"
KCM_KUBE_VERSION="$(mod_version "$KCM_MOD/go.mod" k8s.io/kubernetes)"
ETCD_VERSION="$(mod_version "$ETCD_MOD/go.mod" go.etcd.io/etcd/server/v3)"
KWOK_VERSION="$(mod_version "$KWOK_MOD/go.mod" sigs.k8s.io/kwok)"
[[ -n $KUBE_VERSION && -n $ETCD_VERSION && -n $KWOK_VERSION ]] \
  || die "cannot read pinned versions from hack/testcp/{kube,etcd,kwok}/go.mod"
[[ $KCM_KUBE_VERSION == "$KUBE_VERSION" ]] \
  || die "kcm/go.mod pins k8s.io/kubernetes ${KCM_KUBE_VERSION:-nothing}, kube/go.mod $KUBE_VERSION: run --regen"

CACHE="${ORCA_TESTCP_CACHE:-$HOME/.cache/orca-testcp}"
ROOT="$CACHE/k8s-$KUBE_VERSION-etcd-$ETCD_VERSION"
BIN="$ROOT/bin"

# What each group puts in BIN (executables, and files), and the stamp that vouches for them.
group_files() {
  case "$1" in
    core) echo kube-apiserver kubectl kube-scheduler etcd ;;
    kcm) echo kube-controller-manager ;;
    kwok) echo kwok kwok-stages.yaml ;;
  esac
}
group_stamp() {
  case "$1" in
    core) echo "$ROOT/stamp" ;;  # the name and content predate the other groups: keep them
    *) echo "$ROOT/stamp-$1" ;;
  esac
}
# The stamp names the versions and the exact dependency set; a changed go.sum means rebuild.
expected_stamp() {
  case "$1" in
    core)
      printf 'recipe=%s\nkube=%s\netcd=%s\n' "$CORE_RECIPE" "$KUBE_VERSION" "$ETCD_VERSION"
      (cd "$HERE" && sha256sum kube/go.mod kube/go.sum etcd/go.mod etcd/go.sum) ;;
    kcm)
      printf 'recipe=%s\nkube=%s\n' "$KCM_RECIPE" "$KUBE_VERSION"
      (cd "$HERE" && sha256sum kcm/go.mod kcm/go.sum) ;;
    kwok)
      printf 'recipe=%s\nkwok=%s\nstages=%s\n' "$KWOK_RECIPE" "$KWOK_VERSION" "${KWOK_STAGES[*]}"
      (cd "$HERE" && sha256sum kwok/go.mod kwok/go.sum) ;;
  esac
}

group_complete() { # <group>
  local stamp f
  stamp="$(group_stamp "$1")"
  [[ -f $stamp ]] || return 1
  for f in $(group_files "$1"); do
    case "$f" in
      *.yaml) [[ -f $BIN/$f ]] || return 1 ;;
      *) [[ -x $BIN/$f ]] || return 1 ;;
    esac
  done
  [[ "$(cat "$stamp")" == "$(expected_stamp "$1")" ]]
}

missing_groups() { # prints the groups to build (all of them with --force)
  local g
  for g in "${GROUPS_ALL[@]}"; do
    if [[ $mode == force ]] || ! group_complete "$g"; then echo "$g"; fi
  done
}

if [[ $mode == print ]]; then
  echo "$BIN"
  [[ -z "$(missing_groups)" ]] || exit 3
  exit 0
fi

todo="$(missing_groups)"
if [[ -z $todo ]]; then
  say "up to date: kubernetes $KUBE_VERSION, etcd $ETCD_VERSION, kwok $KWOK_VERSION"
  echo "$BIN"
  exit 0
fi

need_go
mkdir -p "$ROOT"
# Serialise concurrent builds (two pytest sessions, CI and a developer) on one cache dir.
exec 9>"$ROOT/.lock"
if command -v flock >/dev/null 2>&1; then
  flock -n 9 || { say "another build holds $ROOT/.lock; waiting"; flock 9; }
  todo="$(missing_groups)"
  if [[ -z $todo ]]; then
    say "built by a concurrent run: kubernetes $KUBE_VERSION, etcd $ETCD_VERSION, kwok $KWOK_VERSION"
    echo "$BIN"
    exit 0
  fi
fi

say "building $(echo $todo) into $BIN"
say "$(go version); GOMODCACHE=$(go env GOMODCACHE)"
say "a cold build takes tens of minutes on 2 cores; later runs reuse $BIN"

# Version stamps: without them /version reports v0.0.0-master. The build date is the tag's
# commit time from the proxy, so two builds of the same version produce the same bytes.
# The module zip does not carry the upstream commit hash: gitCommit is left empty rather
# than the unexpanded "$Format:%H$" placeholder.
kube_ldflags() { # <module dir>
  local t minor ld pkg
  t="$(cd "$1" && go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes 2>/dev/null || true)"
  [[ -n $t ]] || t="1970-01-01T00:00:00Z"
  minor="${KUBE_VERSION#v1.}"; minor="${minor%%.*}"
  ld="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ld+=" -X $pkg.gitTreeState=archive -X $pkg.buildDate=$t -X $pkg.gitCommit="
  done
  echo "$ld"
}

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

# Check the stamps really took before declaring a group complete. Capture first: with
# pipefail, `cmd | grep -q` fails when grep exits early and cmd gets SIGPIPE.
check_kube_version() { # <binary name>
  local v
  v="$("$TMP/$1" --version 2>&1)" || die "$1 --version failed: $v"
  [[ $v == "Kubernetes $KUBE_VERSION" ]] || die "$1 --version reports '$v', not $KUBE_VERSION"
}

build_group() { # <group>
  local v
  case "$1" in
    core)
      fetch_modules "$KUBE_MOD"
      fetch_modules "$ETCD_MOD"
      local kube_ld etcd_ld
      kube_ld="$(kube_ldflags "$KUBE_MOD")"
      etcd_ld="-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=module-proxy-$ETCD_VERSION"
      build_one "$KUBE_MOD" "$kube_ld" kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
      build_one "$KUBE_MOD" "$kube_ld" kubectl k8s.io/kubernetes/cmd/kubectl
      build_one "$KUBE_MOD" "$kube_ld" kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler
      build_one "$ETCD_MOD" "$etcd_ld" etcd go.etcd.io/etcd/server/v3
      check_kube_version kube-apiserver
      v="$("$TMP/kubectl" version --client 2>&1)" || die "kubectl version --client failed: $v"
      grep -q "^Client Version: $KUBE_VERSION\$" <<<"$v" || die "kubectl version --client does not report $KUBE_VERSION: $v"
      v="$("$TMP/etcd" --version 2>&1)" || die "etcd --version failed: $v"
      grep -q "^etcd Version: ${ETCD_VERSION#v}\$" <<<"$v" || die "etcd --version does not report $ETCD_VERSION: $v"
      ;;
    kcm)
      fetch_modules "$KCM_MOD"
      build_one "$KCM_MOD" "$(kube_ldflags "$KCM_MOD")" kube-controller-manager \
        k8s.io/kubernetes/cmd/kube-controller-manager
      check_kube_version kube-controller-manager
      ;;
    kwok)
      fetch_modules "$KWOK_MOD"
      build_one "$KWOK_MOD" "-s -w" kwok sigs.k8s.io/kwok/cmd/kwok
      v="$("$TMP/kwok" --version 2>&1)" || die "kwok --version failed: $v"
      grep -q "${KWOK_VERSION#v}" <<<"$v" || die "kwok --version does not report $KWOK_VERSION: $v"
      local dir f
      dir="$(cd "$KWOK_MOD" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)" \
        || die "cannot locate sigs.k8s.io/kwok@$KWOK_VERSION in the module cache"
      {
        echo "# kwok Stages for orca's dev cluster, written by hack/testcp/build.sh from"
        echo "# sigs.k8s.io/kwok@$KWOK_VERSION (Apache-2.0); kwok reads them with --config."
        for f in "${KWOK_STAGES[@]}"; do
          [[ -f $dir/$f ]] || die "sigs.k8s.io/kwok@$KWOK_VERSION has no $f"
          printf -- '---\n# %s\n' "$f"
          cat "$dir/$f"
        done
      } >"$TMP/kwok-stages.yaml"
      ;;
  esac
}

# Install by renames, file by file, so a concurrently starting test never finds a binary
# missing (running servers keep their already-open executables either way) and the other
# groups' files stay where they are. The stamp goes first and comes back last: its presence
# means the group is complete.
install_group() { # <group>
  local stamp f
  stamp="$(group_stamp "$1")"
  rm -f "$stamp"
  mkdir -p "$BIN"
  for f in $(group_files "$1"); do mv -f "$TMP/$f" "$BIN/$f"; done
  expected_stamp "$1" >"$stamp"
}

total_start=$SECONDS
for g in $todo; do
  build_group "$g"
  install_group "$g"
done
say "built in $((SECONDS - total_start))s: $(du -sh "$BIN" | cut -f1) in $BIN"
echo "$BIN"
