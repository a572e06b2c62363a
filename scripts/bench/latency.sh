#!/bin/bash
# Start and exec latency, and cove's own start, side by side in one run:
# /bin/true in a cached busybox image with unshare+chroot (the floor),
# bwrap, runc and cove (three networks); exec into a running container with
# runc, podman (--runtime runc) and cove; `cove stop` of a running sleep
# (--net none and the private network, each container made untimed
# before its run); `cove --help`; the idle init's
# RSS; and rootless, as covetest with its subordinate ids, cove run --net
# none against bwrap --unshare-user. With COVE_BASE (a second cove binary, e.g. one built from main) each
# cove row is run for both binaries in the same rounds. See
# scripts/bench/README.md.
#
# Usage: sudo [COVE_BASE=/tmp/cove-main] scripts/bench/latency.sh
#
# Environment:
#   RUNS=30       timed rounds (each round runs every command once, in turn)
#   WARMUP=3      untimed rounds first
#   COVE_BASE     a static cove binary to compare with (optional)
#   BENCH_OUT     results file (default scripts/bench/results/latency-latest.md)
#   COVE_LATENCY_REGISTRY_STATE
#                 state dir of scripts/registry.sh (default
#                 /tmp/cove-latency-bench-registry); stopped at the end
#   BUSY_DISK=1   time the rounds while a writer of ours syncs 64 MB to
#                 the disk under the stores, over and over (a laptop's
#                 disk while a build or a browser writes)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
runs=${RUNS:-30}
warmup=${WARMUP:-3}
out_md=${BENCH_OUT:-$here/results/latency-latest.md}
reg_state=${COVE_LATENCY_REGISTRY_STATE:-/tmp/cove-latency-bench-registry}
base=${COVE_BASE:-}

