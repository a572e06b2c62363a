#!/bin/bash
# Many agents at once, measured: the time to start a task (cove agent
# --task: a branch and a tree of the project's HEAD in a workspace of
# their own, the agent's first answer from a scripted model) and the disk
# each task adds, for the first to the fourth task, beside the two ways to
# get the same apart without tasks: a full copy of the project (cp -a) and
# a fresh workspace on that copy (cove up --detach); and beside the same
# tasks made by a base build of cove (BASE), on a clone of their own, in
# turn with this tree's. The project is a real one: a clone of this
# repository (its history included). See scripts/bench/README.md.
#
# Usage: sudo scripts/bench/tasks.sh
#
# Environment:
#   TASKS=4       tasks (and copies) to start
#   BASE=REV      the build compared against (default HEAD~1; "" for none)
#   FS=xfs        everything (cove's roots, the projects, the copies) on a
#                 new XFS file system (a sparse 4 GiB file on a loop
#                 device), whose files can share their data (FICLONE)
#   KEEP=1        leave everything (the workspaces, the model, the registry)
#                 for a look; cleaned up by hand
#   PROJECT       a git repository to use as the project (default: this one)
#   BENCH_OUT     results file (default scripts/bench/results/tasks-latest.md)
#   COVE_TEST_DEBIAN
#                 a Debian tree (debootstrap --variant=minbase bookworm) the
#                 image with git is made from (default
#                 /var/cache/cove-test/debian-bookworm, as the tests use)
#   COVE_TASKS_REGISTRY_STATE
#                 state dir of scripts/registry.sh (default
#                 /tmp/cove-tasks-bench-registry); stopped (and emptied)
#                 at the end, so the image with git is built each run
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
tasks=${TASKS:-4}
base_rev=${BASE-HEAD~1}
project_src=${PROJECT:-$repo}
out_md=${BENCH_OUT:-$here/results/tasks-latest.md}
debian=${COVE_TEST_DEBIAN:-/var/cache/cove-test/debian-bookworm}
reg_state=${COVE_TASKS_REGISTRY_STATE:-/tmp/cove-tasks-bench-registry}

log() { printf 'tasks.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (namespaces, cgroups)"
[ -x "$debian/usr/bin/apt-get" ] || die "no Debian tree at $debian: debootstrap --variant=minbase bookworm $debian"
git -C "$project_src" rev-parse HEAD >/dev/null 2>&1 || die "PROJECT=$project_src is not a git repository"

# shellcheck disable=SC1091 # scripts/bench/lib.sh, checked on its own
. "$here/lib.sh"
need git git
need python3 python3
need htpasswd apache2-utils
[ -x /usr/bin/docker-registry ] || need docker-registry docker-registry
need go "golang (or a Go toolchain in PATH) to build cove"
crane=$(find_crane) || exit 1
case ${FS:-} in '' | ext4) ;; xfs) need mkfs.xfs xfsprogs ;; *) die "FS must be xfs or empty, not '$FS'" ;; esac

