#!/bin/sh
# /init of the cgroup v2 test VM that scripts/vmtest.sh boots (busybox sh,
# PID 1). It prints one line per check on the serial console:
#   VMTEST PASS name
#   VMTEST FAIL name: detail
# then VMTEST DONE, and powers the VM off. Lines starting "vmtest: " are
# information for the log; "    | " lines are the output of a failed command.
#
# Stage 1 runs on the initramfs (rootfs), where pivot_root(2) fails with
# EINVAL, so it copies itself onto a tmpfs and switch_roots there, as a real
# system's root is a real mount. Stage 2 sets up and runs the checks.
export PATH=/bin:/sbin:/usr/bin:/usr/sbin

if [ "${VMTEST_STAGE:-1}" = 1 ]; then
	mount -t devtmpfs devtmpfs /dev 2>/dev/null
	exec 0</dev/console 1>/dev/console 2>&1
	mkdir -p /newroot
	mount -t tmpfs -o mode=0755 newroot /newroot
	for e in /*; do
		case $e in
		/newroot | /dev | /proc | /sys) ;;
		*) cp -a "$e" /newroot/ ;;
		esac
	done
	mkdir -p /newroot/dev /newroot/proc /newroot/sys
	mount --move /dev /newroot/dev
	export VMTEST_STAGE=2
	# shellcheck disable=SC2093 # the lines after it run only if it fails
	exec switch_root /newroot /init
	echo "vmtest: switch_root failed"
	poweroff -f
fi

mount -t proc proc /proc
mount -t sysfs sysfs /sys
grep -q '^devtmpfs /dev ' /proc/mounts || mount -t devtmpfs devtmpfs /dev
exec 0</dev/console 1>/dev/console 2>&1
mkdir -p /dev/pts /dev/shm
mount -t devpts -o newinstance,ptmxmode=0666 devpts /dev/pts
mount -t tmpfs -o mode=1777 shm /dev/shm
mount -t tmpfs -o mode=1777 tmp /tmp
mount -t tmpfs -o mode=0755 run /run
mount -t cgroup2 -o nsdelegate cgroup2 /sys/fs/cgroup
# Kernel messages (the OOM killer's, for one) would cut into the result
# lines; they are shown from dmesg at the end when a check fails.
echo 1 >/proc/sys/kernel/printk
hostname vmtest
ip link set lo up 2>/dev/null

if [ -f /lib/modules/load.list ]; then
	while read -r m; do
		[ -n "$m" ] || continue
		insmod "/lib/modules/$m" || echo "vmtest: insmod $m failed"
	done </lib/modules/load.list
fi

export COVE_ROOT=/tmp/cove-root
export HOME=/root
mkdir -p "$COVE_ROOT" "$HOME"
out=/tmp/vmtest
mkdir -p "$out"
img=oci:/images/busybox
failed=0
cove_cgroups_seen=0

pass() { echo "VMTEST PASS $1"; }
fail() {
	echo "VMTEST FAIL $1: $2"
	failed=$((failed + 1))
}
# show FILE...: the files' contents for the log, indented.
show() {
	for f in "$@"; do
		[ -s "$f" ] && head -n 40 "$f" | sed 's/^/    | /'
	done
	return 0
}
# show_records: each container's record beside what its pid is now (start
# time, executable's device and inode): for a start cove then took for
# gone ("is not running").
show_records() {
	for f in "$COVE_ROOT"/run/containers/*/state.json; do
		[ -f "$f" ] || continue
		pid=$(sed -n 's/^  "pid": \([0-9]*\),*$/\1/p' "$f")
		echo "    | $(tr -d ' \n' <"$f" | cut -c 1-400)"
		if [ -n "$pid" ] && [ -d "/proc/$pid" ]; then
			echo "    | pid $pid now: $(cut -d ' ' -f 2,3,22 "/proc/$pid/stat") exe $(stat -L -c '%d %i' "/proc/$pid/exe" 2>&1) $(readlink "/proc/$pid/exe")"
		else
			echo "    | pid $pid: gone"
		fi
	done
}
# ask HOST:PORT FILE: sends the request on stdin with busybox nc (its
# static wget crashes on this kernel), the answer in FILE. nc's side stays
# open a second after the request: a half-close is, to Go's HTTP server, a client
# gone, and the proxy then cancels the request it forwards (a 502,
# "context canceled", until the workspace's answer beat the close).
ask() {
	{
		cat
		sleep 1
	} | timeout 30 nc "${1%:*}" "${1#*:}" >"$2" 2>&1
}
# brief FILE: the first lines of FILE on one line, for a FAIL detail.
brief() {
	head -n 3 "$1" | tr '\n' ' ' | cut -c 1-200
}
# count_procs CMDLINE: how many processes have exactly that command line
# (arguments joined with single spaces).
count_procs() {
	n=0
	for f in /proc/[0-9]*/cmdline; do
		c=$(tr '\0' ' ' 2>/dev/null <"$f")
		[ "$c" = "$1 " ] && n=$((n + 1))
	done
	echo "$n"
}
# cove_cgroups: the cgroup directories whose name contains "cove".
cove_cgroups() {
	find /sys/fs/cgroup -mindepth 1 -type d -name '*cove*' 2>/dev/null
}
note_cgroups() {
	c=$(cove_cgroups | tr '\n' ' ')
	if [ -n "$c" ]; then
		cove_cgroups_seen=1
		echo "vmtest: cove cgroups now: $c"
	fi
}

