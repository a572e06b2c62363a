#!/bin/bash
# What the benchmark scripts share; sourced, after they define log and die.

# need COMMAND PACKAGE: installs the Debian package when COMMAND is missing.
need() {
	command -v "$1" >/dev/null 2>&1 && return
	log "$1 not found: apt-get install $2"
	apt-get install -y -q "$2" >&2 || die "$1 missing and apt-get install $2 failed"
	command -v "$1" >/dev/null 2>&1 || die "$1 still not found after installing $2"
}

# find_crane prints crane's path: $CRANE, else crane in PATH, else
# ~/go/bin/crane (crane=$(find_crane) || exit 1).
find_crane() {
	local c=${CRANE:-$(command -v crane || echo "$HOME/go/bin/crane")}
	[ -x "$c" ] || die "crane not found (looked for ${CRANE:-crane in PATH and $HOME/go/bin/crane}): go install github.com/google/go-containerregistry/cmd/crane@v0.22.1"
	echo "$c"
}

# build_cove REPO PATH: a static cove from the working tree at REPO
# (containers run it as their init); prints the commit, marked if the tree
# differs (cove_rev=$(build_cove "$repo" "$cove") || exit 1).
build_cove() {
	local rev
	log "building a static cove"
	"$1/scripts/build.sh" "$2" >&2 || die "scripts/build.sh (cove) failed"
	rev=$(cd "$1" && git rev-parse --short HEAD 2>/dev/null || echo unknown)
	if [ -n "$(cd "$1" && git status --porcelain --untracked-files=no -- . ':!scripts' 2>/dev/null)" ]; then
		rev="$rev (+ uncommitted changes)"
	fi
	echo "$rev"
}

# unmount_under DIR: everything mounted at or below DIR, deepest first.
unmount_under() {
	local m
	awk -v d="$1" '$2 == d || index($2, d "/") == 1 { print $2 }' /proc/self/mounts | sort -r |
		while read -r m; do
			umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "warning: could not unmount $m"
		done
}

# busybox_layer ROOTFS LAYER [MARKER]: Debian's static busybox and its
# applets as symlinks, a root user, and MARKER in /etc/bench-marker if
# given, in ROOTFS; and that tree as one gzipped layer.
busybox_layer() {
	local rootfs=$1 layer=$2 applet
	log "building the busybox rootfs from $(readlink -f /bin/busybox)"
	mkdir -p "$rootfs/bin" "$rootfs/etc" "$rootfs/proc" "$rootfs/dev" "$rootfs/sys" "$rootfs/tmp" "$rootfs/root"
	cp /bin/busybox "$rootfs/bin/busybox"
	/bin/busybox --list-full | while read -r applet; do
		if [ -z "$applet" ] || [ -e "$rootfs/$applet" ]; then continue; fi
		mkdir -p "$rootfs/$(dirname "$applet")"
		ln -s /bin/busybox "$rootfs/$applet"
	done
	if [ ! -L "$rootfs/bin/sh" ] || [ ! -L "$rootfs/bin/true" ]; then die "busybox --list-full has no bin/sh or bin/true"; fi
	chmod 1777 "$rootfs/tmp"
	echo 'root:x:0:0:root:/root:/bin/sh' >"$rootfs/etc/passwd"
	echo 'root:x:0:' >"$rootfs/etc/group"
	[ -z "${3:-}" ] || echo "$3" >"$rootfs/etc/bench-marker"
	tar -C "$rootfs" --numeric-owner --owner=0 --group=0 -czf "$layer" .
}

# push_layer CRANE LAYER REF: an image of that one layer at REF (to a
# plain-HTTP registry), with a PATH and /bin/sh as its command.
push_layer() {
	local crane=$1 layer=$2 ref=$3
	log "pushing $ref"
	"$crane" --insecure append --oci-empty-base -f "$layer" -t "$ref" >/dev/null 2>"$layer.crane.err" ||
		die "crane append failed: $(cat "$layer.crane.err")"
	"$crane" --insecure mutate --set-platform linux/amd64 --env PATH=/usr/sbin:/usr/bin:/sbin:/bin \
		--cmd /bin/sh -t "$ref" "$ref" >/dev/null 2>"$layer.crane.err" || die "crane mutate failed: $(cat "$layer.crane.err")"
}
