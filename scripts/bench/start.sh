#!/bin/bash
# Container start latency, side by side in one hyperfine run: /bin/true in
# a cached busybox image with unshare+chroot (the floor), bwrap, runc, crun,
# podman and cove. See scripts/bench/README.md.
#
# Usage: sudo scripts/bench/start.sh           (as root: namespaces, cgroups)
#
# Environment:
#   RUNS=50             timed runs per tool (after 5 warm-up runs)
#   WARMUP=5            warm-up runs per tool
#   RETRY_RUNS=100      after timing, this many more runs of each cove row
#                       (not timed) to count failures and their errors
#   PODMAN_DRIVER       overlay (default; vfs if overlay does not work)
#   BENCH_OUT           results file (default scripts/bench/results/start-latest.md)
#   COVE_START_REGISTRY_STATE
#                       state dir of scripts/registry.sh (default
#                       /tmp/cove-start-bench-registry); stopped at the end
#   CRANE               crane binary (default: crane in PATH, else ~/go/bin/crane)
#
# The markdown report goes to stdout and to BENCH_OUT; progress to stderr.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
runs=${RUNS:-50}
warmup=${WARMUP:-5}
rel_runs=${RETRY_RUNS:-100}
out_md=${BENCH_OUT:-$here/results/start-latest.md}
reg_state=${COVE_START_REGISTRY_STATE:-/tmp/cove-start-bench-registry}
marker="cove-start-bench"

log() { printf 'start.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

case $runs in '' | *[!0-9]* | 0) die "RUNS must be a positive integer, not '$runs'" ;; esac
case $warmup in '' | *[!0-9]*) die "WARMUP must be a non-negative integer, not '$warmup'" ;; esac
case $rel_runs in '' | *[!0-9]*) die "RETRY_RUNS must be a non-negative integer, not '$rel_runs'" ;; esac
[ "$(id -u)" = 0 ] || die "must run as root (namespaces, cgroups, runc, podman)"

# ------------------------------------------------------------ tools

# shellcheck disable=SC1091 # scripts/bench/lib.sh, checked on its own
. "$here/lib.sh"
need hyperfine hyperfine
need bwrap bubblewrap
need runc runc
need crun crun
need podman podman
need unshare util-linux
need chroot coreutils
need python3 python3
need htpasswd apache2-utils
need curl curl
[ -x /usr/bin/docker-registry ] || need docker-registry docker-registry
[ -x /bin/busybox ] || { apt-get install -y -q busybox-static >&2 || die "apt-get install busybox-static failed"; }
need go "golang (or a Go toolchain in PATH) to build cove"
crane=$(find_crane) || exit 1

tmp=$(mktemp -d /tmp/cove-bench-start.XXXXXX)
cove=$tmp/cove
export COVE_ROOT=$tmp/coveroot
rootfs=$tmp/rootfs
podman_base=() # podman with its temporary storage, set below
registry() { COVE_REGISTRY_STATE=$reg_state "$repo/scripts/registry.sh" "$@"; }