tmp=$(mktemp -d /tmp/cove-bench-tasks.XXXXXX)
cove=$tmp/cove
base_cove=$tmp/base-cove
export COVE_ROOT=$tmp/coveroot
registry() { COVE_REGISTRY_STATE=$reg_state "$repo/scripts/registry.sh" "$@"; }
model_pid=
cleanup() {
	if [ -n "${KEEP:-}" ]; then
		log "KEEP: left $tmp (COVE_ROOT=$COVE_ROOT), the model (pid $model_pid) and the registry running"
		return
	fi
	[ -z "$model_pid" ] || kill "$model_pid" 2>/dev/null || true
	if [ -x "$cove" ]; then
		for ((i = 1; i <= tasks; i++)); do
			"$cove" task discard "t$i" "$tmp/project" >/dev/null 2>&1 || true
			"$cove" rm -f "$tmp/copy$i" >/dev/null 2>&1 || true
		done
		"$cove" rm -f "$tmp/project" >/dev/null 2>&1 || true
		"$cove" system reset --force >/dev/null 2>&1 || true
	fi
	if [ -x "$base_cove" ]; then
		for ((i = 1; i <= tasks; i++)); do
			COVE_ROOT=$tmp/baseroot "$base_cove" task discard "t$i" "$tmp/project-base" >/dev/null 2>&1 || true
		done
		COVE_ROOT=$tmp/baseroot "$base_cove" rm -f "$tmp/project-base" >/dev/null 2>&1 || true
		COVE_ROOT=$tmp/baseroot "$base_cove" system reset --force >/dev/null 2>&1 || true
	fi
	registry stop >/dev/null 2>&1 || true
	unmount_under "$tmp"
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fs_note="$(stat -f -c %T "$tmp") (the machine's own)"
disk_note="what \`du\` finds added"
if [ "${FS:-}" = xfs ]; then
	truncate -s 4G "$tmp.xfs.img"
	mkfs.xfs -q -m reflink=1 "$tmp.xfs.img" || die "mkfs.xfs failed"
	mount -o loop "$tmp.xfs.img" "$tmp" || die "mount of the XFS image failed"
	rm -f "$tmp.xfs.img" # the loop device holds it
	fs_note="xfs (reflink, a loop device)"
	disk_note="what the file system says it uses more (\`df\`: data two files share counted once)"
fi

cove_rev=$(build_cove "$repo" "$cove") || exit 1
if [ -n "$base_rev" ]; then
	log "building $base_rev"
	git -C "$repo" worktree add -q --detach "$tmp/base-src" "$base_rev" || die "no revision $base_rev"
	build_cove "$tmp/base-src" "$base_cove" >/dev/null || exit 1
	git -C "$repo" worktree remove --force "$tmp/base-src"
	base_rev=$(git -C "$repo" rev-parse --short "$base_rev")
fi
reg_env=$(registry start) || die "scripts/registry.sh start failed"
eval "$reg_env"
addr=$COVE_TEST_REGISTRY

# The image: the Debian tree and git (tasks run git in the workspace).
img=$addr/bench/git:1
if ! "$crane" digest --insecure "$img" >/dev/null 2>&1; then
	log "making the Debian image with git (apt-get: about a minute)"
	tar -C "$debian" --exclude=./dev/* -c . | "$crane" append --insecure -f - -t "$addr/bench/debian:1" >&2 ||
		die "crane append of $debian failed"
	mkdir -p "$tmp/gitctx"
	printf 'FROM %s\nRUN apt-get update -q && apt-get install -y -q --no-install-recommends git && rm -rf /var/lib/apt/lists/*\n' \
		"$addr/bench/debian:1" >"$tmp/gitctx/Dockerfile"
	"$cove" build -q --push -t "$img" "$tmp/gitctx" >/dev/null || die "cove build of the git image failed"
	"$cove" system reset --force >/dev/null 2>&1 || true
fi

# A scripted model: every request is answered "done." at once, so the
# time measured is cove's (the tree, the workspace, one round trip).
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 - "$port" >/dev/null 2>&1 <<'EOF' &
import http.server, json, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        chunks = [{"choices": [{"index": 0, "delta": {"content": "done."}}]},
                  {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}]
        body = "".join("data: %s\n\n" % json.dumps(c) for c in chunks) + "data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
EOF
model_pid=$!
export COVE_BASE_URL=http://127.0.0.1:$port/v1 COVE_MODEL=bench COVE_API_KEY=sk-bench

git clone -q --no-hardlinks "$project_src" "$tmp/project"
project_kib=$(du -sk "$tmp/project" | cut -f1)
project_files=$(git -C "$tmp/project" ls-files | wc -l)
log "project: $project_src at $(git -C "$tmp/project" rev-parse --short HEAD), $project_files files, $project_kib KiB with .git"

"$cove" pull -q "$img" >/dev/null
secs() { python3 -c "import sys; print('%.2f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$1" "$2"; }
now() { date +%s.%N; }
# Disk used: what du finds (ext4), or on XFS what the file system says it
# uses (df), which counts data two files share once (du counts it twice).
kib() { { du -sk "$COVE_ROOT" "$tmp"/copy* 2>/dev/null || true; } | awk '{s += $1} END {print s + 0}'; }
if [ "${FS:-}" = xfs ]; then
	kib() { sync -f "$tmp"; df -k --output=used "$tmp" | tail -1 | tr -d ' '; }
fi

t0=$(now)
"$cove" up --detach --no-browser --image "$img" "$tmp/project" >/dev/null 2>&1 || die "cove up of the project failed"
main_up=$(secs "$t0" "$(now)")
if [ -x "$base_cove" ]; then
	git clone -q --no-hardlinks "$project_src" "$tmp/project-base"
	COVE_ROOT=$tmp/baseroot "$base_cove" pull -q "$img" >/dev/null
	COVE_ROOT=$tmp/baseroot "$base_cove" up --detach --no-browser --image "$img" "$tmp/project-base" >/dev/null 2>&1 ||
		die "cove up of the project by the base build failed"
fi

# used ROOT: the disk used under ROOT (du), or on XFS by the file system.
used() { if [ "${FS:-}" = xfs ]; then kib; else du -sk "$1" | cut -f1; fi; }

# run_task COVE ROOT PROJECT I: task tI of PROJECT by COVE with its
# COVE_ROOT; sets started_s (until cove says the task's branch is made in
# its workspace, the agent about to run: that line's time is noted as it
# comes), task_s (the whole run: the agent's first answer and the commit)
# and task_kib (the disk it added: used).
run_task() {
	local c=$1 root=$2 project=$3 i=$4 before answer out mark
	out=$tmp/agent-${root##*/}-$i.log mark=$tmp/started-${root##*/}-$i
	before=$(used "$root")
	t0=$(now)
	answer=$(COVE_ROOT=$root "$c" agent --yes --image "$img" --task "t$i" -p "task $i" "$project" </dev/null \
		2> >(while IFS= read -r line; do
			case $line in *"task t$i: branch cove/task/t$i from"*) now >"$mark" ;; esac
			printf '%s\n' "$line"
		done >"$out")) ||
		die "cove agent --task t$i ($c) failed: $(tail -5 "$out")"
	[ "$answer" = done. ] || die "cove agent --task t$i ($c) answered '$answer'"
	task_s=$(secs "$t0" "$(now)")
	for _ in $(seq 100); do [ -s "$mark" ] && break; sleep 0.01; done
	[ -s "$mark" ] || die "cove agent --task t$i ($c) did not say its branch was made: $(tail -5 "$out")"
	started_s=$(secs "$t0" "$(cat "$mark")")
	task_kib=$(($(used "$root") - before))
}

