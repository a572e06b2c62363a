#!/bin/bash
# The checks of the Debian 12 test VM (scripts/vmdebian.sh), run by the
# cove-vmtest unit as root from the data disk. They run twice: as the
# user `cove` inside its systemd user manager (systemd-run --user: the
# delegated cgroup subtree a login gets), then as root (the system slice).
# The limits run a third time in a login session (su -l: session-N.scope,
# as ssh gives), where cove must ask the user's systemd for a scope.
# Each prints one line on the serial console:
#   VMTEST PASS MODE/NAME | VMTEST FAIL MODE/NAME: detail
# "vmtest: " lines are information; "    | " lines show a failed command.
#
#   guest.sh              (root) set up, run both, print VMTEST DONE
#   guest.sh checks MODE  run the checks as MODE: user (in the user's
#                         systemd), login (in a login session: the limits
#                         only) or root
set -u
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
data=/mnt/cove
user=cove
uid=1000

# bounded MODE CMD...: runs one mode's checks for at most 170 s (they
# take 30-60 s here) and says how they ended.
bounded() {
	local mode=$1 t0 rc
	shift
	t0=$(cut -d ' ' -f 1 /proc/uptime)
	timeout -k 5 170 "$@"
	rc=$?
	echo "vmtest: the $mode checks ended with $rc after $(awk -v a="$t0" -v b="$(cut -d ' ' -f 1 /proc/uptime)" 'BEGIN { printf "%.1f", b - a }')s"
	if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
		echo "VMTEST FAIL $mode/bounded: its checks did not end in 170 s; the last line above is the last that ended"
	fi
}

if [ "${1:-}" != checks ]; then
	echo
	# shellcheck disable=SC1091
	echo "vmtest: $(. /etc/os-release && echo "$PRETTY_NAME"), kernel $(uname -r), systemd $(systemctl --version | awk 'NR == 1 { print $2 }'), uptime $(cut -d ' ' -f 1 /proc/uptime)s"
	echo "vmtest: /sys/fs/cgroup is $(stat -f -c %T /sys/fs/cgroup); controllers: $(cat /sys/fs/cgroup/cgroup.controllers)"
	install -m 0755 "$data/cove" /usr/local/bin/cove
	modprobe overlay 2>/dev/null
	# The user's systemd (lingering) and its bus.
	for _ in $(seq 1 120); do
		[ -S /run/user/$uid/bus ] && break
		sleep 0.5
	done
	echo "vmtest: user@$uid.service is $(systemctl is-active user@$uid.service); delegated: $(systemctl show -P Delegate user@$uid.service) ($(systemctl show -P DelegateControllers user@$uid.service))"
	# Each mode is bounded, well inside the VM's timeout: a hang in one
	# is a failure of its own, and the others still run and say theirs.
	bounded user runuser -u "$user" -- env XDG_RUNTIME_DIR=/run/user/$uid DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/$uid/bus \
		systemd-run --user --wait --pipe --quiet --collect --unit cove-checks "$0" checks user
	# A login session (ssh, the console, su -l) has a cgroup of root's
	# (session-N.scope): cove must get one of the user's systemd.
	bounded login su -l "$user" -c "$0 checks login"
	bounded root "$0" checks root
	echo "vmtest: uptime $(cut -d ' ' -f 1 /proc/uptime)s"
	echo "VMTEST DONE"
	exit 0
fi

mode=$2
export HOME=${HOME:-/root} # a system service has none
out=$(mktemp -d "/tmp/vmtest-$mode.XXXXXX")
busybox=oci:$data/images/busybox
multiuser=oci:$data/images/multiuser
cd /tmp || exit 1

pass() { echo "VMTEST PASS $mode/$1"; }
fail() { echo "VMTEST FAIL $mode/$1: $2"; }
show() {
	for f in "$@"; do
		[ -s "$f" ] && head -n 30 "$f" | sed 's/^/    | /'
	done
	return 0
}
brief() { head -n 3 "$1" | tr '\n' ' ' | cut -c 1-240; }
# since T0: seconds since uptime T0, one decimal.
since() { awk -v a="$1" -v b="$(cut -d ' ' -f 1 /proc/uptime)" 'BEGIN { printf "%.1f", b - a }'; }
# run NAME SECONDS CMD...: runs cove's command with a bound, output to
# $out/NAME.out and .err; sets rc.
run() {
	local n=$1 t=$2
	shift 2
	timeout -s KILL "$t" "$@" >"$out/$n.out" 2>"$out/$n.err"
	rc=$?
}
own=$(sed -n 's/^0:://p' /proc/self/cgroup)
echo "vmtest: $mode: $(id -un) in cgroup $own; cove $(cove version | head -n 1)"