cleanup() {
	if [ -x "$cove" ]; then
		"$cove" stop --time 1 idle memcheck >/dev/null 2>&1 || true
		"$cove" rm idle memcheck >/dev/null 2>&1 || true
	fi
	if [ ${#podman_base[@]} -gt 0 ]; then
		"${podman_base[@]}" rm -a -f >/dev/null 2>&1 || true
	fi
	registry stop >/dev/null 2>&1 || true
	unmount_under "$tmp"
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cove_rev=$(build_cove "$repo" "$cove") || exit 1

# ------------------------------------------------------------ the image

busybox_layer "$rootfs" "$tmp/layer.tar.gz" "$marker"

reg_env=$(registry start) || die "scripts/registry.sh start failed"
reg=$(printf '%s\n' "$reg_env" | sed -n 's/^COVE_TEST_REGISTRY=//p')
[ -n "$reg" ] || die "scripts/registry.sh start printed no COVE_TEST_REGISTRY= line"
ref=$reg/bench/busybox:latest
push_layer "$crane" "$tmp/layer.tar.gz" "$ref"
image_mb=$(awk -v b="$(stat -c %s "$tmp/layer.tar.gz")" 'BEGIN { printf "%.1f", b / 1e6 }')
image_entries=$(tar -tzf "$tmp/layer.tar.gz" | wc -l)

log "cove pull $ref"
digest=$("$cove" pull -q "$ref" | tail -n1) || die "cove pull -q $ref failed"
case $digest in sha256:*) ;; *) die "cove pull printed '$digest', not a digest" ;; esac

podman_driver=${PODMAN_DRIVER:-overlay}
if ! podman --root "$tmp/probe" --runroot "$tmp/probe-run" --storage-driver "$podman_driver" \
	info >/dev/null 2>"$tmp/probe.err"; then
	log "podman with --storage-driver $podman_driver does not work here ($(head -c 300 "$tmp/probe.err")); using vfs"
	podman_driver=vfs
fi
unmount_under "$tmp/probe"
unmount_under "$tmp/probe-run"
rm -rf "$tmp/probe" "$tmp/probe-run"
podman_base=(podman --root "$tmp/podman/root" --runroot "$tmp/podman/run" --storage-driver "$podman_driver")
log "podman pull $ref (--storage-driver $podman_driver)"
"${podman_base[@]}" pull -q --tls-verify=false "$ref" >/dev/null 2>"$tmp/podman-pull.err" ||
	die "podman pull failed: $(cat "$tmp/podman-pull.err")"

# ------------------------------------------------------------ commands

# The in-container command lines: what is timed, and a check that prints
# the image's marker file, the shell's PID and the host name from inside.
argv_true=(/bin/true)
# shellcheck disable=SC2016 # expanded inside, by the container's shell
argv_check=(/bin/sh -c 'cat /etc/bench-marker; echo "pid=$$ hostname=$(hostname)"')

# bundle RUNTIME PURPOSE: an OCI bundle (config from "RUNTIME spec") whose
# root is the busybox rootfs and whose process is argv_PURPOSE; prints its
# directory. The network namespace is taken out, so that every row shares
# the host's network (podman --network host, cove's default --net host).
bundle() {
	local b=$tmp/bundle-$1-$2 args
	if [ ! -f "$b/config.json" ]; then
		mkdir -p "$b"
		(cd "$b" && "$1" spec) || die "$1 spec failed"
		if [ "$2" = true ]; then args=("${argv_true[@]}"); else args=("${argv_check[@]}"); fi
		python3 - "$b/config.json" "$rootfs" "${args[@]}" <<-'EOF' || die "editing $b/config.json failed"
			import json, sys
			path, root, args = sys.argv[1], sys.argv[2], sys.argv[3:]
			with open(path) as f:
			    c = json.load(f)
			c["root"] = {"path": root, "readonly": True}
			c["process"]["args"] = args
			c["process"]["terminal"] = False
			c["linux"]["namespaces"] = [n for n in c["linux"]["namespaces"] if n["type"] != "network"]
			with open(path, "w") as f:
			    json.dump(c, f, indent=1)
		EOF
	fi
	echo "$b"
}

podman_global=() podman_flags=() # set by pick_podman

# cmdline TOOL PURPOSE: the shell command line (run with sh -c, as
# hyperfine does) that runs argv_PURPOSE with TOOL. Container ids are
# unique per run: the shell's PID.
cmdline() {
	local t=$1 p=$2 args
	# $$: the PID of the shell that runs the line, not ours.
	# shellcheck disable=SC2016
	local id='bench-$$'
	if [ "$p" = true ]; then args=("${argv_true[@]}"); else args=("${argv_check[@]}"); fi
	case $t in
	floor) printf '%q ' unshare --pid --fork --mount --uts chroot "$rootfs" "${args[@]}" ;;
	bwrap) printf '%q ' bwrap --unshare-pid --unshare-uts --unshare-ipc --bind "$rootfs" / --proc /proc --dev /dev "${args[@]}" ;;
	runc) printf '%q ' runc --root "$tmp/state-runc" run --bundle "$(bundle runc "$p")" && printf %s "$id" ;;
	crun) printf '%q ' crun --root "$tmp/state-crun" run --bundle "$(bundle crun "$p")" && printf %s "$id" ;;
	crun-nocg) printf '%q ' crun --cgroup-manager=disabled --root "$tmp/state-crun" run --bundle "$(bundle crun "$p")" && printf %s "$id" ;;
	podman) printf '%q ' "${podman_base[@]}" "${podman_global[@]}" run "${podman_flags[@]}" --rm --pull=never --network host "$ref" "${args[@]}" ;;
	cove) printf '%q ' "$cove" run --rm --net host "$ref" "${args[@]}" ;;
	cove-mem) printf '%q ' "$cove" run --rm --net host --memory 64m "$ref" "${args[@]}" ;;
	*) die "cmdline: unknown tool $t" ;;
	esac
}