echo # the firmware's escape sequences end without a newline
echo "vmtest: kernel $(uname -r), COVE_ROOT=$COVE_ROOT, cove $(cove version 2>&1 | head -n 1)"
echo "vmtest: filesystems: $(grep -E 'overlay|cgroup2' /proc/filesystems | tr -s '\t\n' '  ')"

# cgroup-v2-present: a pure v2 hierarchy with the memory and pids controllers.
check_cgroup_v2() {
	name=cgroup-v2-present
	fs=$(awk '$2 == "/sys/fs/cgroup" { print $3 }' /proc/mounts)
	ctl=$(cat /sys/fs/cgroup/cgroup.controllers 2>/dev/null)
	echo "vmtest: /sys/fs/cgroup is $fs; controllers: $ctl"
	case " $ctl " in
	*" memory "*" pids "* | *" pids "*" memory "*) ok=1 ;;
	*) ok=0 ;;
	esac
	if [ "$fs" = cgroup2 ] && [ "$ok" = 1 ]; then
		pass $name
	else
		fail $name "/sys/fs/cgroup (${fs:-not mounted}) lists controllers '$ctl'; want cgroup2 with memory and pids"
	fi
}

# pull: cove pull prints the manifest digest.
check_pull() {
	name=pull
	timeout -s KILL 120 cove pull "$img" >"$out/pull.out" 2>"$out/pull.err"
	rc=$?
	digest=$(grep -E '^sha256:[0-9a-f]{64}$' "$out/pull.out")
	if [ "$rc" = 0 ] && [ -n "$digest" ]; then
		echo "vmtest: pulled $digest"
		pass $name
	else
		fail $name "exit $rc, stdout '$(brief "$out/pull.out")', stderr '$(brief "$out/pull.err")'"
		show "$out/pull.out" "$out/pull.err"
	fi
}

# memory-limit: an allocation loop under --memory 32m is OOM-killed: 137
# and cove says so.
check_memory() {
	name=memory-limit
	# shellcheck disable=SC2016 # expanded by the shell in the container
	timeout -s KILL 120 cove run --rm --net none --memory 32m "$img" \
		sh -c 'x=a; while true; do x="$x$x"; done' >"$out/mem.out" 2>"$out/mem.err"
	rc=$?
	want='killed: out of memory (limit 32 MiB)'
	if [ "$rc" = 137 ] && grep -qF "$want" "$out/mem.err"; then
		pass $name
	elif [ "$rc" = 137 ]; then
		fail $name "exit 137 but stderr lacks '$want': '$(brief "$out/mem.err")'"
		show "$out/mem.err"
	else
		fail $name "exit $rc (want 137), stderr '$(brief "$out/mem.err")'"
		show "$out/mem.out" "$out/mem.err"
	fi
}

# oom-takes-the-grower: past the limit the kernel kills the process that
# grew, not cove's init (which sheds what it touched while starting): the
# shell that ran it goes on. /dev/shm filled first leaves dd's buffer some
# 14 MB, less than an unshed init's 24-28 MB.
check_grower() {
	name=oom-takes-the-grower
	# shellcheck disable=SC2016 # expanded by the shell in the container
	timeout -s KILL 120 cove run --rm --net none --memory 48m "$img" \
		sh -c 'head -c 28m /dev/zero >/dev/shm/fill; dd if=/dev/zero of=/dev/null bs=24M count=4 2>/dev/null; echo "survived $?"' \
		>"$out/grower.out" 2>"$out/grower.err"
	rc=$?
	# The shell's line is what tells (init killed first prints nothing);
	# the kernel may kill again before dd's memory is freed.
	if [ "$(cat "$out/grower.out")" = "survived 137" ]; then
		pass $name
	else
		fail $name "exit $rc, stdout '$(brief "$out/grower.out")' (want 'survived 137'), stderr '$(brief "$out/grower.err")'"
	fi
}

