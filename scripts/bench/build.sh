#!/bin/bash
# Image builds, side by side in one run: cove build against podman build
# (Debian's, buildah inside, --runtime runc), cold (the base image stored,
# no build cache) and warm (the same build again, every step cached), on a
# few representative Dockerfiles. See scripts/bench/README.md.
#
# Usage: sudo scripts/bench/build.sh           (as root: a loop mount, podman)
#
# Environment:
#   ROUNDS=3            rounds; every round starts both tools from empty
#                       storage holding only the base image
#   FILES=2000          files in the COPY-heavy context (100 directories)
#   PODMAN_DRIVER       overlay (default; vfs if overlay does not work)
#   BENCH_OUT           results file (default scripts/bench/results/build-latest.md)
#   COVE_BUILD_REGISTRY_STATE
#                       state dir of scripts/registry.sh (default
#                       /tmp/cove-build-bench-registry); stopped at the end
#   CRANE               crane binary (default: crane in PATH, else ~/go/bin/crane)
#
# The markdown report goes to stdout and to BENCH_OUT; progress to stderr.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
rounds=${ROUNDS:-3}
nfiles=${FILES:-2000}
out_md=${BENCH_OUT:-$here/results/build-latest.md}
reg_state=${COVE_BUILD_REGISTRY_STATE:-/tmp/cove-build-bench-registry}

log() { printf 'build.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

case $rounds in '' | *[!0-9]* | 0) die "ROUNDS must be a positive integer, not '$rounds'" ;; esac
case $nfiles in '' | *[!0-9]* | 0) die "FILES must be a positive integer, not '$nfiles'" ;; esac
[ "$(id -u)" = 0 ] || die "must run as root (loop mount; podman as root)"

# ------------------------------------------------------------ tools

# shellcheck disable=SC1091 # scripts/bench/lib.sh, checked on its own
. "$here/lib.sh"
need podman podman
need runc runc
need /usr/bin/time time # GNU time, for peak RSS
need mkfs.ext4 e2fsprogs
need python3 python3
need htpasswd apache2-utils
need curl curl
[ -x /usr/bin/docker-registry ] || need docker-registry docker-registry
[ -x /bin/busybox ] || { apt-get install -y -q busybox-static >&2 || die "apt-get install busybox-static failed"; }
need go "golang (or a Go toolchain in PATH) to build cove"
crane=$(find_crane) || exit 1

tmp=$(mktemp -d /tmp/cove-bench-build.XXXXXX)
mnt=$tmp/mnt
cove=$tmp/cove
registry() { COVE_REGISTRY_STATE=$reg_state "$repo/scripts/registry.sh" "$@"; }

cleanup() {
	registry stop >/dev/null 2>&1 || true
	unmount_under "$tmp"
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cove_rev=$(build_cove "$repo" "$cove") || exit 1

# ------------------------------------------------------------ base image

busybox_layer "$tmp/rootfs" "$tmp/layer.tar.gz" cove-build-bench
reg_env=$(registry start) || die "scripts/registry.sh start failed"
reg=$(printf '%s\n' "$reg_env" | sed -n 's/^COVE_TEST_REGISTRY=//p')
[ -n "$reg" ] || die "scripts/registry.sh start printed no COVE_TEST_REGISTRY= line"
base=$reg/bench/busybox:latest
push_layer "$crane" "$tmp/layer.tar.gz" "$base"

# ------------------------------------------------------------ output fs

# Builds write and delete many files: on / (ext4 with discard) every
# delete slows the next round, so both tools work on a fresh loop fs.
log "creating a 4G ext4 loop file system for both tools' storage"
truncate -s 4G "$tmp/fs.img"
mkfs.ext4 -q -F -E nodiscard,lazy_itable_init=0,lazy_journal_init=0 "$tmp/fs.img"
mkdir -p "$mnt"
mount -o loop,noatime "$tmp/fs.img" "$mnt"
mkdir -p "$mnt/tmp"
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
# As cmd/cove/build_podman_test.go runs it: runc (crun refuses this hybrid
# cgroup host), cgroupfs, file events; the host's network, as cove's RUN.
podman_args() { # podman_args DIR: sets pod to podman with its storage in DIR
	pod=(podman --root "$1/root" --runroot "$1/run" --storage-driver "$podman_driver"
		--cgroup-manager cgroupfs --events-backend file --runtime runc)
}

# ------------------------------------------------------------ the Dockerfiles

# Each context's check command prints what the built image must print.
ctx=$tmp/contexts
declare -A want
cases=(run-chain copy-heavy multi-stage)

mkdir -p "$ctx/run-chain"
cat >"$ctx/run-chain/Dockerfile" <<EOF
FROM $base
ENV APP=/srv/app
RUN mkdir -p \$APP && echo one > \$APP/one
RUN seq 1 20000 > \$APP/numbers && wc -l < \$APP/numbers > \$APP/count
RUN echo "app:x:1000:1000::/srv/app:/bin/sh" >> /etc/passwd && echo "app:x:1000:" >> /etc/group && chown -R app:app \$APP
WORKDIR /srv/app
RUN dd if=/dev/zero of=blob bs=1M count=8 2>/dev/null && md5sum blob > blob.md5
RUN rm blob && ln -s numbers latest
USER app
CMD ["cat", "count"]
EOF
want[run-chain]=20000

mkdir -p "$ctx/copy-heavy/src"
python3 - "$ctx/copy-heavy/src" "$nfiles" <<'EOF'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    d = os.path.join(root, "pkg%03d" % (i % 100))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "file%05d.txt" % i), "w") as f:
        f.write(("line %d of a source file\n" % i) * (20 + i % 200))
