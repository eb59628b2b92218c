#!/usr/bin/env bash
# What the image build and the real Node of the dev cluster take from Debian (issue 30):
#   runc                          the OCI runtime containerd runs Pods with (built with seccomp)
#   containernetworking-plugins   the CNI bridge, host-local, loopback and portmap plugins
#   iptables                      kube-proxy's Service rules, the node's forward guard
#   skopeo, podman                the image tests load the built archive with them
# and Debian's package lists, which `make image` downloads its pinned .debs by.
# Installs what is missing when we are root (CI is); otherwise one line saying what to do.
set -euo pipefail
packages=(runc containernetworking-plugins iptables skopeo podman)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$p")
done
lists_empty() { ! compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null; }
if [[ ${#missing[@]} -eq 0 ]] && ! lists_empty; then
  exit 0
fi
if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
  echo "installing ${missing[*]:-nothing} (Debian packages) for the image and the real Node" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  if [[ ${#missing[@]} -gt 0 ]]; then
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  exit 0
fi
echo "error: the image build and the real Node need: apt-get update && apt-get install -y" \
  "${packages[*]} (as root, Debian/Ubuntu)" >&2
exit 1
