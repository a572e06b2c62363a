#!/usr/bin/env bash
# Builds the Kubernetes binaries the cluster tests run (kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet; not kubectl: cluster.sh
# asks the API server with curl) from
# k8s.io/kubernetes through the Go module proxy, and installs what they
# need from Debian. The binaries are cached by version under
# $COVE_KUBE_CACHE (default /var/cache/cove-test/kube): a cold build takes
# about 20 minutes on 2 cores, a cached one nothing.
#
# k8s.io/kubernetes replaces its staging modules (k8s.io/api, …) with
# ./staging paths, so `go install …@version` is refused; a small wrapper
# module requires it and points each staging module at its published
# v0.X.Y instead.
#
# COVE_KUBE_BINARIES_ONLY=1 builds the binaries and installs nothing
# (scripts/test.sh builds them while its own apt-get runs); with --check
# it only says whether they are built (exit 0) or not (1).
set -euo pipefail

version=${COVE_KUBE_VERSION:-v1.34.4}
cache=${COVE_KUBE_CACHE:-/var/cache/cove-test/kube}
bin=$cache/$version/bin
cmds=(kube-apiserver kube-controller-manager kube-scheduler kubelet)

done_all=1
for c in "${cmds[@]}"; do [ -x "$bin/$c" ] || done_all=0; done
if [ "${1:-}" = --check ]; then
	[ "$done_all" = 1 ]
	exit
fi

if [ "$(id -u)" = 0 ] && [ "${COVE_KUBE_BINARIES_ONLY:-}" != 1 ]; then
	need=()
	for p in containerd runc containernetworking-plugins etcd-server conntrack socat ebtables ethtool openssl iptables curl; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || need+=("$p")
	done
	if [ ${#need[@]} -gt 0 ]; then
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
		# Debian starts the services it installs; the cluster runs its own.
		systemctl disable --now containerd etcd 2>/dev/null || true
	fi
fi

if [ "$done_all" = 1 ]; then
	echo "$bin"
	exit 0
fi

src=$cache/$version/src
mkdir -p "$src" "$bin"
cd "$src"
mod=$(go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
[ -f "$mod" ] || {
	echo "kube/build.sh: the module proxy gave no go.mod for k8s.io/kubernetes@$version" >&2
	exit 1
}
staging=v0.${version#v1.}
{
	echo "module cove.test/kube"
	echo
	grep -E '^(go|godebug) ' "$mod"
	echo
	echo "require k8s.io/kubernetes $version"
	echo
	# Every staging module k8s.io/kubernetes requires at v0.0.0.
	awk '$2 == "v0.0.0" { print "replace " $1 " => " $1 " '"$staging"'" }' "$mod"
} >go.mod
{
	echo "//go:build tools"
	echo
	echo "// Package tools names the commands this module builds."
	echo "package tools"
	echo
	echo "import ("
	for c in "${cmds[@]}"; do echo "	_ \"k8s.io/kubernetes/cmd/$c\""; done
	echo ")"
} >tools.go
go mod tidy >/dev/null 2>&1 || go mod tidy
args=()
for c in "${cmds[@]}"; do args+=("k8s.io/kubernetes/cmd/$c"); done
CGO_ENABLED=0 nice -n 10 go build -trimpath -ldflags=-s -o "$bin/" "${args[@]}"
echo "$bin"
