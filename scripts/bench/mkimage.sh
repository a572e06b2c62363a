#!/bin/bash
# Builds a realistic 3-layer Debian bookworm image (once; cached) and pushes
# it and two relatives to the local test registry:
#
#   IMAGE_A  layer 1: debootstrap --variant=minbase bookworm
#            layer 2: + gcc libc6-dev make (apt in a chroot of a copy of 1)
#            layer 3: + git curl, most of /usr/share/doc and /usr/share/info
#                     deleted (so the layer carries .wh.NAME whiteouts)
#   IMAGE_B  layers 1-2 shared with IMAGE_A; a different small layer 3
#            (+ less vim-tiny, /etc/apt/apt.conf.d emptied and refilled, which
#            becomes an opaque directory .wh..wh..opq, one .wh. file)
#   IMAGE_C  built FROM IMAGE_A: its layers 1-3 and a small layer 4 (+ jq;
#            /etc/motd and /usr/share/doc/make deleted, i.e. whiteouts; the
#            mode of /etc/cove-bench and the contents of /etc/issue changed
#            in place; a new /opt/cove-bench with a hardlink and a symlink)
#
# Each layer is the difference to the tree below it: new and changed entries,
# and .wh. whiteouts for deleted ones; gzip tar with numeric owners, no xattrs,
# device nodes and the contents of /dev /proc /sys left out.
#
# Usage: scripts/bench/mkimage.sh
#   prints COVE_TEST_REGISTRY=..., IMAGE_A=..., IMAGE_B=..., IMAGE_C=... on
#   stdout
#   (everything else goes to stderr).
#
# Environment:
#   COVE_BENCH_CACHE   trees and layer tarballs (default /var/cache/cove-bench)
#   COVE_BENCH_REGISTRY_STATE
#                      state dir for scripts/registry.sh (default
#                      /tmp/cove-bench-registry, not the tests' registry, so
#                      a test run's "registry.sh stop" does not wipe it)
#   DEBIAN_MIRROR      default: the first .../debian URI in the apt sources
#   CRANE              crane binary (default: crane in PATH, else ~/go/bin/crane)
#   REBUILD=1          throw the cache away and build again
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${COVE_BENCH_CACHE:-/var/cache/cove-bench}
export COVE_REGISTRY_STATE=${COVE_BENCH_REGISTRY_STATE:-/tmp/cove-bench-registry}
suite=bookworm