rows=()
for ((i = 1; i <= tasks; i++)); do
	base_cols="| - | - | - |"
	if [ -x "$base_cove" ]; then
		run_task "$base_cove" "$tmp/baseroot" "$tmp/project-base" "$i"
		base_cols="| $started_s | $task_s | $task_kib |"
		log "task $i, base build: started ${started_s}s, with the answer and commit ${task_s}s, ${task_kib} KiB"
	fi
	run_task "$cove" "$COVE_ROOT" "$tmp/project" "$i"

	before=$(kib)
	t0=$(now)
	cp -a "$tmp/project" "$tmp/copy$i"
	copy_s=$(secs "$t0" "$(now)")
	copy_kib=$(($(kib) - before))
	before=$(kib)
	t0=$(now)
	"$cove" up --detach --no-browser --image "$img" "$tmp/copy$i" >/dev/null 2>&1 || die "cove up of copy $i failed"
	up_s=$(secs "$t0" "$(now)")
	up_kib=$(($(kib) - before))
	rows+=("| $i | $started_s | $task_s | $task_kib $base_cols $copy_s | $copy_kib | $up_s | $up_kib | $(python3 -c "print('%.2f' % ($copy_s + $up_s))") | $((copy_kib + up_kib)) |")
	log "task $i: started ${started_s}s, with the answer and commit ${task_s}s, ${task_kib} KiB; copy ${copy_s}s ${copy_kib} KiB + fresh workspace ${up_s}s ${up_kib} KiB"
done

{
	echo "# Tasks: start time and disk per task (cove $cove_rev, $(date -u +%Y-%m-%d), $(nproc) cores)"
	echo
	echo "Project: a clone of $(basename "$project_src") ($project_files files, $project_kib KiB with .git); image: Debian bookworm minbase + git; file system: $fs_note."
	echo "The project's own workspace started in ${main_up}s. Each row starts task N (\`cove agent --task tN -p\`, a scripted model answering at once):"
	echo "started is until cove says the task's branch is checked out in its workspace, its agent about to run; the whole run adds the agent's"
	echo "first answer and the commit. The base build ($base_rev) makes the same tasks on a clone of its own, just before. Then, to compare, a full copy"
	echo "of the project (\`cp -a\`) and a fresh workspace on it (\`cove up --detach\`). Disk: $disk_note."
	echo
	echo "| N | task started (s) | task, whole run (s) | task (KiB) | base: started (s) | base: whole run (s) | base: task (KiB) | cp -a (s) | cp -a (KiB) | fresh workspace (s) | fresh workspace (KiB) | copy + workspace (s) | copy + workspace (KiB) |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
	printf '%s\n' "${rows[@]}"
} | tee "$out_md"