tools=(floor bwrap runc crun crun-nocg podman cove cove-mem)
declare -A label=(
	[floor]="floor: unshare + chroot"
	[bwrap]="bwrap"
	[runc]="runc run"
	[crun]="crun run"
	[crun-nocg]="crun --cgroup-manager=disabled run"
	[podman]="podman run --rm"
	[cove]="cove run --rm --net host"
	[cove-mem]="cove run --rm --net host --memory 64m"
)
declare -A failed=() checked=() med=() mean=() sd=() lo=() hi=() bad=() all_med=()
notes=()

# oneline FILE: its first 400 characters on one line, without backquotes.
oneline() { head -c 400 "$1" | tr '\n' ' ' | tr -d '`' | sed 's/ *$//'; }

# try TOOL PURPOSE: runs the command line once; stdout in $tmp/out, stderr
# in $tmp/err.
try() {
	sh -c "$(cmdline "$1" "$2")" >"$tmp/out" 2>"$tmp/err" </dev/null
}

# verify TOOL: /bin/true must exit 0, and the check must print the marker
# from inside; each up to 3 attempts (a failed attempt before one that
# works is noted). Sets failed[TOOL] (the exact error) or checked[TOOL].
verify() {
	local t=$1 p n rc err
	for p in true check; do
		for n in 1 2 3; do
			rc=0
			try "$t" "$p" || rc=$?
			if [ $rc = 0 ] && { [ "$p" = true ] || grep -qx "$marker" "$tmp/out"; }; then
				if [ "$n" -gt 1 ]; then
					notes+=("**${label[$t]}**: attempt 1 of the $p run failed (exit status $rc_first: \`$err_first\`); attempt $n worked")
				fi
				break
			fi
			err=$(oneline "$tmp/err")
			[ "$p" = true ] || err="$(oneline "$tmp/out") $err"
			log "${label[$t]}: the $p run FAILED (attempt $n, exit status $rc): $err"
			[ "$n" -gt 1 ] || { rc_first=$rc err_first=$err; }
			if [ "$n" = 3 ]; then
				if [ "$p" = true ]; then
					failed[$t]="exit status $rc: \`$err\`"
				else
					failed[$t]="the check run (exit status $rc) did not print the marker: \`$err\`"
				fi
				return 1
			fi
		done
	done
	checked[$t]=$(grep -v -x "$marker" "$tmp/out" | tr '\n' ' ' | sed 's/ *$//')
	log "${label[$t]}: ok (/bin/true exit 0; check: $marker, ${checked[$t]})"
}

