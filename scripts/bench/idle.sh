#!/bin/bash
# What an open, idle IDE window costs: CPU seconds over IDLE seconds of
# nobody doing anything, of Chromium (headless, its own processes), of
# the launcher and of the workspace (its IDE server, git, init), for this
# tree's cove and BASE's side by side, alternating, ROUNDS times each.
# The project is this repository (a clone: a real tree and history for
# git status), the image Debian with git (test.sh's debootstrap tree).
# Then the same workspace in the background with no window (cove up
# --detach): how often its launcher wakes, and its CPU, over IDLE s.
#
# Usage: sudo scripts/bench/idle.sh
#
# Environment:
#   BASE=REV        the build compared against (default HEAD~1; "" for none)
#   IDLE=30         seconds idle per round
#   ROUNDS=2        rounds per build
#   COVE_BENCH_GIT_TREE   the image's tree (default
#                   /var/cache/cove-test/debian-bookworm-git, which
#                   scripts/test.sh makes)
#   BENCH_OUT       results file (default scripts/bench/results/idle-latest.md)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
idle=${IDLE:-30}
rounds=${ROUNDS:-2}
base=${BASE-HEAD~1}
tree=${COVE_BENCH_GIT_TREE:-/var/cache/cove-test/debian-bookworm-git}
out_md=${BENCH_OUT:-$here/results/idle-latest.md}

log() { printf 'idle.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
# shellcheck disable=SC1091 # scripts/bench/lib.sh, checked on its own
. "$here/lib.sh"

[ "$(id -u)" = 0 ] || die "must run as root (cove up starts a container)"
if [ ! -x "$tree/usr/bin/git" ]; then
	die "no Debian tree with git at $tree (scripts/test.sh makes it; or set COVE_BENCH_GIT_TREE)"
fi
if ! command -v node >/dev/null || [ ! -x /usr/bin/chromium ] || [ ! -d "$repo/ide/web/node_modules/playwright-core" ]; then
	die "needs node, /usr/bin/chromium and ide/web/node_modules (scripts/build-web.sh)"
fi
need python3 python3
crane=$(find_crane) || exit 1

tmp=$(mktemp -d /tmp/cove-bench-idle.XXXXXX)
reg_state=$tmp/registry
registry() { COVE_REGISTRY_STATE=$reg_state "$repo/scripts/registry.sh" "$@"; }
ups=()
cleanup() {
	local p
	for p in "${ups[@]}"; do kill -INT "$p" 2>/dev/null || true; done
	for p in "${ups[@]}"; do wait "$p" 2>/dev/null || true; done
	registry stop >/dev/null 2>&1 || true
	unmount_under "$tmp"
	rm -rf "$tmp"
}
trap cleanup EXIT

builds=(new)
rev=$(build_cove "$repo" "$tmp/new") || exit 1
revs=("$rev")
if [ -n "$base" ]; then
	log "building $base"
	git -C "$repo" worktree add -q --detach "$tmp/base-src" "$base" || die "no revision $base"
	build_cove "$tmp/base-src" "$tmp/base" >/dev/null || exit 1
	git -C "$repo" worktree remove --force "$tmp/base-src"
	builds+=(base)
	revs+=("$(git -C "$repo" rev-parse --short "$base")")
fi

eval "$(registry start | sed 's/^/export /')"
log "pushing $tree as an image"
tar -C "$tree" --numeric-owner -cf "$tmp/tree.tar" .
"$crane" append --insecure -f "$tmp/tree.tar" -t "$COVE_TEST_REGISTRY/idle-git:latest" >/dev/null 2>&1 || die "crane append failed"
rm -f "$tmp/tree.tar"
git clone -q "$repo" "$tmp/project"
mkdir -p "$tmp/project/.devcontainer"
printf '{"image": "%s/idle-git:latest"}\n' "$COVE_TEST_REGISTRY" >"$tmp/project/.devcontainer/devcontainer.json"

# ticks PID: CPU ticks (1/100 s) of PID and its live descendants, each
# with its reaped children's, as "TOTAL LAUNCHER".
ticks() {
	python3 - "$1" <<'PY'
import os, sys
root = int(sys.argv[1]); kids = {}; cpu = {}
for p in os.listdir("/proc"):
    if not p.isdigit(): continue
    try:
        s = open(f"/proc/{p}/stat").read()
    except OSError:
        continue
    f = s[s.rindex(")") + 2:].split()
    kids.setdefault(int(f[1]), []).append(int(p)); cpu[int(p)] = sum(int(x) for x in f[11:15])
total, todo = 0, [root]
while todo:
    p = todo.pop(); total += cpu.get(p, 0); todo += kids.get(p, [])
print(total, cpu.get(root, 0))
PY
}

results=()
for round in $(seq "$rounds"); do
	for b in "${builds[@]}"; do
		export COVE_ROOT=$tmp/root-$b
		: >"$tmp/url"
		(cd "$tmp/project" && exec "$tmp/$b" up --no-browser .) >"$tmp/url" 2>"$tmp/up.err" &
		up=$!
		ups+=("$up")
		for _ in $(seq 600); do [ -s "$tmp/url" ] && break; sleep 0.2; done
		[ -s "$tmp/url" ] || die "$b: cove up printed no URL: $(tail -3 "$tmp/up.err")"
		: >"$tmp/page"
		node "$repo/ide/web/test/idle.mjs" "$(head -n1 "$tmp/url")" "$idle" >"$tmp/page" 2>&1 &
		page=$!
		for _ in $(seq 1200); do grep -q '^ready' "$tmp/page" && break; sleep 0.1; done
		grep -q '^ready' "$tmp/page" || die "$b: the page did not come up: $(cat "$tmp/page")"
		read -r t0 l0 < <(ticks "$up")
		wait "$page" || die "$b: idle.mjs failed: $(cat "$tmp/page")"
		read -r t1 l1 < <(ticks "$up")
		chrome=$(sed -n 's/^chromium //p' "$tmp/page")
		launcher=$(awk -v a="$l0" -v b="$l1" 'BEGIN { printf "%.2f", (b - a) / 100 }')
		ws=$(awk -v a="$t0" -v b="$t1" -v c="$l0" -v d="$l1" 'BEGIN { printf "%.2f", ((b - a) - (d - c)) / 100 }')
		log "round $round, $b: chromium $chrome; launcher $launcher s; workspace $ws s"
		results+=("$b ${chrome%% *} $launcher $ws ${chrome#* }")
		kill -INT "$up"
		wait "$up" || true
	done
done

# wakes PID: the voluntary context switches of PID's threads (each a
# sleep it woke from).
wakes() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/^voluntary_ctxt_switches:/ { s += $2 } END { print s + 0 }'; }

# A workspace in the background with no window (cove up --detach: what a
# user, or their agents, keep running): its launcher's wakes and CPU over
# IDLE seconds, once per build.
detached=()
for b in "${builds[@]}"; do
	export COVE_ROOT=$tmp/root-$b
	(cd "$tmp/project" && exec "$tmp/$b" up --detach --no-browser .) >/dev/null 2>"$tmp/up.err" ||
		die "$b: cove up --detach failed: $(tail -3 "$tmp/up.err")"
	rec=$(find "$COVE_ROOT/run/workspaces" -name launcher.json | head -n1)
	[ -n "$rec" ] || die "$b: no launcher record under $COVE_ROOT/run/workspaces"
	pid=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["launcher"]["pid"])' "$rec")
	sleep 2 # its start's work done
	read -r _ l0 < <(ticks "$pid")
	w0=$(wakes "$pid")
	sleep "$idle"
	read -r _ l1 < <(ticks "$pid")
	w1=$(wakes "$pid")
	d=$(awk -v a="$l0" -v b="$l1" -v w="$((w1 - w0))" 'BEGIN { printf "%d %.2f", w, (b - a) / 100 }')
	log "detached, $b: launcher woke ${d% *} times, ${d#* } s of CPU"
	detached+=("$b $d")
	"$tmp/$b" stop "$(basename "$(dirname "$rec")")" >/dev/null 2>&1 || die "$b: cove stop failed"
