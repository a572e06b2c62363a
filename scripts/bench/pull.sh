#!/bin/bash
# Cold image pull + flatten, side by side: cove, crane export | tar,
# skopeo + umoci, podman. See scripts/bench/README.md.
#
# Usage: sudo scripts/bench/pull.sh            (as root: it mounts a loop fs)
#
# Environment:
#   ROUNDS=5            rounds; every tool runs once per round, cold (fresh
#                       output directory), in an order that rotates per round
#   BENCH_FS_SIZE=8G    size of the sparse ext4 image the outputs go to
#   PODMAN_DRIVER       overlay (default; vfs if overlay does not work)
#   BENCH_OUT           results file (default scripts/bench/results/pull-latest.md)
#   BUSY=0              busy loops (one CPU each) the benchmark itself runs
#                       through every round: the same load for every tool,
#                       for "busy" numbers that do not depend on what else
#                       the machine does
#   COVE_BENCH_CACHE, COVE_BENCH_REGISTRY_STATE, DEBIAN_MIRROR, CRANE:
#                       passed on to mkimage.sh
#
# The markdown report goes to stdout and to BENCH_OUT; progress to stderr.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
rounds=${ROUNDS:-5}
fs_size=${BENCH_FS_SIZE:-8G}
out_md=${BENCH_OUT:-$here/results/pull-latest.md}
cache=${COVE_BENCH_CACHE:-/var/cache/cove-bench}
export COVE_BENCH_CACHE=$cache
reg_state=${COVE_BENCH_REGISTRY_STATE:-/tmp/cove-bench-registry}
export COVE_BENCH_REGISTRY_STATE=$reg_state

log() { printf 'pull.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

case $rounds in '' | *[!0-9]* | 0) die "ROUNDS must be a positive integer, not '$rounds'" ;; esac
busy=${BUSY:-0}
case $busy in '' | *[!0-9]*) die "BUSY must be a number of busy loops, not '$busy'" ;; esac
[ "$(id -u)" = 0 ] || die "must run as root (loop mount; podman and umoci as root)"

# ------------------------------------------------------------ tools

# shellcheck disable=SC1091 # scripts/bench/lib.sh, checked on its own
. "$here/lib.sh"
need /usr/bin/time time # GNU time, for peak RSS
crane=$(find_crane) || exit 1
need go "golang (or a Go toolchain in PATH) to build cove"
need skopeo skopeo
need umoci umoci
need podman podman
need mkfs.ext4 e2fsprogs
need tar tar
need du coreutils
need md5sum coreutils

tmp=$(mktemp -d /tmp/cove-bench-pull.XXXXXX)
mnt=$tmp/mnt

