#!/bin/bash
# Listing a large project's files as search and quick open see them: the
# in-process walk (internal/projectwalk) against
# `git ls-files --cached --others --exclude-standard -z`, which the host no
# longer runs on a project. See scripts/bench/README.md.
#
# Usage: scripts/bench/ignore.sh
#
# Environment:
#   FILES=100000        files in the generated tree (about 62% are listed:
#                       the rest are ignored by nested .gitignores)
#   RUNS=10             timed runs of each
#   IGNORE_BENCH_TREE   where the tree is generated, and kept for the next
#                       run (default /tmp/cove-bench-ignore-tree-$FILES)
#
# Prints both times per run and their ratio on stdout; progress on stderr.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
files=${FILES:-100000}
runs=${RUNS:-10}

log() { printf 'ignore.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

case $files in '' | *[!0-9]* | 0) die "FILES must be a positive integer, not '$files'" ;; esac
case $runs in '' | *[!0-9]* | 0) die "RUNS must be a positive integer, not '$runs'" ;; esac
tree=${IGNORE_BENCH_TREE:-/tmp/cove-bench-ignore-tree-$files}

# shellcheck disable=SC1091 # scripts/bench/lib.sh, checked on its own
. "$here/lib.sh"
need git git
need go "golang (or a Go toolchain in PATH) to run the benchmark"

[ -e "$tree/.git/index" ] || log "generating $files files in $tree (once; kept for the next run)"
out=$(cd "$repo" && PROJECTWALK_BENCH_FILES=$files PROJECTWALK_BENCH_TREE=$tree \
	go test ./internal/projectwalk -run '^$' -bench '^BenchmarkFiles$' -benchtime "${runs}x" -count 1 -v 2>&1) ||
	die "go test -bench failed: $out"

listed=$(printf '%s\n' "$out" | sed -n 's/.*: \([0-9]*\) files listed$/\1/p')
walk=$(printf '%s\n' "$out" | awk '$1 ~ /^BenchmarkFiles\/projectwalk/ { print $3 }')
git=$(printf '%s\n' "$out" | awk '$1 ~ /^BenchmarkFiles\/git-ls-files/ { print $3 }')
if [ -z "$walk" ] || [ -z "$git" ]; then die "no timings in the benchmark's output: $out"; fi

printf 'tree: %s files, %s listed (both list the same), %s runs each\n' "$files" "$listed" "$runs"
awk -v w="$walk" -v g="$git" 'BEGIN {
	printf "projectwalk (in-process): %8.1f ms\n", w / 1e6
	printf "git ls-files:             %8.1f ms\n", g / 1e6
	printf "ratio (walk / git):       %8.2f\n", w / g
}'