done

# row BUILD: the medians of its rounds.
row() {
	printf '%s\n' "${results[@]}" | awk -v b="$1" '$1 == b { c[++n] = $2; l[n] = $3; w[n] = $4 }
		function med(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }; return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
		END { c0 = med(c, n); l0 = med(l, n); w0 = med(w, n); printf "%.2f %.2f %.2f %.2f\n", c0, l0, w0, c0 + l0 + w0 }'
}
{
	echo "# An idle IDE window, $idle s ($(date -u +%Y-%m-%d), load $(cut -d' ' -f1-3 /proc/loadavg))"
	echo
	echo "CPU seconds used while the page sat open and untouched, medians of $rounds rounds; the"
	echo "project a clone of this repository, the image Debian 12 with git; headless Chromium"
	echo "(software rendering: --disable-gpu)."
	echo
	echo "| build | Chromium | launcher | workspace | total | share of a core |"
	echo "|---|---:|---:|---:|---:|---:|"
	for i in "${!builds[@]}"; do
		read -r c l w t < <(row "${builds[$i]}")
		echo "| ${builds[$i]} (${revs[$i]}) | $c | $l | $w | $t | $(awk -v t="$t" -v s="$idle" 'BEGIN { printf "%.1f%%", 100 * t / s }') |"
	done
	echo
	echo "Each round: $(printf '%s; ' "${results[@]}")"
	echo
	echo "A workspace in the background with no window (\`cove up --detach\`), its launcher over $idle s:"
	echo
	echo "| build | launcher's wakes | launcher's CPU s |"
	echo "|---|---:|---:|"
	for i in "${!builds[@]}"; do
		for d in "${detached[@]}"; do
			read -r db dw dc <<<"$d"
			[ "$db" = "${builds[$i]}" ] && echo "| ${builds[$i]} (${revs[$i]}) | $dw | $dc |"
		done
	done
} | tee "$out_md"