# pick_podman: podman's defaults may not work here (as root it asks for
# nofile and nproc limits above what may be set without CAP_SYS_RESOURCE;
# crun refuses hybrid cgroups): the first flags that work, failures noted.
pick_podman() {
	local nofile cand
	nofile=$(ulimit -Hn)
	# nproc: podman itself runs (and starts conmon) with at most 32768.
	local -a cands=(
		"|"
		"|--ulimit nofile=$nofile:$nofile --ulimit nproc=32768:32768"
		"--runtime runc|--ulimit nofile=$nofile:$nofile --ulimit nproc=32768:32768"
	)
	for cand in "${cands[@]}"; do
		read -r -a podman_global <<<"${cand%%|*}"
		read -r -a podman_flags <<<"${cand#*|}"
		if verify podman; then
			if [ "$cand" != "|" ]; then
				notes+=("**podman**: timed as \`podman ${podman_global[*]:+${podman_global[*]} }run ${podman_flags[*]} …\` (the flags tried before failed, see above)")
			fi
			return 0
		fi
		if [ "$cand" = "|" ]; then
			notes+=("**podman** with its defaults: ${failed[podman]}")
		else
			notes+=("**podman** with \`podman ${podman_global[*]:+${podman_global[*]} }run ${podman_flags[*]}\`: ${failed[podman]}")
		fi
		unset 'failed[podman]'
	done
	failed[podman]="no set of flags worked (see below)"
	return 1
}

# cove_cgroups: the container ids that have a cgroup under cove's parent
# (cgroup v1: in any hierarchy; v2: /sys/fs/cgroup/cove), one a line.
cove_cgroups() {
	{ find /sys/fs/cgroup/*/cove /sys/fs/cgroup/cove -mindepth 1 -maxdepth 1 -type d -printf '%f\n' 2>/dev/null || true; } |
		LC_ALL=C sort -u
}

# detached NAME ARGS...: cove run -d --name NAME ARGS; sets D_PID and D_ID
# from cove ps --json. Returns 1 (and notes why) when it does not run.
detached() {
	local name=$1 line
	shift
	D_PID=0 D_ID=
	if ! "$cove" run -d --name "$name" "$@" >/dev/null 2>"$tmp/err"; then
		notes+=("**cove**: \`cove run -d --name $name $*\` failed: \`$(oneline "$tmp/err")\`")
		return 1
	fi
	line=$("$cove" ps --json | python3 -c '
import json, sys
for c in json.load(sys.stdin):
    if c["name"] == sys.argv[1]:
        print(c["pid"], c["id"])' "$name" 2>/dev/null || true)
	read -r D_PID D_ID <<<"${line:-0 -}"
	if [ "$D_PID" -le 0 ] || [ ! -r "/proc/$D_PID/status" ]; then
		notes+=("**cove**: \`cove ps --json\` gave pid '$D_PID' for the container $name, which has no /proc entry")
		return 1
	fi
}

# finish NAME ID: cove stop --time 1 NAME && cove rm NAME; then the
# container's cgroups must be gone (else noted, and removed when empty).
finish() {
	local name=$1 id=$2 left d
	"$cove" stop --time 1 "$name" >/dev/null 2>"$tmp/err" ||
		notes+=("**cove**: \`cove stop --time 1 $name\` failed: \`$(oneline "$tmp/err")\`")
	"$cove" rm "$name" >/dev/null 2>"$tmp/err" ||
		notes+=("**cove**: \`cove rm $name\` failed: \`$(oneline "$tmp/err")\`")
	[ -n "$id" ] && [ "$id" != - ] || return 0
	left=$(find /sys/fs/cgroup/*/cove /sys/fs/cgroup/cove -mindepth 1 -maxdepth 1 -type d -name "$id" 2>/dev/null || true)
	[ -n "$left" ] || return 0
	notes+=("**cove**: after \`cove stop --time 1 $name && cove rm $name\` (both exit status 0; the workload ended on SIGTERM) the container's cgroups are still there, empty: \`/sys/fs/cgroup/{$(printf '%s\n' "$left" | awk -F/ '{ print $(NF - 2) }' | paste -sd,)}/cove/$id\` (removed by this script)")
	for d in $left; do rmdir "$d" 2>/dev/null || true; done
}