# cgroup-view: the container sees its own cgroup, read-only, at
# /sys/fs/cgroup (a cgroup namespace): memory.max is the limit, and
# /proc/self/cgroup names it as the root.
check_cgroup_view() {
	name=cgroup-view
	timeout -s KILL 120 cove run --rm --net none --memory 48m "$img" \
		sh -c 'cat /sys/fs/cgroup/memory.max; cat /proc/self/cgroup; echo max >/sys/fs/cgroup/memory.max && echo WROTE' \
		>"$out/view.out" 2>"$out/view.err"
	rc=$?
	got=$(tr '\n' ' ' <"$out/view.out")
	if [ "$got" = "50331648 0::/ " ]; then
		pass $name
	else
		fail $name "exit $rc, stdout '$got' (want '50331648 0::/ '), stderr '$(brief "$out/view.err")'"
	fi
}

# pids-limit: a shell that starts 100 background sleeps under --pids 32
# sees at most 32 processes. The spawning shell dies at the first failed
# fork (ash does); the outer shell then counts with builtins only, which
# need no fork.
check_pids() {
	name=pids-limit
	# shellcheck disable=SC2016 # expanded by the shell in the container
	script='sh -c '\''i=0; while [ $i -lt 100 ]; do sleep 5 & i=$((i+1)); done'\'' >/dev/null 2>&1
max=0
for t in 1 2 3; do set -- /proc/[0-9]*; [ $# -gt $max ] && max=$#; done
cur=none; read -r cur </sys/fs/cgroup/pids.current 2>/dev/null
echo "procs=$max pids.current=$cur"'
	timeout -s KILL 120 cove run --rm --net none --pids 32 "$img" sh -c "$script" >"$out/pids.out" 2>"$out/pids.err"
	rc=$?
	line=$(grep '^procs=' "$out/pids.out" | head -n 1)
	procs=${line#procs=}
	procs=${procs%% *}
	echo "vmtest: pids-limit: exit $rc, $line"
	if [ "$rc" != 0 ] || [ -z "$line" ]; then
		fail $name "exit $rc, stdout '$(brief "$out/pids.out")', stderr '$(brief "$out/pids.err")'"
		show "$out/pids.out" "$out/pids.err"
	elif [ "$procs" -lt 2 ]; then
		fail $name "counted $procs processes in the container's /proc: is /proc mounted there?"
	elif [ "$procs" -gt 32 ]; then
		fail $name "$procs processes ran under --pids 32"
	else
		pass $name
	fi
}

# stop-kills-tree: stop a detached container whose shell and children
# ignore SIGTERM; within the grace period plus a little, nothing is left.
check_stop() {
	name=stop-kills-tree
	timeout -s KILL 60 cove run -d --net none --name t1 "$img" \
		sh -c 'trap "" TERM; sleep 1000 & sleep 1000 & wait' >"$out/stop-run.out" 2>"$out/stop-run.err"
	rc=$?
	if [ "$rc" != 0 ]; then
		fail $name "cove run -d: exit $rc, stderr '$(brief "$out/stop-run.err")'"
		show "$out/stop-run.out" "$out/stop-run.err"
		return
	fi
	i=0
	while [ "$(count_procs 'sleep 1000')" -lt 2 ] && [ $i -lt 50 ]; do
		sleep 0.2
		i=$((i + 1))
	done
	n=$(count_procs 'sleep 1000')
	if [ "$n" -lt 2 ]; then
		fail $name "after cove run -d the two 'sleep 1000' never ran (saw $n)"
		show "$out/stop-run.out" "$out/stop-run.err"
		return
	fi
	for p in /proc/[0-9]*; do
		[ "$(tr '\0' ' ' 2>/dev/null <"$p/cmdline")" = "sleep 1000 " ] || continue
		echo "vmtest: sleep ${p#/proc/} is in cgroup $(cat "$p/cgroup" 2>/dev/null)"
		break
	done
	note_cgroups
	t0=$(cut -d ' ' -f 1 /proc/uptime)
	timeout -s KILL 30 cove stop --time 2 t1 >"$out/stop.out" 2>"$out/stop.err"
	rc=$?
	t1=$(cut -d ' ' -f 1 /proc/uptime)
	took=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
	n=$(count_procs 'sleep 1000')
	echo "vmtest: cove stop --time 2 t1: exit $rc after ${took}s; 'sleep 1000' left: $n"
	if [ "$rc" != 0 ]; then
		fail $name "cove stop: exit $rc after ${took}s, stderr '$(brief "$out/stop.err")'"
		show "$out/stop.out" "$out/stop.err"
	elif awk -v t="$took" 'BEGIN { exit !(t > 10) }'; then
		fail $name "cove stop --time 2 took ${took}s"
	elif [ "$n" != 0 ]; then
		fail $name "$n 'sleep 1000' still run after cove stop"
	else
		pass $name
	fi
}

# no-cgroup-left: no cgroup named *cove* remains but, at most, an empty
# parent named exactly "cove" (no child cgroups, no processes).
check_cgroups_left() {
	name=no-cgroup-left
	left=
	for d in $(cove_cgroups); do
		if [ "${d##*/}" = cove ] && [ -z "$(find "$d" -mindepth 1 -type d)" ] &&
			[ -z "$(cat "$d/cgroup.procs" 2>/dev/null)" ]; then
			continue
		fi
		left="$left $d"
	done
	if [ "$cove_cgroups_seen" = 0 ]; then
		echo "vmtest: no cgroup named *cove* was seen while a container ran"
	fi
	if [ -z "$left" ]; then
		pass $name
	else
		fail $name "left behind:$left"
		for d in $left; do
			echo "    | $d: procs '$(tr '\n' ' ' 2>/dev/null <"$d/cgroup.procs")'"
		done
	fi
}

# doctor: cove doctor finds the cgroup v2 hierarchy and says ok.
check_doctor() {
	name=doctor
	timeout -s KILL 30 cove doctor >"$out/doctor.out" 2>"$out/doctor.err"
	rc=$?
	if grep -q '^ok  *cgroup v2 ' "$out/doctor.out"; then
		pass $name
	else
		fail $name "exit $rc, stdout '$(brief "$out/doctor.out")'"
		show "$out/doctor.out" "$out/doctor.err"
	fi
}

# cpus-limit: a detached container under --cpus 0.5 gets cpu.max
# "50000 100000" in its cgroup.
check_cpus() {
	name=cpus-limit
	timeout -s KILL 60 cove run -d --net none --cpus 0.5 --name c1 "$img" sleep 1002 >"$out/cpus.out" 2>"$out/cpus.err"
	rc=$?
	pid=
	i=0
	while [ -z "$pid" ] && [ $i -lt 50 ]; do
		for p in /proc/[0-9]*; do
			[ "$(tr '\0' ' ' 2>/dev/null <"$p/cmdline")" = "sleep 1002 " ] && pid=${p#/proc/} && break
		done
		[ -n "$pid" ] || sleep 0.2
		i=$((i + 1))
	done
	if [ -z "$pid" ]; then
		fail $name "the container never ran: exit $rc, stderr '$(brief "$out/cpus.err")'"
	else
		cg=$(sed -n 's/^0:://p' "/proc/$pid/cgroup")
		max=$(cat "/sys/fs/cgroup$cg/cpu.max" 2>&1)
		if [ "$max" = "50000 100000" ]; then
			pass $name
		else
			fail $name "cpu.max of $cg is '$max', want '50000 100000'"
		fi
	fi
	timeout -s KILL 30 cove rm -f c1 >/dev/null 2>&1
}

# exec: cove exec runs a command in a running container, in its
# namespaces, with its exit status. Eight rounds, each right after its
# detached start: on this kernel (6.1) /proc/PID/exe may name the launcher
# for a moment after Go's exec returns, and a record taken then made one
# start in ten or twenty "not running" (procstat.IdentifyStarted).
check_exec() {
	name="exec"
	round=1
	while [ $round -le 8 ]; do
		timeout -s KILL 60 cove run -d --net none --name e1 "$img" sleep 1003 >"$out/exec-run.out" 2>"$out/exec-run.err"
		timeout -s KILL 60 cove exec e1 sh -c 'hostname; exit 7' >"$out/exec.out" 2>"$out/exec.err"
		rc=$?
		if [ "$rc" != 7 ] || [ "$(cat "$out/exec.out")" != e1 ]; then
			fail $name "round $round: exit $rc (want 7), stdout '$(brief "$out/exec.out")' (want e1), stderr '$(brief "$out/exec.err")'"
			show "$out/exec-run.err"
			show_records
			timeout -s KILL 30 cove rm -f e1 >/dev/null 2>&1
			return
		fi
		timeout -s KILL 30 cove rm -f e1 >/dev/null 2>&1
		round=$((round + 1))
	done
	pass $name
}

# several-users: an image with a second user runs as it (--user 1000).
check_users() {
	name=several-users
	timeout -s KILL 120 cove run --rm --net none --user 1000 oci:/images/multiuser sh -c 'id -u; touch /home/app/x && echo wrote' >"$out/mu.out" 2>"$out/mu.err"
	rc=$?
	if [ "$rc" = 0 ] && [ "$(tr '\n' ' ' <"$out/mu.out")" = "1000 wrote " ]; then
		pass $name
	else
		fail $name "exit $rc, stdout '$(brief "$out/mu.out")' (want 1000 wrote), stderr '$(brief "$out/mu.err")'"
	fi
}

# up: cove up --no-browser prints a URL on 127.0.0.1 that answers 200.
check_up() {
	name="up-answers"
	mkdir -p /root/proj
	timeout -s KILL 240 cove up --no-browser --net none --image "$img" /root/proj >"$out/up.out" 2>"$out/up.err" &
	up=$!
	url=
	i=0
	while [ -z "$url" ] && [ $i -lt 600 ]; do
		url=$(grep -m 1 '^http://127.0.0.1:' "$out/up.out")
		[ -n "$url" ] && break
		kill -0 $up 2>/dev/null || break
		sleep 0.2
		i=$((i + 1))
	done
	# busybox's static wget crashes on this kernel; nc speaks HTTP/1.0.
	hostport=${url#http://}
	hostport=${hostport%%/*}
	path=/${url#http://*/}
	printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$path" "$hostport" |
		ask "$hostport" "$out/page"
	# The token URL answers the page (it reads the token from its
	# address); the API answers with the token in its header and refuses
	# without it.
	# The workspace's server may still be starting (the page waits for
	# it too, 502 meanwhile): asked again for up to three minutes, and a
	# slow start shows what cove up said. (The 7-73 s "starts" seen here
	# before were nc's: it closed its side as it sent, and Go's server
	# cancels a request whose client closed, see ask.)
	token=${url##*token=}
	t0=$(cut -d ' ' -f 1 /proc/uptime)
	i=0
	while [ $i -lt 360 ]; do
		printf 'GET /api/tree HTTP/1.0\r\nHost: %s\r\nX-Cove-Token: %s\r\n\r\n' "$hostport" "$token" |
			ask "$hostport" "$out/page2"
		head -n 1 "$out/page2" | grep -q ' 502 ' || break
		[ -e "$out/first502" ] || cp "$out/page2" "$out/first502"
		sleep 0.5
		i=$((i + 1))
	done
	[ $i -gt 20 ] && echo "vmtest: up-answers: a slow start; cove up said: $(brief "$out/up.err")"
	echo "vmtest: up-answers: the API answered after $i retries, $(awk -v a="$t0" -v b="$(cut -d ' ' -f 1 /proc/uptime)" 'BEGIN { printf "%.1f", b - a }')s; the first 502: $(tail -c 200 "$out/first502" 2>/dev/null | tr '\r\n' '  ')"
	printf 'GET /api/tree HTTP/1.0\r\nHost: %s\r\n\r\n' "$hostport" |
		ask "$hostport" "$out/notoken"
	got=$(head -n 1 "$out/page" | tr -d '\r')
	page=$(head -n 1 "$out/page2" | tr -d '\r')
	refused=$(head -n 1 "$out/notoken" | tr -d '\r')
	case "$got/$page/$refused" in
	"HTTP/1."?" 200 "*/"HTTP/1."?" 200 "*/"HTTP/1."?" "4??" "*) pass $name ;;
	*) fail $name "URL '$url' answered '$got', its API with the token '$page', without it '$refused' (want 200, 200, then 4xx); stderr '$(brief "$out/up.err")'"
		show_records ;;
	esac
	kill -INT $up 2>/dev/null
	wait $up
}

check_cgroup_v2
check_doctor
check_pull
check_memory
check_grower
check_cgroup_view
check_pids
check_stop
check_cpus
check_exec
check_users
check_up
check_cgroups_left
timeout -s KILL 30 cove rm -f t1 >/dev/null 2>&1

echo "vmtest: uptime $(cut -d ' ' -f 1 /proc/uptime)s"
echo "VMTEST DONE"
if [ "$failed" != 0 ]; then
	echo "vmtest: last kernel messages:"
	dmesg | tail -n 25 | sed 's/^/    | /'
	sleep 1 # let the serial port drain
fi
sync
poweroff -f