# doctor: cove doctor says cgroups (and, as the user, user namespaces and
# newuidmap) are usable.
run doctor 60 cove doctor
want=("cgroup v2")
[ "$mode" != root ] && want+=("user namespaces" "newuidmap")
miss=
for w in "${want[@]}"; do
	grep -q "^ok  *$w " "$out/doctor.out" || miss="$miss '$w'"
done
# Linux 6.1 throttles a container over its --cpus quota inside the
# kernel: doctor says so, and what to do.
grep -q "^note  *--cpus .*--cpus at 1 or more.*6\.18" "$out/doctor.out" || miss="$miss 'the --cpus note'"
if [ -z "$miss" ]; then pass doctor; else
	fail doctor "no line for$miss"
	show "$out/doctor.out" "$out/doctor.err"
fi

# pull: both test images, each giving its digest.
ok=1
for i in "$busybox" "$multiuser"; do
	run pull 180 cove pull "$i"
	grep -qE '^sha256:[0-9a-f]{64}$' "$out/pull.out" || {
		ok=0
		fail pull "$i: exit $rc, stderr '$(brief "$out/pull.err")'"
	}
done
[ $ok = 1 ] && pass pull

# memory-limit: an allocation loop under --memory 32m is killed: 137 and
# cove's message.
# shellcheck disable=SC2016 # expanded in the container
run mem 180 cove run --rm --net none --memory 32m "$busybox" sh -c 'x=a; while true; do x="$x$x"; done'
if [ "$rc" = 137 ] && grep -qF 'killed: out of memory (limit 32 MiB)' "$out/mem.err"; then pass memory-limit; else
	fail memory-limit "exit $rc (want 137 and the message), stderr '$(brief "$out/mem.err")'"
fi

# oom-takes-the-grower: past the limit the kernel kills the process that
# grew, not cove's init (which sheds what it touched while starting):
# the shell that ran it goes on and says so. /dev/shm filled first leaves
# dd's buffer some 14 MB, less than an unshed init's 24-28 MB.
# shellcheck disable=SC2016 # expanded in the container
run grower 180 cove run --rm --net none --memory 48m "$busybox" sh -c \
	'head -c 28m /dev/zero >/dev/shm/fill; dd if=/dev/zero of=/dev/null bs=24M count=4 2>/dev/null; echo "survived $?"'
# The shell's line is what tells (init killed first prints nothing); the
# kernel may kill again in the window before dd's memory is freed.
if [ "$(cat "$out/grower.out")" = "survived 137" ]; then
	pass oom-takes-the-grower
else
	fail oom-takes-the-grower "exit $rc, stdout '$(brief "$out/grower.out")' (want 'survived 137'), stderr '$(brief "$out/grower.err")'"
fi

# net-host-limits: with the host's network (/sys is then the host's,
# read-only) the container still sees its own limit at /sys/fs/cgroup.
run nethost 180 cove run --rm --net host --memory 32m "$busybox" cat /sys/fs/cgroup/memory.max
if [ "$rc" = 0 ] && [ "$(cat "$out/nethost.out")" = 33554432 ]; then pass net-host-limits; else
	fail net-host-limits "exit $rc, stdout '$(brief "$out/nethost.out")' (want 33554432), stderr '$(brief "$out/nethost.err")'"
fi