EOF
printf 'node_modules\n*.log\n' >"$ctx/copy-heavy/.dockerignore"
mkdir -p "$ctx/copy-heavy/node_modules/x"
echo ignored >"$ctx/copy-heavy/node_modules/x/index.js"
echo ignored >"$ctx/copy-heavy/debug.log"
cat >"$ctx/copy-heavy/Dockerfile" <<EOF
FROM $base
WORKDIR /app
COPY src/pkg000 ./src/pkg000
COPY . .
RUN find /app/src -type f | wc -l > /app/count
CMD ["cat", "/app/count"]
EOF
want[copy-heavy]=$nfiles
ctx_mb=$(du -sm "$ctx/copy-heavy" | cut -f1)

mkdir -p "$ctx/multi-stage"
cat >"$ctx/multi-stage/Dockerfile" <<EOF
FROM $base AS builder
RUN mkdir -p /out/bin /out/share && seq 1 5000 | sed 's/^/item /' > /out/share/items
RUN printf '#!/bin/sh\nwc -l < /usr/local/share/items\n' > /out/bin/tool && chmod 755 /out/bin/tool

FROM $base AS assets
RUN mkdir /assets && for i in \$(seq 1 200); do echo \$i > /assets/a\$i; done

FROM $base
COPY --from=builder /out/bin/tool /usr/local/bin/tool
COPY --from=builder /out/share/items /usr/local/share/items
COPY --from=assets /assets /assets
CMD ["/usr/local/bin/tool"]
EOF
want[multi-stage]=5000

# ------------------------------------------------------------ helpers

# timed NAME CMD...: runs CMD under GNU time; sets T_SEC, T_KB; on failure
# prints its stderr and returns 1.
timed() {
	local name=$1
	shift
	sync
	if ! /usr/bin/time -f '%e %M' -o "$tmp/time" "$@" >"$tmp/stdout" 2>"$tmp/stderr"; then
		log "$name FAILED: $*"
		sed 's/^/    /' "$tmp/stderr" | tail -n 20 >&2
		return 1
	fi
	read -r T_SEC T_KB <"$tmp/time"
}

declare -A secs rss fail
cove_mb=() podman_mb=()
# podman run's default rlimits are above this host's hard limits (start.sh).
nofile=$(ulimit -Hn)
record() { # record KEY: appends T_SEC and T_KB to KEY's lists
	secs[$1]="${secs[$1]:+${secs[$1]} }$T_SEC"
	rss[$1]="${rss[$1]:+${rss[$1]} }$T_KB"
}

# ------------------------------------------------------------ rounds

load_before=$(cut -d' ' -f1-3 /proc/loadavg)

