#!/bin/bash
# The Kubernetes backend against the local one, side by side in one run, on
# the same machine and image (present on the node and in cove's store):
#
#   up        cove up to the IDE's first answer through the launcher (the
#             workspace started from nothing but its image; the Pod's
#             volume made afresh each round)
#   exec      cove exec NAME true, round trip
#   sync      a local save until a command in the workspace reads it, and
#             a file made in the workspace until it is here (local: the
#             project is bind-mounted, so there is nothing to carry)
#
# Usage: sudo scripts/bench/kube.sh   (starts the test cluster if needed:
#        scripts/kube/cluster.sh; the first run builds it, ~20 min)
#
# Environment: ROUNDS=3, EXECS=10, BENCH_OUT (default
# scripts/bench/results/kube-latest.md), CRANE.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
rounds=${ROUNDS:-3}
execs=${EXECS:-10}
out_md=${BENCH_OUT:-$here/results/kube-latest.md}

log() { printf 'kube.sh: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}
[ "$(id -u)" = 0 ] || die "must run as root (the test cluster)"
# shellcheck disable=SC1091 # scripts/bench/lib.sh, checked on its own
. "$here/lib.sh"
need curl curl
crane=$(find_crane) || exit 1
PATH=$PATH:$(dirname "$crane")
export PATH

tmp=$(mktemp -d /tmp/cove-bench-kube.XXXXXX)
cove=$tmp/cove
root=$tmp/root
started_registry=
cleanup() {
	pkill -INT -f "$cove up" 2>/dev/null || true
	sleep 1
	[ -z "$started_registry" ] || "$repo/scripts/registry.sh" stop >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
trap cleanup EXIT

if [ -z "${COVE_TEST_REGISTRY:-}" ]; then
	eval "$("$repo/scripts/registry.sh" start | sed 's/^/export /')"
	started_registry=1
fi
kc=$("$repo/scripts/kube/cluster.sh" up | sed -n 's/^KUBECONFIG=//p')
rev=$(build_cove "$repo" "$cove") || exit 1
busybox_layer "$tmp/rootfs" "$tmp/layer.tgz"
ref=$COVE_TEST_REGISTRY/bench/kube:1
push_layer "$crane" "$tmp/layer.tgz" "$ref"
COVE_ROOT=$root "$cove" pull "$ref" >/dev/null 2>&1

now() { date +%s.%N; }
ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", (b - a) * 1000 }'; }
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# up_once BACKEND DIR: starts cove up, prints the ms until /api/tree
# answers through it, leaves it running (its pid in $tmp/up.pid).
up_once() {
	local backend=$1 dir=$2 t0 url base token
	local args=(up --no-browser --grace 0 --image "$ref")
	[ "$backend" = kube ] && args+=(--kube --kubeconfig "$kc")
	t0=$(now)
	COVE_ROOT=$root "$cove" "${args[@]}" "$dir" >"$tmp/up.out" 2>"$tmp/up.err" &
	echo $! >"$tmp/up.pid"
	for _ in $(seq 600); do
		url=$(head -n 1 "$tmp/up.out")
		[ -n "$url" ] && break
		sleep 0.05
	done
	[ -n "$url" ] || die "$backend: cove up printed no URL: $(cat "$tmp/up.err")"
	base=${url%%/?token=*}
	token=${url##*token=}
	until curl -fsS -o /dev/null -H "X-Cove-Token: $token" "$base/api/tree"; do sleep 0.02; done
	ms "$t0" "$(now)"
}

# down BACKEND NAME: Ctrl-C to cove up, and the workspace removed.
down() {
	local pid
	pid=$(cat "$tmp/up.pid")
	kill -INT "$pid" 2>/dev/null || true
	while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
	if [ "$1" = kube ]; then
		COVE_ROOT=$root "$cove" rm -f --kube --kubeconfig "$kc" "$2" >/dev/null 2>&1 || true
	else
		COVE_ROOT=$root "$cove" rm -f "$2" >/dev/null 2>&1 || true
	fi
}

declare -A up_ms exec_ms to_ms from_ms
for backend in local kube; do
	ups=() ex=() tos=() froms=()
	for r in $(seq "$rounds"); do
		dir=$tmp/project-$backend-$r
		mkdir -p "$dir"
		echo 'int main(void) { return 0; }' >"$dir/main.c"
		ups+=("$(up_once "$backend" "$dir")")
		# The workspace's name as cove says it.
		name=$(COVE_ROOT=$root "$cove" ps 2>/dev/null | awk 'NR > 1 { print $1 }' | head -n 1)
		kargs=()
		if [ "$backend" = kube ]; then
			kargs=(--kube --kubeconfig "$kc")
			name=$(sed -n 's/^cove: starting \([^ ]*\) as a Pod.*/\1/p' "$tmp/up.err")
		fi
		t0=$(now)
		for _ in $(seq "$execs"); do COVE_ROOT=$root "$cove" exec "${kargs[@]}" "$name" true; done
		ex+=("$(awk -v a="$t0" -v b="$(now)" -v n="$execs" 'BEGIN { printf "%.0f", (b - a) * 1000 / n }')")
		# A save here until the workspace reads it.
		echo "saved $r" >"$dir/saved.txt"
		t0=$(now)
		until [ "$(COVE_ROOT=$root "$cove" exec "${kargs[@]}" "$name" cat /workspace/saved.txt 2>/dev/null)" = "saved $r" ]; do :; done
		tos+=("$(ms "$t0" "$(now)")")
		# A file made there until it is here (the make is one exec).
		t0=$(now)
		COVE_ROOT=$root "$cove" exec "${kargs[@]}" "$name" sh -c "echo made $r > /workspace/made.txt"
		until [ "$(cat "$dir/made.txt" 2>/dev/null)" = "made $r" ]; do sleep 0.01; done
		froms+=("$(ms "$t0" "$(now)")")
		down "$backend" "$name"
		log "$backend round $r: up ${ups[-1]} ms, exec ${ex[-1]} ms, save→there ${tos[-1]} ms, there→here ${froms[-1]} ms"
	done
	up_ms[$backend]=$(printf '%s\n' "${ups[@]}" | median)
	exec_ms[$backend]=$(printf '%s\n' "${ex[@]}" | median)
	to_ms[$backend]=$(printf '%s\n' "${tos[@]}" | median)
	from_ms[$backend]=$(printf '%s\n' "${froms[@]}" | median)
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.1f×", a / b; else print "-" }'; }
{
	echo "# cove up --kube against the local backend"
	echo
	echo "$(date -u +%Y-%m-%d), cove $rev, $(nproc) cores, load $(cut -d ' ' -f 1 /proc/loadavg); the test cluster"
	echo "(scripts/kube/cluster.sh: Kubernetes v1.34.4, Debian's containerd) on this machine; median of $rounds rounds;"
	echo "the sync columns include one cove exec (the reader, or the writer)."
	echo
	echo "| | local | kube | kube / local |"
	echo "|---|---:|---:|---:|"
	echo "| cove up → the IDE's first answer | ${up_ms[local]} ms | ${up_ms[kube]} ms | $(ratio "${up_ms[kube]}" "${up_ms[local]}") |"
	echo "| cove exec round trip | ${exec_ms[local]} ms | ${exec_ms[kube]} ms | $(ratio "${exec_ms[kube]}" "${exec_ms[local]}") |"
	echo "| a save here → read there | ${to_ms[local]} ms | ${to_ms[kube]} ms | $(ratio "${to_ms[kube]}" "${to_ms[local]}") |"
	echo "| made there → here | ${from_ms[local]} ms | ${from_ms[kube]} ms | $(ratio "${from_ms[kube]}" "${from_ms[local]}") |"
} | tee "$out_md"