# pids-limit: 100 background sleeps under --pids 32: at most 32 run.
# shellcheck disable=SC2016
script='sh -c '\''i=0; while [ $i -lt 100 ]; do sleep 5 & i=$((i+1)); done'\'' >/dev/null 2>&1
max=0
for t in 1 2 3; do set -- /proc/[0-9]*; [ $# -gt $max ] && max=$#; done
echo "procs=$max"'
run pids 180 cove run --rm --net none --pids 32 "$busybox" sh -c "$script"
procs=$(sed -n 's/^procs=//p' "$out/pids.out")
if [ "$rc" = 0 ] && [ -n "$procs" ] && [ "$procs" -ge 2 ] && [ "$procs" -le 32 ]; then pass pids-limit; else
	fail pids-limit "exit $rc, processes seen '${procs:-none}' (want 2..32), stderr '$(brief "$out/pids.err")'"
fi

# cpus-limit and stop-kills-tree: a detached container under --cpus 1.5
# whose shell and children ignore SIGTERM; its cgroup's cpu.max says 150%,
# and cove stop leaves none of it. The container is found through cove ps
# and its cgroup, not by reading every process's cmdline: such a read
# waits on that process's memory lock, and a process throttled by the
# limit under TCG can hold it long enough to eat the VM's whole timeout
# (a CI run hung here). Not 0.5 CPUs: a CI run hung here again, the whole
# VM silent for 430 s (no check's timeout printed). Linux 6.1 throttles a
# task while it is in the kernel, holding what it holds (a percpu rwsem
# such as cgroup_threadgroup_rwsem in a fork: a writer waits, then every
# fork of the VM), "even whole system hung" (the "sched/fair: Switch to
# task based throttle model" series, 2025, throttles on the way back to
# user space instead); under TCG init's start alone goes past half a CPU.
# The check is that cove writes cpu.max, whatever the value.
t0=$(cut -d ' ' -f 1 /proc/uptime)
run stoprun 120 cove run -d --net none --cpus 1.5 --name t1 "$busybox" sh -c 'trap "" TERM; sleep 1001 & sleep 1001 & wait'
echo "vmtest: $mode: cove run -d: exit $rc after $(since "$t0")s"
p=
cg=
n=0
for _ in $(seq 1 100); do
	[ "$rc" = 0 ] || break
	p=$(cove ps --json 2>/dev/null | sed -n '/"name": "t1"/,/}/s/^ *"pid": \([0-9]*\).*/\1/p' | head -n 1)
	if [ -n "$p" ] && [ "$p" != 0 ]; then
		cg=$(sed -n 's/^0:://p' "/proc/$p/cgroup" 2>/dev/null)
		n=$(wc -l <"/sys/fs/cgroup$cg/cgroup.procs" 2>/dev/null || echo 0)
		# the shell and its two sleeps
		[ -n "$cg" ] && [ "$n" -ge 3 ] && break
	fi
	sleep 0.2
done
if [ -z "$cg" ] || [ "$n" -lt 3 ]; then
	fail cpus-limit "the detached container never ran: exit $rc, pid '${p:-none}', cgroup '${cg:-none}' with $n processes, stderr '$(brief "$out/stoprun.err")'"
	fail stop-kills-tree "nothing to stop"
else
	echo "vmtest: $mode: the container's cgroup is $cg ($n processes)"
	cpumax=$(cat "/sys/fs/cgroup$cg/cpu.max" 2>&1)
	if [ "$cpumax" = "150000 100000" ]; then pass cpus-limit; else fail cpus-limit "cpu.max of $cg is '$cpumax', want '150000 100000'"; fi
	t0=$(cut -d ' ' -f 1 /proc/uptime)
	run stop 60 cove stop --time 2 t1
	took=$(since "$t0")
	left=$(tr '\n' ' ' <"/sys/fs/cgroup$cg/cgroup.procs" 2>/dev/null)
	echo "vmtest: $mode: cove stop --time 2 t1: exit $rc after ${took}s; left in $cg: '${left}'"
	if [ "$rc" = 0 ] && [ -z "$left" ]; then pass stop-kills-tree; else
		fail stop-kills-tree "cove stop: exit $rc after ${took}s, processes left in $cg: '${left}', stderr '$(brief "$out/stop.err")'"
	fi
fi
cove rm -f t1 >/dev/null 2>&1
if [ "$mode" = login ]; then
	# build-has-a-cgroup: cove build's RUN gets a cgroup here too.
	mkdir -p "$out/ctx"
	printf 'FROM %s\nRUN echo built >/built\n' "$busybox" >"$out/ctx/Dockerfile"
	run build 300 cove build -t login-build:1 "$out/ctx"
	if [ "$rc" = 0 ] && ! grep -q 'no cgroup' "$out/build.err"; then pass build-has-a-cgroup; else
		fail build-has-a-cgroup "exit $rc, stderr '$(grep -m 1 -E 'warning|cove:' "$out/build.err" | cut -c 1-240)'"
	fi
	# The limits are what differs in a login session; the rest is the
	# user's, checked above.
	rm -rf "$out"
	exit 0
fi

# several-users: an image with a second user (uid 1000 inside) runs as it,
# and what it writes is owned by it: as the user, through the subuid range
# (the host sees 100000 + 999).
run mu 180 cove run --name mu --net none "$multiuser" sh -c \
	'mkdir /srv/d && chown app:app /srv/d && su -s /bin/sh app -c "id -u >/srv/d/who" && cat /srv/d/who && ls -ln /home | tail -n 1'
echo "vmtest: $mode: in the multi-user image: $(tr '\n' ' ' <"$out/mu.out")"
who=$(find "${XDG_DATA_HOME:-$HOME/.local/share}/cove/containers" /var/lib/cove/containers -path '*/upper/srv/d/who' 2>/dev/null | head -n 1)
want_owner=1000
[ "$mode" = user ] && want_owner=100999
if [ "$rc" = 0 ] && [ "$(head -n 1 "$out/mu.out")" = 1000 ] && [ -n "$who" ] && [ "$(stat -c %u "$who")" = "$want_owner" ]; then
	pass several-users
else
	fail several-users "exit $rc, stdout '$(brief "$out/mu.out")', stderr '$(brief "$out/mu.err")', the file on the host: '${who:-none}' owned by $( [ -n "$who" ] && stat -c %u "$who") (want $want_owner)"
fi
run murm 60 cove rm mu
if [ "$rc" = 0 ] && [ -z "$(find "${XDG_DATA_HOME:-$HOME/.local/share}/cove/containers" /var/lib/cove/containers -path '*/upper/srv/d' 2>/dev/null)" ]; then
	pass rm-container
else
	fail rm-container "cove rm mu: exit $rc, stderr '$(brief "$out/murm.err")'"
fi

# build-keeps-owners: a RUN's 0700 directory of the image's second user
# is built (the layer is read in the user namespace as the user) and
# stored with its owner: app's inside, as root's build gives.
mkdir -p "$out/octx"
printf 'FROM %s\nRUN mkdir -m 700 /srv/p && chown app:app /srv/p && su -s /bin/sh app -c "echo x >/srv/p/f"\n' "$multiuser" >"$out/octx/Dockerfile"
run obuild 300 cove build -q -t owners:1 "$out/octx"
run orun 120 cove run --rm --net none owners:1 stat -c %U:%a /srv/p /srv/p/f
if [ "$rc" = 0 ] && [ "$(tr '\n' ' ' <"$out/orun.out")" = "app:700 app:644 " ]; then pass build-keeps-owners; else
	fail build-keeps-owners "exit $rc, stdout '$(brief "$out/orun.out")' (want app:700 app:644), stderr '$(brief "$out/orun.err")', build: '$(brief "$out/obuild.err")'"
fi

# workspace: cove up --no-browser prints a URL that answers; a file made
# in /workspace is the project owner's on the host; files owned by other
# ids in its layer go with cove rm.
proj=/home/$user/proj-$mode
mkdir -p "$proj"
[ "$mode" = root ] && chown "$user:$user" "$proj"
timeout -s KILL 300 cove up --no-browser --net none --image "$busybox" "$proj" >"$out/up.out" 2>"$out/up.err" &
up=$!
url=
for _ in $(seq 1 600); do
	url=$(grep -m 1 '^http://127.0.0.1:' "$out/up.out")
	[ -n "$url" ] && break
	kill -0 $up 2>/dev/null || break
	sleep 0.2
done
# The token URL answers the page (it reads the token from its address);
# the API answers with the token in its header and refuses without it.
base=${url%%/?token=*}
token=${url##*token=}
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 60 "$url")
# The workspace's server may still be starting (the page waits for it
# too, 502 meanwhile): asked again for up to a minute.
for _ in $(seq 1 120); do
	api=$(curl -s -o /dev/null -w '%{http_code}' --max-time 60 -H "X-Cove-Token: $token" "$base/api/tree")
	[ "$api" = 502 ] || break
	sleep 0.5
done
refused=$(curl -s -o /dev/null -w '%{http_code}' --max-time 30 "$base/api/tree")
if [ -n "$url" ] && [ "$code" = 200 ] && [ "$api" = 200 ] && [ "${refused#4}" != "$refused" ]; then pass up-answers; else
	fail up-answers "URL '${url}': HTTP ${code:-none} (want 200), its API with the token ${api:-none} (want 200), without ${refused:-none} (want 4xx); stderr '$(brief "$out/up.err")'"
fi
ws=$(cove ps --json | sed -n 's/^ *"name": "\(proj-'"$mode"'-[0-9a-f]*\)".*/\1/p' | head -n 1)
echo "vmtest: $mode: workspace ${ws:-none}"
run wsfile 60 cove exec "$ws" sh -c 'echo hi >/workspace/made-inside && mkdir -p /srv/sub/deep && echo x >/srv/sub/deep/f && chown -R 1000:1000 /srv/sub'
owner=$(stat -c %U "$proj/made-inside" 2>&1)
if [ "$rc" = 0 ] && [ "$owner" = "$user" ]; then pass workspace-files-are-the-users; else
	fail workspace-files-are-the-users "exit $rc, made-inside owned by '$owner' (want $user), stderr '$(brief "$out/wsfile.err")'"
fi
kill -INT $up
wait $up
layer=$(find "${XDG_DATA_HOME:-$HOME/.local/share}/cove/workspaces" /var/lib/cove/workspaces -maxdepth 1 -name "$ws" 2>/dev/null | head -n 1)
echo "vmtest: $mode: layer ${layer:-none}: /srv/sub owned by $(stat -c %u "$layer/upper/srv/sub" 2>&1)"
run wsrm 120 cove rm "$ws"
if [ "$rc" = 0 ] && [ -n "$layer" ] && [ ! -e "$layer" ]; then pass rm-workspace; else
	fail rm-workspace "cove rm $ws: exit $rc, layer '${layer:-none}' $( [ -e "$layer" ] && echo still there), stderr '$(brief "$out/wsrm.err")'"
fi

# remote-user: devcontainer.json's remoteUser is not root (app, uid 1000
# in the multi-user image): its commands run as app under the workspace's
# limit, it writes the project, and what it makes there is the project
# owner's on the host (as the user: keep-id; as root: the ID-mapped bind).
kproj=/home/$user/kproj-$mode
mkdir -p "$kproj"
printf '{"image": "%s", "remoteUser": "app"}\n' "$multiuser" >"$kproj/.devcontainer.json"
[ "$mode" = root ] && chown -R "$user:$user" "$kproj"
# The image is a file here (an OCI layout on the data disk), which only a
# trusted devcontainer.json may name.
run kup 300 cove up --detach --trust --net none --memory 64m "$kproj"
kws=$(cove ps --json | sed -n 's/^ *"name": "\(kproj-'"$mode"'-[0-9a-f]*\)".*/\1/p' | head -n 1)
run kexec 60 cove exec "$kws" sh -c 'id -u && touch /workspace/by-app && cat /sys/fs/cgroup/memory.max'
owner=$(stat -c %U "$kproj/by-app" 2>&1)
if [ "$rc" = 0 ] && [ "$(sed -n 1p "$out/kexec.out")" = 1000 ] && [ "$(sed -n 2p "$out/kexec.out")" = 67108864 ] && [ "$owner" = "$user" ]; then pass remote-user; else
	fail remote-user "workspace '${kws:-none}': exit $rc, stdout '$(brief "$out/kexec.out")' (want 1000 and 67108864), by-app owned by '$owner' (want $user), stderr '$(brief "$out/kexec.err")', up: '$(brief "$out/kup.err")'"
fi
cove stop --time 2 "$kws" >/dev/null 2>&1
run krm 120 cove rm -f "$kws"
if [ "$rc" != 0 ]; then fail remote-user-rm "cove rm $kws: exit $rc, stderr '$(brief "$out/krm.err")'"; fi

# no-cgroup-left: under the user's slice (or, as root, anywhere) no cgroup
# of cove's is left but empty parents named cove.
scope=/sys/fs/cgroup
[ "$mode" = user ] && scope=/sys/fs/cgroup/user.slice/user-$uid.slice
left=
while read -r d; do
	[ -n "$d" ] || continue
	if [ "${d##*/}" = cove ] && [ -z "$(find "$d" -mindepth 1 -type d)" ] && [ -z "$(cat "$d/cgroup.procs")" ]; then
		continue
	fi
	left="$left $d"
done < <(find "$scope" -mindepth 1 -type d -name '*cove*' ! -name 'cove-checks.service' ! -name 'cove-vmtest.service' 2>/dev/null)
if [ -z "$left" ]; then pass no-cgroup-left; else fail no-cgroup-left "left:$left"; fi

# reset: cove system reset leaves none of cove's directories (files of
# the subordinate ids included).
run reset 300 cove system reset --force
state="${XDG_DATA_HOME:-$HOME/.local/share}/cove ${XDG_CACHE_HOME:-$HOME/.cache}/cove"
[ "$mode" = root ] && state=/var/lib/cove
left=
for d in $state; do [ -e "$d" ] && left="$left $d"; done
if [ "$rc" = 0 ] && [ -z "$left" ]; then pass reset; else
	fail reset "exit $rc, left:${left:- nothing}, stderr '$(brief "$out/reset.err")'"
fi
rm -rf "$out"