log() { printf 'latency.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (namespaces, cgroups, runc, podman)"
[ -z "$base" ] || [ -x "$base" ] || die "COVE_BASE=$base is not an executable"

# shellcheck disable=SC1091 # scripts/bench/lib.sh, checked on its own
. "$here/lib.sh"
need bwrap bubblewrap
need runc runc
need podman podman
need unshare util-linux
need setpriv util-linux
need pasta passt
need python3 python3
need htpasswd apache2-utils
need curl curl
[ -x /usr/bin/docker-registry ] || need docker-registry docker-registry
[ -x /bin/busybox ] || { apt-get install -y -q busybox-static >&2 || die "apt-get install busybox-static failed"; }
need go "golang (or a Go toolchain in PATH) to build cove"
crane=$(find_crane) || exit 1

user=covetest # the rootless rows' user (made if missing, as scripts/test.sh does)
id "$user" >/dev/null 2>&1 || useradd -m "$user"
grep -q "^$user:" /etc/subuid || usermod --add-subuids 200000-265535 --add-subgids 200000-265535 "$user"
tmp=$(mktemp -d /tmp/cove-bench-latency.XXXXXX)
chmod 755 "$tmp" # the rootless rows read the rootfs and run cove from here
cove=$tmp/cove
rootfs=$tmp/rootfs
export COVE_ROOT=$tmp/coveroot
podman_base=(podman --root "$tmp/podman/root" --runroot "$tmp/podman/run" --runtime runc --cgroup-manager cgroupfs --events-backend file)
registry() { COVE_REGISTRY_STATE=$reg_state "$repo/scripts/registry.sh" "$@"; }
cleanup() {
	for b in "$cove" ${base:+"$base"}; do
		[ -x "$b" ] || continue
		"$b" rm -f lat-exec lat-idle lat-stop-0 lat-stop-1 lat-stop-2 lat-stop-3 >/dev/null 2>&1 || true
	done
	runc --root "$tmp/state-runc" kill lat-exec KILL >/dev/null 2>&1 || true
	runc --root "$tmp/state-runc" delete -f lat-exec >/dev/null 2>&1 || true
	"${podman_base[@]}" rm -a -f --time 0 >/dev/null 2>&1 || true
	registry stop >/dev/null 2>&1 || true
	[ -z "${sys:-}" ] || rm -rf "$sys"
	# podman's cleanup process (after conmon) may mount its storage again
	# just after we unmounted it: a few tries.
	for _ in 1 2 3; do
		unmount_under "$tmp"
		rm -rf "$tmp" 2>/dev/null && break
		sleep 1
	done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The containers' states in memory, as a user's are (/run/cove for root,
# /run/user/UID otherwise): what is written there is not synced to a disk.
in_memory() { mkdir -p "$1" && mount -t tmpfs -o "size=64m,mode=700,uid=$2,gid=$3" cove-bench-run "$1"; }
in_memory "$COVE_ROOT/run" 0 0 || die "cannot mount a tmpfs at $COVE_ROOT/run"
cove_rev=$(build_cove "$repo" "$cove") || exit 1
(cd "$repo" && go build -o "$tmp/cmdtime" ./scripts/bench/cmdtime) || die "building cmdtime failed"
# The floor of any Go program's start: an empty main, static as cove is.
mkdir -p "$tmp/empty"
printf 'package main\n\nfunc main() {}\n' >"$tmp/empty/main.go"
(cd "$tmp/empty" && CGO_ENABLED=0 go build -o "$tmp/empty-go" main.go) || die "building the empty Go program failed"
busybox_layer "$rootfs" "$tmp/layer.tar.gz" latency-bench
reg_env=$(registry start) || die "scripts/registry.sh start failed"
reg=$(printf '%s\n' "$reg_env" | sed -n 's/^COVE_TEST_REGISTRY=//p')
ref=$reg/bench/busybox:latest
push_layer "$crane" "$tmp/layer.tar.gz" "$ref"
"$cove" pull -q "$ref" >/dev/null || die "cove pull $ref failed"
# as_user DIR CMD...: CMD as the rootless user, with DIR its COVE_ROOT and
# HOME; setpriv, not runuser: no PAM session in what is timed.
as_user() {
	local d=$1
	shift
	q setpriv --reuid="$user" --regid="$user" --init-groups env HOME="$d" COVE_ROOT="$d/root" XDG_RUNTIME_DIR= "$@"
}
"${podman_base[@]}" pull -q --tls-verify=false "$ref" >/dev/null 2>"$tmp/err" || die "podman pull failed: $(cat "$tmp/err")"

# A runc bundle of the rootfs; ARGS the process, no network namespace.
bundle() {
	local b=$1
	shift
	mkdir -p "$b"
	(cd "$b" && runc spec) || die "runc spec failed"
	python3 - "$b/config.json" "$rootfs" "$@" <<-'PY' || die "editing $b/config.json failed"
		import json, sys
		path, root, args = sys.argv[1], sys.argv[2], sys.argv[3:]
		c = json.load(open(path))
		c["root"] = {"path": root, "readonly": True}
		c["process"]["args"] = args
		c["process"]["terminal"] = False
		c["linux"]["namespaces"] = [n for n in c["linux"]["namespaces"] if n["type"] != "network"]
		json.dump(c, open(path, "w"), indent=1)
	PY
}
bundle "$tmp/b-true" /bin/true
bundle "$tmp/b-sleep" /bin/sleep 3600

# The exec targets: one long-running container per tool.
runc --root "$tmp/state-runc" run -d --bundle "$tmp/b-sleep" lat-exec >/dev/null 2>"$tmp/err" </dev/null ||
	die "runc run -d failed: $(cat "$tmp/err")"
podman_id=$("${podman_base[@]}" run -d --pull=never --network host \
	--ulimit nofile="$(ulimit -Hn):$(ulimit -Hn)" --ulimit nproc=32768:32768 "$ref" sleep 3600 2>"$tmp/err") ||
	die "podman run -d failed: $(cat "$tmp/err")"
"$cove" run -d --name lat-exec "$ref" sleep 3600 >/dev/null || die "cove run -d failed"

q() { printf '%q ' "$@"; }
# What the containers run as init, and a workspace's IDE server with
# (written out by the start above).
init=$(find "$COVE_ROOT/data/bin" -name 'cove-init-*' -type f | head -n1)
inside=$(find "$COVE_ROOT/data/bin" -name 'cove-inside-*' -type f | head -n1)
{ [ -n "$init" ] && [ -n "$inside" ]; } || die "no cove-init or cove-inside in $COVE_ROOT/data/bin: was cove built by scripts/build.sh?"
# This cove as root installs it (install.sh runs cove system
# write-programs): root's copies of its inside programs, which rootless
# containers run without re-executing their init.
sys=$(mktemp -d /var/lib/cove-bench-latency-sys.XXXXXX)
{ chmod 755 "$sys" && mkdir "$sys/bin" && cp "$cove" "$sys/bin/cove"; } || die "cannot install cove in $sys"
"$sys/bin/cove" system write-programs >/dev/null || die "cove system write-programs failed"
# Rootless: each cove its own store, the user's.
declare -A user_dir=()
i=0
for v in "cove=$cove" ${base:+"cove (base)=$base"} "cove installed by root=$sys/bin/cove"; do
	name=${v%%=*} bin=${v#*=}
	d=$tmp/user-$((i++))
	mkdir -p "$d/root" && chown -R "$user:" "$d"
	in_memory "$d/root/run" "$(id -u "$user")" "$(id -g "$user")" || die "cannot mount a tmpfs at $d/root/run"
	user_dir[$name]=$d
	eval "$(as_user "$d" "$bin" pull -q "$ref")" >/dev/null || die "$name pull as $user failed"
done

cmds=(
	"floor: unshare + chroot=$(q unshare --pid --fork --mount --uts chroot "$rootfs" /bin/true)"
	"bwrap=$(q bwrap --unshare-pid --unshare-uts --unshare-ipc --bind "$rootfs" / --proc /proc --dev /dev /bin/true)"
	"runc run=$(q runc --root "$tmp/state-runc" run --bundle "$tmp/b-true")"'lat-$$'
	"floor of a Go program: an empty static main=$(q "$tmp/empty-go")"
	"cove's own start: init --hold-userns, stdin empty=$(q "$cove" init --hold-userns) </dev/null"
	"cove-inside's start: the same=$(q "$inside" init --hold-userns) </dev/null"
	"cove-init's start: the same=$(q "$init" init --hold-userns) </dev/null"
	"bwrap, rootless=$(as_user "$tmp" bwrap --unshare-user --unshare-pid --unshare-uts --unshare-ipc --ro-bind "$rootfs" / --proc /proc --dev /dev /bin/true)"
)
variants=("cove=$cove")
[ -z "$base" ] || variants+=("cove (base)=$base")
for v in "${variants[@]}"; do
	name=${v%%=*} bin=${v#*=}
	cmds+=(
		"$name run --rm --net host=$(q "$bin" run --rm --net host "$ref" /bin/true)"
		"$name run --rm --net none=$(q "$bin" run --rm --net none "$ref" /bin/true)"
		"$name run --rm (private net)=$(q "$bin" run --rm "$ref" /bin/true)"
		"$name run --rm --net none, rootless=$(as_user "${user_dir[$name]}" "$bin" run --rm --net none "$ref" /bin/true)"
	)
done
cmds+=(
	"cove installed by root run --rm --net none, rootless=$(as_user "${user_dir[cove installed by root]}" "$sys/bin/cove" run --rm --net none "$ref" /bin/true)"
	"runc exec=$(q runc --root "$tmp/state-runc" exec lat-exec /bin/true)"
	"podman exec (runc)=$(q "${podman_base[@]}" exec "$podman_id" /bin/true)"
)
n=0
for v in "${variants[@]}"; do
	name=${v%%=*} bin=${v#*=}
	cmds+=("$name exec=$(q "$bin" exec lat-exec /bin/true)" "$name --help=$(q "$bin" --help)")
	# cove stop of a sleep (init passes SIGTERM on: it ends at once), a
	# container made untimed before each run (cmdtime's PREPARE ::: ).
	for net in none private; do
		c=lat-stop-$((n++))
		cmds+=("$name stop, --net $net=$(q "$bin" rm -f "$c") >/dev/null 2>&1; $(q "$bin" run -d --net "$net" --name "$c" "$ref" sleep 3600) >/dev/null ::: $(q "$bin" stop "$c")")
	done
done

busy_pid=''
if [ -n "${BUSY_DISK:-}" ]; then
	(while :; do dd if=/dev/zero of="$tmp/busy" bs=1M count=64 conv=fsync status=none; done) &
	busy_pid=$!
fi
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
log "timing ${#cmds[@]} commands: $warmup + $runs rounds"
"$tmp/cmdtime" "$runs" "$warmup" "${cmds[@]}" >"$tmp/times" || die "cmdtime failed"
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
if [ -n "$busy_pid" ]; then
	kill "$busy_pid"
	wait "$busy_pid" 2>/dev/null || true # once its dd ends
	rm -f "$tmp/busy"
fi

# Idle init: RSS of the container's PID 1 (host view) a second after start.
idle=()
for v in "${variants[@]}"; do
	name=${v%%=*} bin=${v#*=}
	"$bin" run -d --name lat-idle "$ref" sleep 60 >/dev/null || die "$name run -d failed"
	pid=$("$bin" ps --json | python3 -c 'import json,sys; print([c["pid"] for c in json.load(sys.stdin) if c["name"] == "lat-idle"][0])')
	sleep 1
	idle+=("$name: VmRSS $(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status") KB, $(awk '/^Threads:/ { print $2 }' "/proc/$pid/status") threads, \`$(tr '\0' ' ' <"/proc/$pid/cmdline" | sed 's/ *$//')\`")
	"$bin" rm -f lat-idle >/dev/null
done

# median of a row by label
med() { awk -F'\t' -v l="$1" '$1 == l { print $4 }' "$tmp/times"; }
ratio() { awk -v a="$(med "$1")" -v b="$(med "$2")" 'BEGIN { if (a != "" && b > 0) printf "%.2f×", a / b; else printf "—" }'; }

report() {
	echo "# Start and exec latency, side by side"
	echo
	echo "- Date: $(date -u '+%Y-%m-%d %H:%M UTC'); $warmup + $runs rounds, each round every command once, in a new random order (scripts/bench/cmdtime: through \`sh -c 'exec …'\`, wall time from fork to exit)"
	echo "- Host: $(nproc) CPUs, Linux $(uname -r); load average $load_before before, $load_after after (other jobs were running)${busy_pid:+; the disk busy: a writer syncing 64 MB over and over beside every round (BUSY_DISK)}"
	echo "- cove $cove_rev (static)${base:+; base: \`$base\`}; $(runc --version | head -n1); $(podman --version); $(bwrap --version)"
	echo
	echo "| command | median ms | min ms | CPU ms (median) | max RSS KB | failed |"
	echo "|---|---:|---:|---:|---:|---:|"
	awk -F'\t' '{ printf "| %s | %s | %s | %s | %s | %s%s |\n", $1, $4, $5, $6, $7, $3, ($8 != "" ? " (`" $8 "`)" : "") }' "$tmp/times"
	echo
	echo "Ratios of medians:"
	echo
	for v in "${variants[@]}"; do
		n=${v%%=*}
		echo "- $n run --rm --net host / bwrap: $(ratio "$n run --rm --net host" bwrap); --net none / bwrap: $(ratio "$n run --rm --net none" bwrap); private net / bwrap: $(ratio "$n run --rm (private net)" bwrap) (target ≤ 2×)"
		echo "- $n run --rm --net none, rootless / bwrap, rootless (both as $user through setpriv): $(ratio "$n run --rm --net none, rootless" "bwrap, rootless") (target ≤ 2×)"
		echo "- $n exec / runc exec: $(ratio "$n exec" "runc exec") (target ≤ 1×); / podman exec: $(ratio "$n exec" "podman exec (runc)")"
		echo "- $n --help / an empty static Go program: $(ratio "$n --help" "floor of a Go program: an empty static main") (what a cove process costs before and around its main; a start has two)"
	done
	echo "- cove installed by root (its inside programs root's: install.sh as root), rootless --net none / bwrap, rootless: $(ratio "cove installed by root run --rm --net none, rootless" "bwrap, rootless"); / cove's own: $(ratio "cove installed by root run --rm --net none, rootless" "cove run --rm --net none, rootless")"
	echo "- cove-init's start / cove's, the same command line (what a container's init costs before its work, up to three times per start): $(ratio "cove-init's start: the same" "cove's own start: init --hold-userns, stdin empty"); cove-inside's (the IDE server's program, the init before cove-init): $(ratio "cove-inside's start: the same" "cove's own start: init --hold-userns, stdin empty")"
	if [ -n "$base" ]; then
		echo "- this cove / base: run --net host $(ratio "cove run --rm --net host" "cove (base) run --rm --net host"), --net none $(ratio "cove run --rm --net none" "cove (base) run --rm --net none"), rootless --net none $(ratio "cove run --rm --net none, rootless" "cove (base) run --rm --net none, rootless"), private net $(ratio "cove run --rm (private net)" "cove (base) run --rm (private net)"), exec $(ratio "cove exec" "cove (base) exec"), --help $(ratio "cove --help" "cove (base) --help"), stop --net none $(ratio "cove stop, --net none" "cove (base) stop, --net none"), stop private net $(ratio "cove stop, --net private" "cove (base) stop, --net private")"
	fi
	echo
	echo "Idle init (\`cove run -d IMAGE sleep 60\`, /proc/PID/status of PID 1 after 1 s):"
	echo
	for l in "${idle[@]}"; do echo "- $l"; done
}
mkdir -p "$(dirname "$out_md")"
report | tee "$out_md"
log "report written to $out_md"
