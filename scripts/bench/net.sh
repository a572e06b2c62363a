#!/bin/bash
# Network throughput and latency of cove's default network (its own
# namespace through pasta) against --net host and podman's default rootless
# network (slirp4netns in podman 4.3), in one run on this machine:
#   - bulk: a container downloads SIZE bytes from a server in another
#     network namespace (the "internet", reached through the host);
#   - latency: PINGS requests, each on a new connection, from the host to a
#     server in a container through its forwarded port (-p; with --net host
#     the server listens on the host's network itself).
# Everything runs inside a network namespace made for the run (standing in
# for the host) and one joined to it by a veth pair (the internet), with
# addresses in 198.18.0.0/15 that exist only there.
#
# Usage: sudo scripts/bench/net.sh        (root: namespaces; podman and the
#                                         rootless cove rows run as covetest)
#
# Environment:
#   SIZE=1073741824     bytes per download
#   RUNS=3              downloads per row (the median is reported)
#   PINGS=1000          requests per latency row
#   START_RUNS=10       cove run --rm true per network mode, for start time
#   BENCH_OUT           results file (default scripts/bench/results/net-latest.md)
#
# The markdown report goes to stdout and to BENCH_OUT; progress to stderr.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
size=${SIZE:-1073741824}
runs=${RUNS:-3}
pings=${PINGS:-1000}
start_runs=${START_RUNS:-10}
out_md=${BENCH_OUT:-$here/results/net-latest.md}
user=covetest

log() { printf 'net.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

for v in "$size" "$runs" "$pings" "$start_runs"; do
	case $v in '' | *[!0-9]* | 0) die "SIZE, RUNS, PINGS and START_RUNS must be positive integers" ;; esac
done
[ "$(id -u)" = 0 ] || die "must run as root (network namespaces)"

# shellcheck disable=SC1091 # scripts/bench/lib.sh, checked on its own
. "$here/lib.sh"
need pasta passt
need slirp4netns slirp4netns
need podman podman
need runc runc
need ip iproute2
need runuser util-linux
[ -x /bin/busybox ] || { apt-get install -y -q busybox-static >&2 || die "apt-get install busybox-static failed"; }
need go "golang (or a Go toolchain in PATH) to build cove"
id "$user" >/dev/null 2>&1 || useradd -m "$user"
uid=$(id -u "$user")

tmp=$(mktemp -d /tmp/cove-bench-net.XXXXXX)
chmod 755 "$tmp"
n=$$
host_ns=covbh$n
inet_ns=covbi$n
runtime_dir=/run/user/$uid

cleanup() {
	local ns p
	for ns in "$host_ns" "$inet_ns"; do
		for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
		ip netns del "$ns" 2>/dev/null || true
	done
	rm -rf "/etc/netns/$host_ns"
	unmount_under "$tmp"
	rm -rf "$tmp"
}
trap cleanup EXIT

cove=$tmp/cove
cove_rev=$(build_cove "$repo" "$cove") || exit 1
log "building netbench"
(cd "$repo" && CGO_ENABLED=0 go build -o "$tmp/netbench" ./scripts/bench/netbench) >&2 || die "go build ./scripts/bench/netbench failed"

log "making the host ($host_ns) and the internet ($inet_ns)"
ip netns add "$host_ns"
ip netns add "$inet_ns"
ip link add "cbh$n" netns "$host_ns" type veth peer name "cbi$n" netns "$inet_ns"
ip -n "$host_ns" link set lo up
ip -n "$host_ns" addr add 198.18.0.1/24 dev "cbh$n"
ip -n "$host_ns" link set "cbh$n" up
ip -n "$host_ns" route add default via 198.18.0.2
ip -n "$inet_ns" link set lo up
ip -n "$inet_ns" addr add 198.18.0.2/24 dev "cbi$n"
ip -n "$inet_ns" link set "cbi$n" up
ip -n "$inet_ns" addr add 198.18.9.9/32 dev lo
ip -n "$inet_ns" route add default via 198.18.0.1
# No resolver is asked; the file keeps the host's own out of the run.
mkdir -p "/etc/netns/$host_ns"
echo "nameserver 198.18.9.9" >"/etc/netns/$host_ns/resolv.conf"
ip netns exec "$inet_ns" "$tmp/netbench" bulk 198.18.9.9:9000 "$size" &
disown # killed with the namespace at the end