log "checking that every tool runs /bin/true and a command inside the image"
for t in "${tools[@]}"; do
	if [ "$t" = podman ]; then
		pick_podman || true
	else
		verify "$t" || true
	fi
done

# Memory limit of --memory 64m, from the host (the cgroup of a --rm run is
# gone when it exits).
mem_check=
if [ -z "${failed[cove-mem]:-}" ] && detached memcheck --memory 64m "$ref" sleep 30; then
	cg=$(sed -n 's/^[0-9]*:memory://p' "/proc/$D_PID/cgroup" 2>/dev/null || true)
	if [ -n "$cg" ] && [ -r "/sys/fs/cgroup/memory$cg/memory.limit_in_bytes" ]; then
		mem_check="memory cgroup \`$cg\`, memory.limit_in_bytes $(cat "/sys/fs/cgroup/memory$cg/memory.limit_in_bytes")"
	elif [ -r "/sys/fs/cgroup/cove/$D_ID/memory.max" ]; then
		mem_check="cgroup \`/cove/$D_ID\`, memory.max $(cat "/sys/fs/cgroup/cove/$D_ID/memory.max")"
	else
		mem_check="could not find the memory cgroup of pid $D_PID (\`$(tr '\n' ' ' <"/proc/$D_PID/cgroup" 2>/dev/null)\`)"
		notes+=("**cove --memory 64m**: $mem_check")
	fi
	finish memcheck "$D_ID"
	log "cove --memory 64m: $mem_check"
fi

# ------------------------------------------------------------ timing

hf_args=()
timed_tools=()
for t in "${tools[@]}"; do
	[ -z "${failed[$t]:-}" ] || continue
	timed_tools+=("$t")
	hf_args+=(-n "${label[$t]}" "$(cmdline "$t" true | sed 's/ *$//')")