log() { printf 'mkimage: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (debootstrap, chroot)"

need_pkg() { # need_pkg COMMAND PACKAGE
	command -v "$1" >/dev/null 2>&1 && return
	log "installing $2 (for $1)"
	apt-get install -y -q "$2" >&2 || die "apt-get install $2 failed"
}
need_pkg debootstrap debootstrap
need_pkg python3 python3-minimal
need_pkg gzip gzip
need_pkg curl curl

crane=${CRANE:-$(command -v crane || echo "$HOME/go/bin/crane")}
if [ ! -x "$crane" ]; then
	log "crane not found; go install github.com/google/go-containerregistry/cmd/crane@v0.22.1"
	command -v go >/dev/null || die "crane missing and no go toolchain to install it"
	go install github.com/google/go-containerregistry/cmd/crane@v0.22.1 >&2
	crane=$(go env GOPATH)/bin/crane
	[ -x "$crane" ] || die "crane still not found at $crane"
fi

mirror() {
	if [ -n "${DEBIAN_MIRROR:-}" ]; then
		echo "$DEBIAN_MIRROR"
		return
	fi
	# deb822 "URIs:" lines and one-line "deb URI suite" entries; the first
	# archive that is not the security one.
	# shellcheck disable=SC2016
	cat /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list 2>/dev/null |
		awk '/^[[:space:]]*#/ { next }
		     $1 == "URIs:" { for (i = 2; i <= NF; i++) print $i }
		     $1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /:\/\//) { print $i; break } }' |
		grep -E '/debian/?$' | head -n1 || true
}

# ---------------------------------------------------------------- trees

trees=$cache/trees
layers=$cache/layers
mounted=
cleanup() {
	if [ -n "$mounted" ]; then
		umount "$mounted" 2>/dev/null || umount -l "$mounted" 2>/dev/null || true
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ "${REBUILD:-0}" = 1 ]; then
	log "REBUILD=1: removing $cache"
	rm -rf "$cache"
fi
mkdir -p "$trees" "$layers"

# in_chroot DIR SCRIPT: runs SCRIPT with sh in DIR with /proc mounted and the
# host's resolv.conf bind-mounted (so the tree's own file is left unchanged).
in_chroot() {
	local dir=$1 script=$2
	mount -t proc proc "$dir/proc"
	mounted=$dir/proc
	local resolv='' made=''
	if [ ! -e "$dir/etc/resolv.conf" ] && [ ! -L "$dir/etc/resolv.conf" ]; then
		: >"$dir/etc/resolv.conf"
		made=1
	fi
	if [ -f "$dir/etc/resolv.conf" ] && [ ! -L "$dir/etc/resolv.conf" ]; then
		mount --bind /etc/resolv.conf "$dir/etc/resolv.conf"
		resolv=$dir/etc/resolv.conf
	fi
	local rc=0
	DEBIAN_FRONTEND=noninteractive LC_ALL=C PATH=/usr/sbin:/usr/bin:/sbin:/bin \
		chroot "$dir" /bin/sh -euxc "$script" >&2 || rc=$?
	[ -z "$resolv" ] || umount "$resolv"
	[ -z "$made" ] || rm -f "$dir/etc/resolv.conf"
	umount "$dir/proc"
	mounted=
	return "$rc"
}

# derive NAME FROM SCRIPT: the tree NAME is a copy of FROM changed by SCRIPT.
# The copy time is kept in NAME.copied: everything changed later has a newer
# ctime, which is what the layer differ looks at beside size/mtime/mode.
derive() {
	local name=$1 from=$2 script=$3
	[ -f "$trees/$name.done" ] && return
	log "tree $name: copy of $from + chroot changes"
	rm -rf "${trees:?}/$name" "$trees/$name.copied"
	cp -a "$trees/$from" "$trees/$name"
	touch "$trees/$name.copied"
	in_chroot "$trees/$name" "$script"
	touch "$trees/$name.done"
}

apt_clean='apt-get clean; rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt/* /var/cache/debconf/*-old /var/lib/dpkg/*-old'

if [ ! -f "$trees/base.done" ]; then
	m=$(mirror)
	[ -n "$m" ] || m=http://deb.debian.org/debian
	log "tree base: debootstrap --variant=minbase $suite from $m"
	rm -rf "$trees/base"
	debootstrap --variant=minbase "$suite" "$trees/base" "$m" >&2 ||
		die "debootstrap failed (see above; the log is $trees/base/debootstrap/debootstrap.log)"
	in_chroot "$trees/base" "$apt_clean"
	touch "$trees/base.done"
fi

derive dev base "apt-get update -q
apt-get install -y -q --no-install-recommends gcc libc6-dev make
$apt_clean"

derive a dev "apt-get update -q
apt-get install -y -q --no-install-recommends git curl ca-certificates
$apt_clean
find /usr/share/doc -mindepth 1 -maxdepth 1 ! -name git ! -name curl ! -name make ! -name libc6-dev -exec rm -rf {} +
rm -rf /usr/share/info /usr/share/common-licenses/GPL-1 /usr/share/common-licenses/Artistic
echo 'built for the cove pull benchmark' >/etc/cove-bench"

derive b dev "apt-get update -q
apt-get install -y -q --no-install-recommends less vim-tiny
$apt_clean
rm -rf /etc/apt/apt.conf.d && mkdir /etc/apt/apt.conf.d
echo 'APT::Install-Recommends \"false\";' >/etc/apt/apt.conf.d/99bench
rm -f /usr/bin/make-first-existing-target
echo 'built for the cove pull benchmark (b)' >/etc/cove-bench"

# c is built FROM a: changes that replace files, change them in place
# (mode only; contents appended to), delete some (whiteouts), add a few.
derive c a "apt-get update -q
apt-get install -y -q --no-install-recommends jq
$apt_clean
rm -f /etc/motd
rm -rf /usr/share/doc/make
chmod 0600 /etc/cove-bench
echo 'cove pull benchmark, image c' >>/etc/issue
mkdir -p /opt/cove-bench
echo 'built for the cove pull benchmark (c, FROM a)' >/opt/cove-bench/README
ln /opt/cove-bench/README /opt/cove-bench/README.link
ln -s README /opt/cove-bench/README.sym"

# ---------------------------------------------------------------- layers

# mklayer OUT UPPER [LOWER MARKER]
mklayer() {
	local out=$1
	[ -s "$out" ] && return
	log "layer $(basename "$out"): diff of $2 against ${3:-nothing}"
	python3 - "$@" <<'PY' | gzip -n -6 >"$out.tmp"
import os, stat, sys, tarfile

_, _, upper = sys.argv[:3]
lower = sys.argv[3] if len(sys.argv) > 3 else None
since = os.stat(sys.argv[4]).st_mtime_ns if len(sys.argv) > 4 else 0
SKIP_CONTENT = {"dev", "proc", "sys"}   # keep the directories, not what is in them

def lst(p):
    try:
        return os.lstat(p)
    except FileNotFoundError:
        return None

def changed(rel, st):
    if lower is None:
        return True
    lo = lst(os.path.join(lower, rel))
    if lo is None or stat.S_IFMT(lo.st_mode) != stat.S_IFMT(st.st_mode):
        return True
    if (lo.st_mode, lo.st_uid, lo.st_gid) != (st.st_mode, st.st_uid, st.st_gid):
        return True
    if st.st_ctime_ns > since:          # touched after the copy was made
        return True
    if stat.S_ISDIR(st.st_mode):
        return lo.st_mtime_ns != st.st_mtime_ns
    if stat.S_ISLNK(st.st_mode):
        return os.readlink(os.path.join(lower, rel)) != os.readlink(os.path.join(upper, rel))
    return lo.st_size != st.st_size or lo.st_mtime_ns != st.st_mtime_ns

tf = tarfile.open(fileobj=sys.stdout.buffer, mode="w|", format=tarfile.PAX_FORMAT)
counts = {"entries": 0, "whiteouts": 0, "opaque": 0, "bytes": 0}

def add(rel):
    path = os.path.join(upper, rel)
    ti = tf.gettarinfo(path, arcname=rel)
    if ti is None:                      # socket
        return
    if ti.ischr() or ti.isblk() or ti.isfifo():
        return
    ti.uname = ti.gname = ""
    if ti.isreg():
        with open(path, "rb") as f:
            tf.addfile(ti, f)
        counts["bytes"] += ti.size
    else:
        tf.addfile(ti)
    counts["entries"] += 1

def whiteout(reldir, name):
    ti = tarfile.TarInfo(os.path.join(reldir, ".wh." + name) if reldir else ".wh." + name)
    ti.mode = 0o644
    tf.addfile(ti)
    counts["opaque" if name == ".wh..opq" else "whiteouts"] += 1

def walk(rel, opaque_parent=False):
    up = os.path.join(upper, rel) if rel else upper
    names = sorted(os.listdir(up))
    lo_names = []
    lo_dir = os.path.join(lower, rel) if (lower and rel) else lower
    if lower is not None and not opaque_parent and os.path.isdir(lo_dir) and not os.path.islink(lo_dir):
        lo_names = sorted(os.listdir(lo_dir))
    present = set(names)
    gone = [n for n in lo_names if n not in present]
    # A directory whose old contents are all gone was emptied and refilled:
    # record it as opaque, the way an overlay snapshotter would.
    opaque = bool(lo_names) and len(gone) == len(lo_names)
    if opaque:
        whiteout(rel, ".wh..opq")
    else:
        for n in gone:
            whiteout(rel, n)
    for n in names:
        r = os.path.join(rel, n) if rel else n
        st = os.lstat(os.path.join(up, n))
        if opaque or opaque_parent or changed(r, st):
            add(r)
        if stat.S_ISDIR(st.st_mode) and not (rel == "" and n in SKIP_CONTENT):
            walk(r, opaque_parent or opaque)

walk("")
tf.close()
print("layer: %(entries)d entries, %(bytes)d bytes of file data, %(whiteouts)d whiteouts, %(opaque)d opaque dirs" % counts, file=sys.stderr)
PY
	mv "$out.tmp" "$out"
}

mklayer "$layers/1.tar.gz" "$trees/base"
mklayer "$layers/2.tar.gz" "$trees/dev" "$trees/base" "$trees/dev.copied"
mklayer "$layers/3a.tar.gz" "$trees/a" "$trees/dev" "$trees/a.copied"
mklayer "$layers/3b.tar.gz" "$trees/b" "$trees/dev" "$trees/b.copied"
mklayer "$layers/4c.tar.gz" "$trees/c" "$trees/a" "$trees/c.copied"

# ---------------------------------------------------------------- push

reg_env=$("$repo/scripts/registry.sh" start) || die "scripts/registry.sh start failed"
reg_env=$(printf '%s\n' "$reg_env" | grep '^COVE_TEST_REGISTRY=' | head -n1) ||
	die "scripts/registry.sh start printed no COVE_TEST_REGISTRY= line"
reg=${reg_env#COVE_TEST_REGISTRY=}
image_a=$reg/cove-bench/devbox:a
image_b=$reg/cove-bench/devbox:b
image_c=$reg/cove-bench/devbox:c

push() { # push REF NAME LAYER...
	local ref=$1 name=$2 tmp have l fresh=1
	shift 2
	local args=()
	for l in "$@"; do
		args+=(-f "$l")
		[ "$l" -ot "$layers/$name.digest" ] || fresh=0
	done
	# Skip when the registry already has what was pushed last time (the
	# result is deterministic: same layers, same config, same digest).
	if [ -s "$layers/$name.digest" ] && [ $fresh = 1 ] &&
		have=$("$crane" --insecure digest "$ref" 2>/dev/null) &&
		[ "$have" = "$(cat "$layers/$name.digest")" ]; then
		log "$ref already pushed: $have"
		return
	fi
	log "push $ref"
	"$crane" --insecure append --oci-empty-base "${args[@]}" -t "$ref" >/dev/null
	tmp=$("$crane" --insecure mutate --set-platform linux/amd64 \
		--env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		--cmd /bin/bash -t "$ref" "$ref")
	log "  $tmp"
	"$crane" --insecure digest "$ref" >"$layers/$name.digest"
}
push "$image_a" a "$layers/1.tar.gz" "$layers/2.tar.gz" "$layers/3a.tar.gz"
push "$image_b" b "$layers/1.tar.gz" "$layers/2.tar.gz" "$layers/3b.tar.gz"
# The same layer blobs as a, so the same DiffIDs: c is built FROM a.
push "$image_c" c "$layers/1.tar.gz" "$layers/2.tar.gz" "$layers/3a.tar.gz" "$layers/4c.tar.gz"

echo "$reg_env"
echo "IMAGE_A=$image_a"
echo "IMAGE_B=$image_b"
echo "IMAGE_C=$image_c"