# in_host WHO CMD...: CMD in the host namespace, as WHO (root or the user).
in_host() {
	local who=$1
	shift
	if [ "$who" = "$user" ]; then
		ip netns exec "$host_ns" runuser -u "$user" -- env XDG_RUNTIME_DIR="$runtime_dir" HOME="$(getent passwd "$user" | cut -d: -f6)" "$@"
	else
		ip netns exec "$host_ns" "$@"
	fi
}

log "building the busybox image"
mkdir -p "$tmp/rootfs/bin" "$tmp/rootfs/tmp" "$tmp/rootfs/etc" "$tmp/rootfs/nb"
cp /bin/busybox "$tmp/rootfs/bin/busybox"
ln -s busybox "$tmp/rootfs/bin/sh"
echo 'root:x:0:0:root:/root:/bin/sh' >"$tmp/rootfs/etc/passwd"
echo 'root:x:0:' >"$tmp/rootfs/etc/group"
tar -C "$tmp/rootfs" --numeric-owner --owner=0 --group=0 -cf "$tmp/rootfs.tar" .
mkdir -p "$runtime_dir" && chown "$user:" "$runtime_dir" && chmod 700 "$runtime_dir"
podman_root=$tmp/podman
mkdir -p "$podman_root" && chown "$user:" "$podman_root"
podman=(podman --runtime runc --root "$podman_root/root" --runroot "$podman_root/run")
in_host "$user" "${podman[@]}" import "$tmp/rootfs.tar" bench/netbb >/dev/null
in_host "$user" "${podman[@]}" save -o "$podman_root/image.tar" bench/netbb >/dev/null 2>&1 || die "podman save failed"
chmod 644 "$podman_root/image.tar"
image=docker-archive:$podman_root/image.tar
mkdir -p "$tmp/cove-root" "$tmp/cove-user"
chown "$user:" "$tmp/cove-user"

# cove_as WHO ARGS...: cove with its own state for root or the user.
cove_as() {
	local who=$1
	shift
	if [ "$who" = "$user" ]; then
		in_host "$user" env COVE_ROOT="$tmp/cove-user" "$cove" "$@"
	else
		in_host root env COVE_ROOT="$tmp/cove-root" "$cove" "$@"
	fi
}
cove_as root pull -q "$image" >/dev/null || die "cove pull $image failed (root)"
cove_as "$user" pull -q "$image" >/dev/null || die "cove pull $image failed ($user)"

# The rows: a label and the command that runs ARGS in a container.
labels=("cove (private, pasta), rootless" "cove (private, pasta), root" "cove --net host, rootless" "podman rootless (slirp4netns)")
run_in() {
	local row=$1
	shift
	case $row in
	0) cove_as "$user" run --rm --pull never -v "$tmp/netbench:/nb/netbench:ro" "$image" "$@" ;;
	1) cove_as root run --rm --pull never -v "$tmp/netbench:/nb/netbench:ro" "$image" "$@" ;;
	2) cove_as "$user" run --rm --pull never --net host -v "$tmp/netbench:/nb/netbench:ro" "$image" "$@" ;;
	3) in_host "$user" "${podman[@]}" run --rm -v "$tmp/netbench:/nb/netbench:ro" bench/netbb "$@" ;;
	esac
}
# serve ROW PORT: an echo server in a detached container, reachable on the
# host's 127.0.0.1:PORT.
serve() {
	local row=$1 port=$2
	case $row in
	0) cove_as "$user" run -d --name nbecho --pull never -p "$port:8080" -v "$tmp/netbench:/nb/netbench:ro" "$image" /nb/netbench echo 0.0.0.0:8080 ;;
	1) cove_as root run -d --name nbecho --pull never -p "$port:8080" -v "$tmp/netbench:/nb/netbench:ro" "$image" /nb/netbench echo 0.0.0.0:8080 ;;
	2) cove_as "$user" run -d --name nbecho --pull never --net host -v "$tmp/netbench:/nb/netbench:ro" "$image" /nb/netbench echo "127.0.0.1:$port" ;;
	3) in_host "$user" "${podman[@]}" run -d --name nbecho -p "127.0.0.1:$port:8080" -v "$tmp/netbench:/nb/netbench:ro" bench/netbb /nb/netbench echo 0.0.0.0:8080 ;;
	esac >/dev/null
}
unserve() {
	case $1 in
	0 | 2) cove_as "$user" rm -f nbecho ;;
	1) cove_as root rm -f nbecho ;;
	3) in_host "$user" "${podman[@]}" rm -f -t 0 nbecho ;;
	esac >/dev/null 2>&1 || true
}

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