busy_pids=()
cleanup() {
	[ ${#busy_pids[@]} -eq 0 ] || kill "${busy_pids[@]}" 2>/dev/null || true
	unmount_under "$mnt"
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log "building cove"
(cd "$repo" && go build -tags urfave_cli_no_docs -o "$tmp/cove" ./cmd/cove) || die "go build ./cmd/cove failed"
cove=$tmp/cove
cove_rev=$(cd "$repo" && git rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ -n "$(cd "$repo" && git status --porcelain --untracked-files=no -- . ':!scripts' 2>/dev/null)" ]; then
	cove_rev="$cove_rev (+ uncommitted changes)"
fi

log "making sure the images are built and pushed (scripts/bench/mkimage.sh)"
t0=$(date +%s)
mk_out=$("$here/mkimage.sh") || die "mkimage.sh failed"
image_a=$(printf '%s\n' "$mk_out" | sed -n 's/^IMAGE_A=//p')
image_b=$(printf '%s\n' "$mk_out" | sed -n 's/^IMAGE_B=//p')
image_c=$(printf '%s\n' "$mk_out" | sed -n 's/^IMAGE_C=//p')
{ [ -n "$image_a" ] && [ -n "$image_b" ] && [ -n "$image_c" ]; } ||
	die "mkimage.sh did not print IMAGE_A=, IMAGE_B= and IMAGE_C="
log "mkimage.sh took $(($(date +%s) - t0)) s; images $image_a $image_b $image_c"

# Keep the registry's blobs in the page cache so no tool pays for the disk.
find "$reg_state" -path '*/storage/*' -type f -exec cat {} + >/dev/null 2>&1 || true

# ------------------------------------------------------------ output fs

log "creating a $fs_size ext4 loop file system for the outputs"
truncate -s "$fs_size" "$tmp/fs.img"
mkfs.ext4 -q -F -E nodiscard,lazy_itable_init=0,lazy_journal_init=0 "$tmp/fs.img"
mkdir -p "$mnt"
mount -o loop,noatime "$tmp/fs.img" "$mnt"
mkdir -p "$mnt/tmp"
# Big temporary files (podman stages blobs in $TMPDIR, default /var/tmp) go
# to the loop fs as well.
export TMPDIR=$mnt/tmp

podman_driver=${PODMAN_DRIVER:-overlay}
if ! podman --root "$mnt/probe" --runroot "$mnt/probe-run" --storage-driver "$podman_driver" \
	info >/dev/null 2>"$tmp/probe.err"; then
	log "podman with --storage-driver $podman_driver does not work here ($(head -c 300 "$tmp/probe.err")); using vfs"
	podman_driver=vfs
fi
unmount_under "$mnt/probe"
unmount_under "$mnt/probe-run"
rm -rf "$mnt/probe" "$mnt/probe-run"
podman_() { # podman_ DIR ARGS...
	local d=$1
	shift
	podman --root "$d/root" --runroot "$d/run" --storage-driver "$podman_driver" "$@"
}

# ------------------------------------------------------------ helpers

# timed NAME CMD...: runs CMD under GNU time; sets T_SEC, T_KB, T_OUT
# (its stdout); on failure prints its stderr and returns 1.
timed() {
	local name=$1
	shift
	sync
	if ! /usr/bin/time -f '%e %M' -o "$tmp/time" "$@" >"$tmp/stdout" 2>"$tmp/stderr"; then
		log "$name FAILED: $*"
		sed 's/^/    /' "$tmp/stderr" >&2
		cp "$tmp/stderr" "$tmp/fail-$name"
		return 1
	fi
	read -r T_SEC T_KB <"$tmp/time"
	T_OUT=$(cat "$tmp/stdout")
}

# Files a correct rootfs of the image must (not) have.
check_rootfs() { # check_rootfs DIR VARIANT(a|b|c)
	local d=$1 v=$2 p wh
	[ -d "$d" ] || { echo "no rootfs directory $d"; return 1; }
	for p in usr/bin/gcc-12 usr/bin/make usr/bin/git usr/bin/curl etc/cove-bench usr/lib/x86_64-linux-gnu/libc.so.6; do
		if [ "$v" = b ] && { [ "$p" = usr/bin/git ] || [ "$p" = usr/bin/curl ]; }; then continue; fi
		[ -e "$d/$p" ] || { echo "missing $p"; return 1; }
	done
	[ -L "$d/usr/bin/gcc" ] || { echo "usr/bin/gcc is not a symlink"; return 1; }
	if [ "$v" = a ] || [ "$v" = c ]; then
		for p in usr/share/info usr/share/doc/bash usr/share/common-licenses/GPL-1; do
			[ ! -e "$d/$p" ] || { echo "$p should be deleted by a whiteout"; return 1; }
		done
	fi
	if [ "$v" = a ]; then
		# What layer 4 of c changes must be as a has it (c must not have
		# changed its base).
		[ -e "$d/etc/motd" ] || { echo "missing etc/motd"; return 1; }
		[ "$(stat -c %a "$d/etc/cove-bench")" = 644 ] || { echo "etc/cove-bench is not mode 644"; return 1; }
		if [ -e "$d/usr/bin/jq" ] || [ -e "$d/opt/cove-bench" ]; then
			echo "files of image c in image a"
			return 1
		fi
		! grep -q 'image c' "$d/etc/issue" || { echo "etc/issue has image c's line"; return 1; }
	elif [ "$v" = c ]; then
		[ -x "$d/usr/bin/jq" ] || { echo "missing usr/bin/jq"; return 1; }
		for p in etc/motd usr/share/doc/make; do
			[ ! -e "$d/$p" ] || { echo "$p should be deleted by a whiteout in layer 4"; return 1; }
		done
		[ "$(stat -c %a "$d/etc/cove-bench")" = 600 ] || { echo "etc/cove-bench is not mode 600"; return 1; }
		grep -q 'image c' "$d/etc/issue" || { echo "etc/issue lacks image c's line"; return 1; }
		[ "$d/opt/cove-bench/README" -ef "$d/opt/cove-bench/README.link" ] ||
			{ echo "opt/cove-bench/README.link is not a hardlink of README"; return 1; }
	else
		[ -x "$d/usr/bin/vim.tiny" ] || { echo "missing usr/bin/vim.tiny"; return 1; }
		if [ -e "$d/etc/apt/apt.conf.d/01autoremove" ] || [ ! -e "$d/etc/apt/apt.conf.d/99bench" ]; then
			echo "etc/apt/apt.conf.d should hold only 99bench (an opaque directory in layer 3)"
			return 1
		fi
	fi
	wh=$(find "$d" -name '.wh.*' -print -quit)
	[ -z "$wh" ] || { echo "whiteout file left in the tree: $wh"; return 1; }
}

# manifest DIR: one line per entry (type, mode, owner, size, links, path,
# symlink target) and the md5 of every regular file; /dev /proc /sys not
# descended into, the root directory itself left out. "links" counts the
# names of the file inside DIR, not st_nlink: a rootfs may share files with
# another image's (cove's copy of a base, overlay layers).
manifest() {
	(
		cd "$1"
		find . -mindepth 1 \( -path ./dev -o -path ./proc -o -path ./sys \) -prune -o \
			\( -type f -printf '%D:%i %y %m %U:%G %s\t%p\n' -o -type l -printf '%y %U:%G %p -> %l\n' \
			-o -printf '%y %m %U:%G %p\n' \) |
			awk -F '\t' '
				{ line[NR] = $0 }
				NF > 1 { split($1, f, " "); n[f[1]]++ }
				END {
					for (i = 1; i <= NR; i++) {
						t = index(line[i], "\t")
						if (t == 0) { print line[i]; continue }
						split(substr(line[i], 1, t - 1), f, " ")
						print f[2], f[3], f[4], f[5], n[f[1]], substr(line[i], t + 1)
					}
				}' | LC_ALL=C sort
		find . -mindepth 1 \( -path ./dev -o -path ./proc -o -path ./sys \) -prune -o -type f -print0 |
			LC_ALL=C sort -z | xargs -0 -r md5sum
	)
}

# compare_tree NAME DIR VARIANT [WHEN]: against the tree the image was made
# from; WHEN says at which point, for the log and the notes.
compare_tree() {
	local name=$1 d=$2 v=$3 when=${4:-} ref=$tmp/ref-$3.manifest f
	[ -s "$ref" ] || return 0
	f=$tmp/$name-$v${when:+-${when//[^a-z0-9]/_}}
	manifest "$d" >"$f.manifest"
	if ! diff "$ref" "$f.manifest" >"$f.diff"; then
		log "$name: rootfs of image $v${when:+ $when} differs from the source tree: $(grep -c '^[<>]' "$f.diff") lines"
		head -n 20 "$f.diff" | sed 's/^/    /' >&2
		notes+=("**$name** (image $v${when:+, $when}): the rootfs differs from the tree the image was built from ($(grep -c '^<' "$f.diff") entries missing or different, $(grep -c '^>' "$f.diff") extra or different); first lines: \`$(head -n 3 "$f.diff" | tr '\n' ' ' | tr -d '`')\`")
		return 1
	fi
	log "$name: rootfs of image $v${when:+ $when} identical to the source tree (metadata and contents)"
}

for v in a b c; do
	if [ -d "$cache/trees/$v" ]; then
		manifest "$cache/trees/$v" >"$tmp/ref-$v.manifest"
	else
		log "warning: $cache/trees/$v missing; rootfs trees are only spot-checked"
	fi
done

bytes_of() { du -sb "$1" | cut -f1; }
kb_on_disk() { du -sk "$1" | cut -f1; }

# ------------------------------------------------------------ tools

# pull_TOOL DIR REF VARIANT: pulls REF with outputs under DIR (fresh);
# sets ROOTFS (the flattened tree; for podman a mount) and CACHE (paths to
# size). Returns non-zero on failure.

pull_cove() {
	local d=$1 ref=$2
	mkdir -p "$d"
	timed cove env COVE_ROOT="$d/root" "$cove" pull -q "$ref" || return 1
	local digest=${T_OUT##*$'\n'}
	case $digest in sha256:*) ;; *) log "cove: unexpected output: $T_OUT"; return 1 ;; esac
	ROOTFS=$d/root/images/images/${digest#sha256:}/rootfs
	CACHE=("$d/root")
}

pull_crane() {
	local d=$1 ref=$2
	mkdir -p "$d/rootfs"
	# shellcheck disable=SC2016
	timed crane bash -c 'set -o pipefail; "$1" --insecure export "$2" - | tar -x -C "$3"' \
		crane "$crane" "$ref" "$d/rootfs" || return 1
	ROOTFS=$d/rootfs
	CACHE=("$d/rootfs")
}

pull_skopeo() {
	local d=$1 ref=$2
	mkdir -p "$d"
	# shellcheck disable=SC2016
	timed skopeo bash -c 'skopeo copy -q --src-tls-verify=false "docker://$1" "oci:$2:bench" &&
		umoci raw unpack --image "$2:bench" "$3"' skopeo "$ref" "$d/oci" "$d/rootfs" || return 1
	ROOTFS=$d/rootfs
	CACHE=("$d/oci" "$d/rootfs")
}

pull_podman() {
	local d=$1 ref=$2
	mkdir -p "$d"
	timed podman podman --root "$d/root" --runroot "$d/run" --storage-driver "$podman_driver" \
		pull -q --tls-verify=false "$ref" || return 1
	ROOTFS=$(podman_ "$d" image mount "$ref") || { log "podman image mount $ref failed"; return 1; }
	CACHE=("$d/root")
}

release_podman() { # unmount what podman image mount mounted
	podman_ "$1" image unmount -a >/dev/null 2>&1 || true
	unmount_under "$1"
}

tools=(cove crane skopeo podman)
declare -A label=(
	[cove]="cove pull"
	[crane]="crane export \| tar -x"
	[skopeo]="skopeo copy + umoci raw unpack"
	[podman]="podman pull ($podman_driver)"
)
declare -A secs=() rss=() rootfs_bytes=() cache_b=() cache_kb=() second=() cache2_b=() failed=() med=()
declare -A second_failed=() shared=() blobs_left=() snaps=()
notes=()

# cache_bytes: du -sb of the paths in CACHE together (a file hardlinked
# twice counts once).
cache_bytes() { du -scb "${CACHE[@]}" | tail -n1 | cut -f1; }

# second_fail TOOL VARIANT WHY: a second pull went wrong (noted once).
second_fail() {
	log "$1: second pull of image $2: $3"
	if [ -z "${second_failed[$1,$2]:-}" ]; then
		notes+=("**$1**: second pull of image $2 (round $((r + 1))): $3")
	fi
	second_failed[$1,$2]=1
}

# second_pull TOOL DIR VARIANT REF: with image a in DIR, pulls REF (image
# VARIANT) into the same cache, checks it, records time and cache size.
second_pull() {
	local t=$1 d=$2 v=$3 ref=$4 why rootfs_v
	if ! "pull_$t" "$d" "$ref"; then
		second_fail "$t" "$v" "pull failed: \`$(head -c 400 "$tmp/fail-$t" | tr '\n' ' ' | tr -d '`')\`"
		return 1
	fi
	local sec=$T_SEC
	rootfs_v=$ROOTFS
	if ! why=$(check_rootfs "$rootfs_v" "$v"); then
		second_fail "$t" "$v" "rootfs check failed: $why"
		[ "$t" != podman ] || release_podman "$d"
		return 1
	fi
	second[$t,$v]+="$sec "
	log "  $t: second pull, image $v: ${sec}s"
	if [ "$r" = 0 ]; then
		compare_tree "$t" "$rootfs_v" "$v" || true
	fi
	if [ "$v" = b ] || [ "$v" = c ]; then
		# c is built FROM a and b shares its first layers: a must be
		# unchanged, whatever they share with it.
		local rootfs_a=$ROOTFS_A
		if [ "$t" = podman ]; then
			rootfs_a=$(podman_ "$d" image mount "$image_a") || { second_fail "$t" "$v" "podman image mount $image_a failed"; rootfs_a=; }
		fi
		if [ -n "$rootfs_a" ]; then
			if ! why=$(check_rootfs "$rootfs_a" a); then
				second_fail "$t" "$v" "image a changed by the pull of $v: $why"
			elif [ "$r" = 0 ]; then
				compare_tree "$t" "$rootfs_a" a "after the pull of $v" ||
					second_fail "$t" "$v" "image a's rootfs changed by the pull of $v (see above)"
			fi
			if [ "$r" = 0 ]; then
				# Regular files of b or c that are the same inode as one of a's.
				find "$rootfs_a" -xdev -type f -printf '%i\n' | sort -u >"$tmp/inodes-a"
				find "$rootfs_v" -xdev -type f -printf '%i\n' | sort -u >"$tmp/inodes-$v"
				shared[$t,$v]="$(sort "$tmp/inodes-a" "$tmp/inodes-$v" | uniq -d | wc -l) of the $(wc -l <"$tmp/inodes-$v")"
				log "  $t: ${shared[$t,$v]} regular files (inodes) of $v are a's"
			fi
		fi
	fi
	[ "$t" != podman ] || release_podman "$d"
	cache2_b[$t,$v]=$(cache_bytes)
	if [ "$t" = cove ]; then
		blobs_left[$t,$v]=$(find "$d/root" -path '*/blobs/*' -type f | wc -l)
		snaps[$t,$v]=$(find "$d/root/images/chains" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
	fi
}

# ------------------------------------------------------------ rounds

log "rounds: $rounds; output fs: $fs_size ext4 on loop at $mnt; busy loops: $busy"
for ((i = 0; i < busy; i++)); do
	sh -c 'while :; do :; done' &
	busy_pids+=($!)
done
for ((r = 0; r < rounds; r++)); do
	order=()
	for ((i = 0; i < ${#tools[@]}; i++)); do
		order+=("${tools[(i + r) % ${#tools[@]}]}")
	done
	log "round $((r + 1))/$rounds: ${order[*]}"
	for t in "${order[@]}"; do
		[ -z "${failed[$t]:-}" ] || continue
		d=$mnt/$t
		rm -rf "$d"
		ok=1
		if ! "pull_$t" "$d" "$image_a"; then
			failed[$t]="pull failed: \`$(head -c 400 "$tmp/fail-$t" 2>/dev/null | tr '\n' ' ' | tr -d '`')\`"
			ok=0
		fi
		if [ $ok = 1 ]; then
			sec_a=$T_SEC kb_a=$T_KB
			if ! why=$(check_rootfs "$ROOTFS" a); then
				failed[$t]="rootfs check failed: $why"
				log "$t: rootfs check failed: $why"
				ok=0
			fi
		fi
		if [ $ok = 1 ]; then
			secs[$t]+="$sec_a "
			rss[$t]+="$kb_a "
			rootfs_bytes[$t]=$(bytes_of "$ROOTFS")
			if [ "$r" = 0 ]; then
				compare_tree "$t" "$ROOTFS" a || true
			fi
			[ "$t" != podman ] || release_podman "$d"
			cache_b[$t]=0 cache_kb[$t]=0
			for c in "${CACHE[@]}"; do
				cache_b[$t]=$((cache_b[$t] + $(bytes_of "$c")))
				cache_kb[$t]=$((cache_kb[$t] + $(kb_on_disk "$c")))
			done
			log "  $t: ${sec_a}s, ${kb_a} KB peak RSS"
			if [ "$t" = cove ] || [ "$t" = podman ]; then
				# Second pulls, each into a cache holding only image a:
				# b shares layers 1-2 with it (a sibling), c is built FROM
				# it (layers 1-3 and one more). Between the two the cache
				# is emptied and a pulled again (not timed for the table).
				ROOTFS_A=$ROOTFS
				second_pull "$t" "$d" b "$image_b" || true
				[ "$t" != podman ] || release_podman "$d"
				rm -rf "$d" "${TMPDIR:?}"/*
				why=
				if "pull_$t" "$d" "$image_a" && why=$(check_rootfs "$ROOTFS" a); then
					ROOTFS_A=$ROOTFS
					[ "$t" != podman ] || release_podman "$d"
					second_pull "$t" "$d" c "$image_c" || true
				else
					second_fail "$t" c "pulling image a again before it failed: ${why:-$(head -c 400 "$tmp/fail-$t" 2>/dev/null | tr '\n' ' ' | tr -d '`')}"
				fi
			fi
		fi
		[ "$t" != podman ] || release_podman "$d"
		rm -rf "$d" "${TMPDIR:?}"/*
	done
done

# ------------------------------------------------------------ report

median() { # median NUMBERS...
	printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END {
		if (NR == 0) exit; if (NR % 2) printf "%.2f", v[(NR + 1) / 2]; else printf "%.2f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
minmax() { printf '%s\n' "$@" | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.2f–%.2f", lo, hi }'; }
maxof() { printf '%s\n' "$@" | sort -g | tail -n1; }
mb() { awk -v b="$1" 'BEGIN { printf "%.0f", b / 1e6 }'; }

best_peer="" best_peer_t=""
for t in "${tools[@]}"; do
	[ -z "${failed[$t]:-}" ] || continue
	# shellcheck disable=SC2086
	med[$t]=$(median ${secs[$t]})
	if [ "$t" != cove ] && { [ -z "$best_peer" ] || awk -v a="${med[$t]}" -v b="$best_peer" 'BEGIN { exit !(a < b) }'; }; then
		best_peer=${med[$t]} best_peer_t=$t
	fi
done

layer_sizes=$("$crane" --insecure manifest "$image_a" 2>/dev/null |
	python3 -c 'import json,sys; m=json.load(sys.stdin); print(" + ".join("%.1f" % (l["size"]/1e6) for l in m["layers"]))' 2>/dev/null || echo '?')
ref_files=$([ -s "$tmp/ref-a.manifest" ] && grep -c '^f ' "$tmp/ref-a.manifest" || echo '?')
ref_bytes=${rootfs_bytes[crane]:-${rootfs_bytes[cove]:-0}}
layer4_size=$("$crane" --insecure manifest "$image_c" 2>/dev/null |
	python3 -c 'import json,sys; m=json.load(sys.stdin); print("%.1f" % (m["layers"][-1]["size"]/1e6))' 2>/dev/null || echo '?')
layer4_entries=$(tar -tzf "$cache/layers/4c.tar.gz" 2>/dev/null | wc -l)
layer4_wh=$(tar -tzf "$cache/layers/4c.tar.gz" 2>/dev/null | grep -c '/\.wh\.' || true)

# second_cells TOOL VARIANT: "median | min–max | cache MB" of the second pull.
second_cells() {
	if [ -z "${second[$1,$2]:-}" ]; then
		echo "${second_failed[$1,$2]:+FAILED} | | "
		return
	fi
	# shellcheck disable=SC2086
	echo "$(median ${second[$1,$2]}) | $(minmax ${second[$1,$2]}) | $(mb "${cache2_b[$1,$2]}")"
}

report() {
	echo "# Cold pull + flatten: cove vs crane, skopeo+umoci, podman"
	echo
	echo "- Date: $(date -u '+%Y-%m-%d %H:%M UTC'); rounds: $rounds, each tool cold in every round (fresh output directory), order rotated per round"
	echo "- Host: $(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)), $(awk '/MemTotal/ { printf "%.0f GB", $2 / 1048576 }' /proc/meminfo) RAM, Linux $(uname -r); other jobs may have been running"
	[ "$busy" = 0 ] || echo "- Load made by the benchmark: $busy busy loop(s) (\`while :; do :; done\`, one CPU each) through every round, for every tool alike"
	echo "- Image: \`${image_a#*/}\` from a local registry on loopback (plain HTTP, Debian docker-registry): 3 gzip layers of $layer_sizes MB (minbase bookworm / gcc libc6-dev make / git curl + 132 .wh. whiteouts), $(mb "$ref_bytes") MB and $ref_files files extracted"
	echo "- Second image: \`${image_b#*/}\`, same layers 1–2, different small layer 3 (less vim-tiny, an opaque dir, one whiteout)"
	echo "- Third image: \`${image_c#*/}\`, built FROM a: its layers 1–3 (same DiffIDs) and a layer 4 of $layer4_size MB, $layer4_entries entries (+ jq; $layer4_wh whiteouts; one file's mode and another's contents changed; a hardlink and a symlink added)"
	echo "- Outputs on a fresh $fs_size ext4 loop file system (noatime); \`sync\` before each timed command, not included in the time"
	echo "- cove $cove_rev; $("$crane" version 2>/dev/null | sed 's/^/crane /'); $(skopeo --version); $(umoci --version); $(podman --version)"
	echo
	echo "| tool | median s | min–max s | peak RSS MB | MB/s | vs fastest peer | cache after pull MB (on disk) | second pull, shared base (b): median s | cache after both MB |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
	for t in "${tools[@]}"; do
		if [ -n "${failed[$t]:-}" ]; then
			echo "| ${label[$t]} | FAILED | | | | | | | |"
			continue
		fi
		local ratio='' mbs sec2='—' c2='—'
		ratio=$(awk -v a="${med[$t]}" -v b="$best_peer" 'BEGIN { if (b > 0) printf "%.2f×", a / b }')
		[ "$t" != "$best_peer_t" ] || ratio="$ratio (fastest peer)"
		mbs=$(awk -v b="${rootfs_bytes[$t]}" -v s="${med[$t]}" 'BEGIN { if (s > 0) printf "%.0f", b / 1e6 / s }')
		if [ -n "${second[$t,b]:-}" ]; then
			# shellcheck disable=SC2086
			sec2=$(median ${second[$t,b]})
			c2=$(mb "${cache2_b[$t,b]}")
		fi
		# shellcheck disable=SC2086
		echo "| ${label[$t]} | ${med[$t]} | $(minmax ${secs[$t]}) | $(awk -v k="$(maxof ${rss[$t]})" 'BEGIN { printf "%.0f", k / 1024 }') | $mbs | $ratio | $(mb "${cache_b[$t]}") ($(awk -v k="${cache_kb[$t]}" 'BEGIN { printf "%.0f", k * 1024 / 1e6 }')) | $sec2 | $c2 |"
	done
	echo
	echo "Second pull into a cache that already holds image a (cove and podman; median of $rounds rounds, each into a cache holding only a):"
	echo
	echo "| tool | cache after a MB | sibling (b: shares layers 1–2): median s | min–max s | cache after a + b MB | derived (c: FROM a, one new layer): median s | min–max s | cache after a + c MB |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|"
	for t in cove podman; do
		[ -z "${failed[$t]:-}" ] || continue
		echo "| ${label[$t]} | $(mb "${cache_b[$t]}") | $(second_cells "$t" b) | $(second_cells "$t" c) |"
	done
	echo
	local ratio_b ratio_c
	if [ -n "${second[cove,b]:-}" ] && [ -n "${second[podman,b]:-}" ]; then
		# shellcheck disable=SC2086
		ratio_b=$(awk -v a="$(median ${second[cove,b]})" -v b="$(median ${second[podman,b]})" 'BEGIN { if (b > 0) printf "%.2f×", a / b }')
		echo "- sibling b: cove's median / podman's = **$ratio_b**"
	fi
	if [ -n "${second[cove,c]:-}" ] && [ -n "${second[podman,c]:-}" ]; then
		# shellcheck disable=SC2086
		ratio_c=$(awk -v a="$(median ${second[cove,c]})" -v b="$(median ${second[podman,c]})" 'BEGIN { if (b > 0) printf "%.2f×", a / b }')
		echo "- derived c: cove's median / podman's = **$ratio_c**"
	fi
	for t in cove podman; do
		[ -n "${shared[$t,b]:-}${shared[$t,c]:-}" ] || continue
		echo "- ${label[$t]}: ${shared[$t,b]:-?} regular files (distinct inodes) of b's rootfs, and ${shared[$t,c]:-?} of c's, are a file of a's rootfs${blobs_left[$t,c]:+; blobs left in the cache after a + b: ${blobs_left[$t,b]:-?}, after a + c: ${blobs_left[$t,c]}}${snaps[$t,b]:+; layer snapshots kept after a + b: ${snaps[$t,b]}, after a + c: ${snaps[$t,c]:-?}}"
	done
	echo
	echo "Per round (seconds; peak RSS MB):"
	echo
	echo "| tool | $(for ((r = 1; r <= rounds; r++)); do printf 'round %d | ' "$r"; done | sed 's/ | $//') |"
	echo "|---|$(for ((r = 1; r <= rounds; r++)); do printf -- '---:|'; done)"
	for t in "${tools[@]}"; do
		[ -z "${failed[$t]:-}" ] || continue
		read -r -a s <<<"${secs[$t]}"
		read -r -a k <<<"${rss[$t]}"
		printf '| %s |' "${label[$t]}"
		for ((r = 0; r < ${#s[@]}; r++)); do
			printf ' %s; %s |' "${s[r]}" "$(awk -v k="${k[r]}" 'BEGIN { printf "%.0f", k / 1024 }')"
		done
		echo
		for v in b c; do
			[ -n "${second[$t,$v]:-}" ] || continue
			if [ "$v" = b ]; then
				printf '| %s, second pull: sibling b |' "${label[$t]}"
			else
				printf '| %s, second pull: derived c |' "${label[$t]}"
			fi
			for x in ${second[$t,$v]}; do printf ' %s |' "$x"; done
			echo
		done
	done
	echo
	echo "How it is measured:"
	echo
	echo "- time and peak RSS: \`/usr/bin/time -f '%e %M'\` around the whole command; for the two pipelines (\`bash -c 'crane export REF - | tar -x -C DIR'\`, \`bash -c 'skopeo copy … && umoci raw unpack …'\`) the RSS is that of the largest single process, not the sum"
	echo "- MB/s: \`du -sb\` of the extracted rootfs (podman: of its \`image mount\`) / median time; MB = 10^6 bytes"
	echo "- vs fastest peer: the tool's median / the fastest non-cove median"
	echo "- cache after pull: \`du -sb\` (and \`du -sk\`, on disk) of cove's whole COVE_ROOT; crane's extracted tree; skopeo's OCI layout + umoci's rootfs; podman's --root (not --runroot)"
	echo "- second pull: with image a already pulled into the same cache, pull image b (shares layers 1–2), or image c (built FROM a); cove and podman only; in every round a is pulled, then b; then the cache is deleted, a pulled again (not in the first table) and then c; \"cache after a + b/c\" is \`du -sb\` of the same paths after it (files hardlinked between images count once)"
	echo "- every rootfs is spot-checked (usr/bin/gcc, git, whiteouts applied, no .wh. files left; for c also layer 4's whiteouts, mode change, edited file, hardlink), and in round 1 compared entry by entry (type, mode, owner, size, link count within the tree, symlink target, md5 of contents) with the tree the image was built from; after each pull of b and of c, a's rootfs is spot-checked again (what layer 4 changes must be as in a) and in round 1 compared entry by entry with a's tree once more"
	echo "- files shared: regular files in b's or c's rootfs with the inode number of a regular file in a's (cove: its hardlinked copy of a, or of the snapshot of a's layers 1–2 its pull kept; podman: overlay lower layers), round 1"
	echo "- rerun: \`scripts/bench/pull.sh\` (ROUNDS=$rounds); the image is built and cached by \`scripts/bench/mkimage.sh\`"
	if [ ${#notes[@]} -gt 0 ] || [ ${#failed[@]} -gt 0 ]; then
		echo
		echo "Problems seen:"
		echo
		for t in "${!failed[@]}"; do echo "- **$t**: ${failed[$t]}"; done
		for n in "${notes[@]}"; do echo "- $n"; done
	fi
}

mkdir -p "$(dirname "$out_md")"
report | tee "$out_md"
log "report written to $out_md"