done
[ ${#timed_tools[@]} -gt 0 ] || die "no tool ran"

# What cove's --rm runs might leave: container directories, mounts, cgroups.
# (find fails on a directory that does not exist yet: nothing there.)
cove_dirs() { { find "$COVE_ROOT/data/containers" "$COVE_ROOT/run/containers" -mindepth 1 -maxdepth 1 2>/dev/null || true; } | wc -l; }
cove_mounts() { awk -v d="$COVE_ROOT" 'index($2, d "/") == 1' /proc/self/mounts | wc -l; }
dirs_before=$(cove_dirs) mounts_before=$(cove_mounts)
cove_cgroups >"$tmp/cgroups-before"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
log "hyperfine: ${#timed_tools[@]} commands, $warmup warm-up + $runs timed runs each"
hyperfine --warmup "$warmup" --runs "$runs" --ignore-failure --style basic \
	--export-json "$tmp/hyperfine.json" "${hf_args[@]}" >&2 || die "hyperfine failed"
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
dirs_after=$(cove_dirs) mounts_after=$(cove_mounts)
cove_cgroups >"$tmp/cgroups-after"
new_cgroups=$(LC_ALL=C comm -13 "$tmp/cgroups-before" "$tmp/cgroups-after" | tr '\n' ' ' | sed 's/ *$//')
leftover_runc=$({ find /sys/fs/cgroup -maxdepth 5 -type d -name 'bench-*' 2>/dev/null || true; } | wc -l)
[ "$leftover_runc" = 0 ] || notes+=("**runc**: $leftover_runc cgroups named bench-* left after the run")

# One line per command, in order: median mean stddev min max (ms) of the
# runs that exited 0, the number of runs that did not, and hyperfine's
# median of all runs.
python3 - "$tmp/hyperfine.json" >"$tmp/stats" <<'EOF'
import json, statistics, sys
for r in json.load(open(sys.argv[1]))["results"]:
    codes = r.get("exit_codes") or [0] * len(r["times"])
    ok = [t for t, c in zip(r["times"], codes) if c == 0] or r["times"]
    sd = statistics.stdev(ok) if len(ok) > 1 else 0
    vals = (statistics.median(ok), statistics.mean(ok), sd, min(ok), max(ok))
    print(*("%.2f" % (v * 1000) for v in vals), sum(1 for c in codes if c != 0), "%.2f" % (r["median"] * 1000))
EOF
i=0
while read -r a b c d e f g; do
	t=${timed_tools[i]}
	med[$t]=$a mean[$t]=$b sd[$t]=$c lo[$t]=$d hi[$t]=$e bad[$t]=$f all_med[$t]=$g
	i=$((i + 1))
done <"$tmp/stats"
[ "$i" = ${#timed_tools[@]} ] || die "hyperfine's JSON has $i results for ${#timed_tools[@]} commands"

cove_runs=0 cove_bad=0
for t in cove cove-mem; do
	[ -n "${bad[$t]:-}" ] || continue
	cove_runs=$((cove_runs + warmup + runs))
	cove_bad=$((cove_bad + bad[$t]))
done
if [ "$dirs_before $mounts_before" != "$dirs_after $mounts_after" ]; then
	notes+=("**cove**: after the timed runs $dirs_after container directories and $mounts_after mounts are left under COVE_ROOT (before: $dirs_before, $mounts_before)")
fi
if [ -n "$new_cgroups" ]; then
	notes+=("**cove**: $(wc -w <<<"$new_cgroups") container cgroup(s) appeared under \`/sys/fs/cgroup/*/cove/\` during the $cove_runs cove runs (warm-up included; $cove_bad timed runs failed) and were left behind: \`$new_cgroups\` (other cove users on this host would count too; not removed)")
fi

# Failures of cove run --rm, outside hyperfine (which does not keep the
# error): RETRY_RUNS more runs of each cove row, their errors and the
# cgroups left behind.
declare -A rel=()
if [ "$rel_runs" -gt 0 ]; then
	for t in cove cove-mem; do
		[ -z "${failed[$t]:-}" ] || continue
		log "${label[$t]}: $rel_runs more runs, for failures"
		cove_cgroups >"$tmp/cg0"
		: >"$tmp/rel-err"
		fails=0
		line=$(cmdline "$t" true)
		for ((n = 0; n < rel_runs; n++)); do
			sh -c "$line" >/dev/null 2>>"$tmp/rel-err" </dev/null || fails=$((fails + 1))
		done
		cove_cgroups >"$tmp/cg1"
		left=$(LC_ALL=C comm -13 "$tmp/cg0" "$tmp/cg1" | wc -l)
		rel[$t]="$fails of $rel_runs failed, $left container cgroup(s) left"
		if [ "$fails" -gt 0 ] || [ "$left" -gt 0 ]; then
			# "N× `error`; ..." for each distinct error line
			# shellcheck disable=SC2016 # the backquotes are markdown
			errs=$(sort "$tmp/rel-err" | uniq -c | while read -r c e; do printf '%s× `%s`; ' "$c" "$(tr -d '\140' <<<"$e")"; done | sed 's/; $//')
			what="cove run --rm$([ "$t" = cove ] || echo ' --memory 64m') IMAGE /bin/true"
			notes+=("**${label[$t]}**: of $rel_runs more runs of \`$what\` (outside hyperfine), $fails failed${errs:+ ($errs)}, and $left container cgroup(s) were left under \`/sys/fs/cgroup/*/cove/\` (other cove users on this host would count too; not removed)")
		fi
		log "${label[$t]}: ${rel[$t]}"
	done
fi

# ------------------------------------------------------------ idle init

log "idle RSS of cove's init"
idle=
if detached idle "$ref" sleep 60; then
	sleep 1
	rss_kb=$(awk '/^VmRSS:/ { print $2 }' "/proc/$D_PID/status")
	hwm_kb=$(awk '/^VmHWM:/ { print $2 }' "/proc/$D_PID/status")
	threads=$(awk '/^Threads:/ { print $2 }' "/proc/$D_PID/status")
	init_cmd=$(tr '\0' ' ' <"/proc/$D_PID/cmdline" | sed 's/ *$//')
	children=$(wc -w <"/proc/$D_PID/task/$D_PID/children" 2>/dev/null || echo '?')
	idle="VmRSS **$rss_kb KB**, VmHWM **$hwm_kb KB** ($threads threads; \`$init_cmd\`, host pid $D_PID, $children child: \`sleep 60\`)"
	finish idle "$D_ID"
fi
log "idle init: ${idle:-not measured}"

# ------------------------------------------------------------ report

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f×", a / b }'; }
floor=${med[floor]:-}
target=1.6

report() {
	local t r vs
	echo "# Container start latency: /bin/true in a cached busybox image"
	echo
	echo "- Date: $(date -u '+%Y-%m-%d %H:%M UTC'); hyperfine, one run for all tools: $warmup warm-up + $runs timed runs per tool, one tool after the other, each command line through \`sh -c\` (hyperfine subtracts the shell's own start)"
	echo "- Host: $(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)), $(awk '/MemTotal/ { printf "%.0f GB", $2 / 1048576 }' /proc/meminfo) RAM, Linux $(uname -r), $(sed -n 's/^PRETTY_NAME="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' /etc/os-release); cgroup v1 controllers (hybrid: cgroup2 at /sys/fs/cgroup/unified with \`$(tr '\n' ' ' </sys/fs/cgroup/unified/cgroup.controllers 2>/dev/null | sed 's/ *$//')\`); load average $load_before before, $load_after after; other jobs may have been running"
	echo "- Image: \`${ref#*/}\` ($image_mb MB gzip, $image_entries entries): Debian's busybox-static \`/bin/busybox\` ($(/bin/busybox 2>&1 | head -n1 | sed 's/ multi-call.*//')) and its applets as symlinks, one layer, pushed to a local registry (scripts/registry.sh) and pulled before timing by cove (\`cove pull\`) and podman (\`podman pull\`, $podman_driver storage in a temporary --root/--runroot); unshare, bwrap, runc and crun use the same tree, unpacked"
	echo "- Versions: cove $cove_rev (static, CGO_ENABLED=0, $(go version | awk '{ print $3 }')); $(unshare --version); $(bwrap --version); $(runc --version | head -n1); $(crun --version | head -n1); $(podman --version); $(hyperfine --version)"
	echo
	echo "| tool | median ms | mean ± σ ms | min–max ms | × floor | faster than bwrap? |"
	echo "|---|---:|---:|---:|---:|---|"
	for t in "${tools[@]}"; do
		if [ -n "${failed[$t]:-}" ]; then
			echo "| ${label[$t]} | FAILED: ${failed[$t]} | | | | |"
			continue
		fi
		r=$(ratio "${med[$t]}" "$floor")
		vs=—
		case $t in
		cove*)
			if [ -n "${med[bwrap]:-}" ]; then
				if awk -v a="${med[$t]}" -v b="${med[bwrap]}" 'BEGIN { exit !(a < b) }'; then vs=yes; else vs=no; fi
				vs="$vs ($(ratio "${med[$t]}" "${med[bwrap]}") bwrap)"
			fi
			;;
		esac
		echo "| ${label[$t]}$([ "${bad[$t]}" = 0 ] || echo " (**${bad[$t]} of $runs runs failed**, not counted; median of all $runs: ${all_med[$t]} ms)") | ${med[$t]} | ${mean[$t]} ± ${sd[$t]} | ${lo[$t]}–${hi[$t]} | $r | $vs |"
	done
	echo
	for t in cove cove-mem; do
		if [ -z "${med[$t]:-}" ] || [ -z "$floor" ]; then continue; fi
		r=$(awk -v a="${med[$t]}" -v b="$floor" 'BEGIN { printf "%.2f", a / b }')
		if awk -v r="$r" -v m="$target" 'BEGIN { exit !(r <= m) }'; then
			echo "- Target ${label[$t]} ≤ $target× the floor: **met** (${r}×)"
		else
			echo "- Target ${label[$t]} ≤ $target× the floor: **not met** (${r}×, $(awk -v a="${med[$t]}" -v b="$floor" -v m="$target" 'BEGIN { printf "%.2f", a - b * m }') ms over)"
		fi
	done
	echo "- Idle cove init (\`cove run -d --name idle IMAGE sleep 60\`, pid from \`cove ps --json\`, /proc/PID/status after 1 s): ${idle:-not measured}"
	[ -z "$mem_check" ] || echo "- \`--memory 64m\` seen from the host (a detached run): $mem_check"
	for t in cove cove-mem; do
		[ -z "${rel[$t]:-}" ] || echo "- $rel_runs more runs of ${label[$t]} after timing (not timed, for failures): ${rel[$t]}"
	done
	echo
	echo "Command lines (as timed; ROOTFS = the unpacked busybox tree, IMAGE = \`${ref#*/}\`, bundles made with \`runc spec\` / \`crun spec\`):"
	echo
	for t in "${tools[@]}"; do
		echo "- ${label[$t]}: \`$(cmdline "$t" true | sed -e 's/ *$//' -e "s|$tmp/rootfs|ROOTFS|g" -e "s|$ref|IMAGE|g" -e "s|$tmp|TMP|g")\`${checked[$t]:+; check run printed \`$marker\` and \`${checked[$t]}\`}"
	done
	echo
	echo "How it is measured:"
	echo
	echo "- \`hyperfine --warmup $warmup --runs $runs --ignore-failure --export-json …\` with all command lines at once; the exit status of every run is checked in the JSON; median, mean, σ (sample), min and max in ms are of the runs that exited 0 (hyperfine's times; a row with failed runs says how many and gives the median of all)"
	echo "- × floor: the tool's median / the median of \`unshare --pid --fork --mount --uts chroot ROOTFS /bin/true\`; faster than bwrap?: cove's median against bwrap's"
	echo "- before timing, every tool runs \`/bin/true\` (exit status 0) and \`/bin/sh -c 'cat /etc/bench-marker; echo \"pid=\$\$ hostname=\$(hostname)\"'\` with the same command line; it must print the image's marker file"
	echo "- runc and crun: the bundle's config is the runtime's \`spec\` with root = ROOTFS (read-only), args = /bin/true, terminal false and the network namespace taken out (every row uses the host's network; podman with --network host, cove's default --net host); \`--root\` is a temporary directory and the container id is \`bench-\$\$\` (the PID of hyperfine's shell, new per run)"
	echo "- cove rows include no pull (the image is stored; default --pull missing), the overlay mount over the image's rootfs, a cgroup per container (cgroup v1 here) and --rm's cleanup; container directories and mounts under COVE_ROOT and cgroups under /sys/fs/cgroup/*/cove/ are compared before and after the timed runs"
	echo "- podman: the image pulled once into a temporary --root/--runroot; \`--pull=never --network host\`; its flags are the first of: none, \`--ulimit nofile=HARD:HARD --ulimit nproc=32768:32768\`, and that with \`--runtime runc\`, that runs the check"
	echo "- rerun: \`sudo RUNS=$runs scripts/bench/start.sh\`"
	if [ ${#notes[@]} -gt 0 ]; then
		echo
		echo "Problems seen:"
		echo
		for n in "${notes[@]}"; do echo "- $n"; done
	fi
}

mkdir -p "$(dirname "$out_md")"
report | tee "$out_md"
log "report written to $out_md"