declare -a bulk lat50 lat99 failed
for row in "${!labels[@]}"; do
	label=${labels[$row]}
	log "bulk download: $label"
	rates=()
	for _ in $(seq "$runs"); do
		if out=$(run_in "$row" /nb/netbench get 198.18.9.9:9000 2>"$tmp/err"); then
			read -r bytes secs <<<"$out"
			[ "$bytes" = "$size" ] || { failed[row]="got $bytes of $size bytes"; break; }
			rates+=("$(awk -v b="$bytes" -v s="$secs" 'BEGIN { printf "%.1f", b / s / 1048576 }')")
		else
			failed[row]="$(head -c 300 "$tmp/err" | tr '\n' ' ')"
			break
		fi
	done
	[ -n "${failed[row]:-}" ] || bulk[row]=$(printf '%s\n' "${rates[@]}" | median)

	log "forwarded-port latency: $label"
	port=$((30000 + row))
	unserve "$row"
	if serve "$row" "$port" 2>"$tmp/err"; then
		for _ in $(seq 100); do
			in_host root "$tmp/netbench" ping "127.0.0.1:$port" 1 >/dev/null 2>&1 && break
			sleep 0.1
		done
		if out=$(in_host root "$tmp/netbench" ping "127.0.0.1:$port" "$pings" 2>"$tmp/err"); then
			read -r p50 p99 <<<"$out"
			lat50[row]=$p50
			lat99[row]=$p99
		else
			failed[row]="${failed[row]:-} latency: $(head -c 300 "$tmp/err" | tr '\n' ' ')"
		fi
	else
		failed[row]="${failed[row]:-} serve: $(head -c 300 "$tmp/err" | tr '\n' ' ')"
	fi
	unserve "$row"
done

# start_ms WHO NET: mean ms of START_RUNS cove run --rm true.
start_ms() {
	local t0 t1
	t0=$(date +%s%N)
	for _ in $(seq "$start_runs"); do cove_as "$1" run --rm --pull never --net "$2" "$image" /bin/busybox true >/dev/null; done
	t1=$(date +%s%N)
	awk -v a="$t0" -v b="$t1" -v n="$start_runs" 'BEGIN { printf "%.1f", (b - a) / n / 1e6 }'
}
log "start time per network mode"
start_private_user=$(start_ms "$user" private)
start_host_user=$(start_ms "$user" host)
start_none_user=$(start_ms "$user" none)
start_private_root=$(start_ms root private)
start_host_root=$(start_ms root host)

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b == 0) print "—"; else printf "%.2f×", a / b }'; }
host_rate=${bulk[2]:-}
host_lat=${lat50[2]:-}
{
	echo "# Network: bulk download and forwarded-port latency"
	echo
	echo "- Date: $(date -u '+%Y-%m-%d %H:%M UTC'); one run of scripts/bench/net.sh for every row"
	echo "- Host: $(nproc) CPUs, Linux $(uname -r); load average $(cut -d' ' -f1-3 /proc/loadavg) at the end; other jobs may have been running"
	echo "- Versions: cove $cove_rev; pasta from passt $(dpkg-query -W -f '${Version}' passt); slirp4netns $(dpkg-query -W -f '${Version}' slirp4netns); podman $(podman --version | awk '{print $3}') with runc"
	echo "- Bulk: \`netbench get\` in the container reads $size bytes from a server in another network namespace (198.18.9.9, through the host's veth); median of $runs runs, MiB/s"
	echo "- Latency: $pings requests from the host, each a new TCP connection to 127.0.0.1:PORT, a line each way; forwarded with -p (--net host: the server listens on the host's network itself)"
	echo
	echo "| network | bulk MiB/s | × --net host | latency median µs | p99 µs | × --net host (median) |"
	echo "|---|---:|---:|---:|---:|---:|"
	for row in "${!labels[@]}"; do
		if [ -n "${failed[row]:-}" ]; then
			echo "| ${labels[$row]} | FAILED: ${failed[row]} | | | | |"
			continue
		fi
		echo "| ${labels[$row]} | ${bulk[row]} | $(ratio "${bulk[row]}" "$host_rate") | ${lat50[row]} | ${lat99[row]} | $(ratio "${lat50[row]}" "$host_lat") |"
	done
	echo
	echo "Start time, \`cove run --rm IMAGE /bin/busybox true\` from a docker-archive image (the archive is read each time, so compare the rows: the difference is the network), mean of $start_runs: rootless private $start_private_user ms, host $start_host_user ms, none $start_none_user ms; root private $start_private_root ms, host $start_host_root ms."
} | tee "$out_md"
log "wrote $out_md"