for ((r = 1; r <= rounds; r++)); do
	log "round $r of $rounds"
	croot=$mnt/cove-$r
	proot=$mnt/podman-$r
	COVE_ROOT=$croot "$cove" pull -q "$base" >/dev/null 2>"$tmp/pull.err" || die "cove pull $base: $(cat "$tmp/pull.err")"
	podman_args "$proot"
	"${pod[@]}" pull -q --tls-verify=false "$base" >/dev/null 2>"$tmp/pull.err" || die "podman pull $base: $(cat "$tmp/pull.err")"
	# Alternate which tool goes first, so neither always has a warmer page cache.
	if ((r % 2)); then order=(cove podman); else order=(podman cove); fi
	for c in "${cases[@]}"; do
		for tool in "${order[@]}"; do
			for pass in cold warm; do
				key=$tool,$c,$pass
				[ -z "${fail[$key]:-}" ] || continue
				if [ "$tool" = cove ]; then
					timed "$key" env COVE_ROOT="$croot" "$cove" build -t "bench/$c:latest" "$ctx/$c" || { fail[$key]=1; break; }
				else
					timed "$key" "${pod[@]}" build --network host --tls-verify=false -t "bench/$c:latest" "$ctx/$c" || { fail[$key]=1; break; }
				fi
				record "$key"
			done
		done
		# The images must do what the Dockerfile says.
		[ -z "${fail[cove,$c,cold]:-}${fail[podman,$c,cold]:-}" ] || continue
		got=$(COVE_ROOT=$croot "$cove" run --rm "bench/$c:latest" 2>&1 | tr -d '[:space:]') || true
		[ "$got" = "${want[$c]}" ] || die "cove's bench/$c prints '$got', want '${want[$c]}'"
		got=$("${pod[@]}" run --rm --network host --ulimit "nofile=$nofile:$nofile" --ulimit nproc=32768:32768 "localhost/bench/$c:latest" 2>&1 | tr -d '[:space:]') || true
		[ "$got" = "${want[$c]}" ] || die "podman's bench/$c prints '$got', want '${want[$c]}'"
	done
	# Storage per tool after the three builds, then start the next round empty.
	cove_mb[r]=$(du -sm "$croot" | cut -f1)
	podman_mb[r]=$(du -sm "$proot/root" | cut -f1)
	"${pod[@]}" rm -a -f >/dev/null 2>&1 || true
	"${pod[@]}" system reset -f >/dev/null 2>&1 || true
	unmount_under "$proot"
	rm -rf "$croot" "$proot" "${TMPDIR:?}"/*
done

# ------------------------------------------------------------ report

median() { # median NUMBERS...
	printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END {
		if (NR == 0) exit; if (NR % 2) printf "%.2f", v[(NR + 1) / 2]; else printf "%.2f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
minmax() { printf '%s\n' "$@" | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.2f–%.2f", lo, hi }'; }
maxmb() { printf '%s\n' "$@" | sort -g | tail -n1 | awk '{ printf "%.0f", $1 / 1024 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f×", a / b; else print "—" }'; }

{
	echo "# Image builds: cove build vs podman build"
	echo
	echo "- Date: $(date -u '+%Y-%m-%d %H:%M UTC'); rounds: $rounds, each from empty storage holding only the base image; tool order alternated per round"
	echo "- Host: $(nproc) CPUs ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n1)), $(awk '/MemTotal/ { printf "%.0f", $2 / 1048576 }' /proc/meminfo) GB RAM, Linux $(uname -r); load average before: $load_before; other jobs may have been running"
	echo "- Base image: busybox (one layer, Debian's busybox-static) from a local registry on loopback, pulled by both tools before the round (not timed)"
	echo "- Storage: a fresh 4G ext4 loop file system (noatime); podman --storage-driver $podman_driver --runtime runc --cgroup-manager cgroupfs, both with the host's network"
	echo "- cove $cove_rev; $(podman --version); $(runc --version | head -n1)"
	echo "- cold: the first build (no build cache); warm: the same build again, every step cached; median of $rounds rounds, \`/usr/bin/time -f '%e %M'\` around the whole command"
	echo
	echo "| Dockerfile | cove cold s | podman cold s | cold cove/podman | cove warm s | podman warm s | warm cove/podman | peak RSS MB cove / podman |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|"
	for c in "${cases[@]}"; do
		row="| $c"
		for pass in cold warm; do
			# shellcheck disable=SC2086
			cm=$(median ${secs[cove,$c,$pass]:-}) pm=$(median ${secs[podman,$c,$pass]:-})
			row="$row | ${cm:-failed} | ${pm:-failed} | $(ratio "${cm:-0}" "${pm:-0}")"
		done
		# shellcheck disable=SC2086
		row="$row | $(maxmb ${rss[cove,$c,cold]:-0} ${rss[cove,$c,warm]:-0}) / $(maxmb ${rss[podman,$c,cold]:-0} ${rss[podman,$c,warm]:-0}) |"
		echo "$row"
	done
	echo
	echo "Dockerfiles: **run-chain**: 5 RUNs, ENV, WORKDIR, USER (20,000-line file, a user added, an 8 MB file made and deleted); **copy-heavy**: \`COPY . .\` of $nfiles files in 100 directories (${ctx_mb} MB context, a .dockerignore), then a RUN over them; **multi-stage**: three stages, two built in full, three \`COPY --from\`."
	echo
	echo "Per round (seconds, min–max):"
	echo
	echo "| Dockerfile | pass | cove | podman |"
	echo "|---|---|---:|---:|"
	for c in "${cases[@]}"; do
		for pass in cold warm; do
			# shellcheck disable=SC2086
			echo "| $c | $pass | ${secs[cove,$c,$pass]:-failed} ($(minmax ${secs[cove,$c,$pass]:-0})) | ${secs[podman,$c,$pass]:-failed} ($(minmax ${secs[podman,$c,$pass]:-0})) |"
		done
	done
	echo
	echo "Storage after the three builds (MB, per round): cove ${cove_mb[*]} (images, build cache and base); podman ${podman_mb[*]}."
	echo
	echo "Load average after: $(cut -d' ' -f1-3 /proc/loadavg)."
} | tee "$out_md"
