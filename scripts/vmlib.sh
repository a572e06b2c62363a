#!/usr/bin/env bash
# shellcheck disable=SC2154,SC2034 # cache and work are set by the sourcing script; kver, vmlinuz and qemu_rc are for it
# Shared by the VM test scripts (scripts/vmdebian.sh, scripts/vmarm64.sh):
# packages, Debian's cloud kernels, busybox test images, the verdict.
# Source it after setting `cache` and `work`.

say() { printf '%s: %s\n' "${vm_name:-vm}" "$*" >&2; }
die() {
	say "$*"
	exit 2
}
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# apt_get ARGS...: apt-get that waits for another apt/dpkg to finish
# rather than failing on its lock.
apt_get() {
	local i out
	for i in $(seq 1 90); do
		if out=$(DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 "$@" 2>&1); then
			return 0
		fi
		if grep -qE 'Could not get lock|Unable to (acquire|lock)|is another process using it' <<<"$out"; then
			[ "$i" -eq 1 ] && say "apt is busy (another install?); waiting for its lock"
			sleep 10
			continue
		fi
		printf '%s\n' "$out" >&2
		return 1
	done
	printf '%s\n' "$out" >&2
	return 1
}

installed() { [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]; }

# need_packages PKG...: installs those not installed.
need_packages() {
	local p missing=()
	for p in "$@"; do
		installed "$p" || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	say "installing ${missing[*]}"
	apt_get install -y -q --no-install-recommends "${missing[@]}" >/dev/null || {
		apt_get update -q >/dev/null
		apt_get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
	}
	for p in "${missing[@]}"; do
		installed "$p" || die "package $p did not install"
	done
}

# deb_extract PKG DEST: downloads PKG (NAME or NAME:ARCH) with apt and
# unpacks it into DEST, once (DEST is kept).
deb_extract() {
	local pkg=$1 dest=$2 debs=$cache/debs deb base
	[ -d "$dest" ] && return 0
	base=${pkg%%:*}
	mkdir -p "$debs"
	rm -f "$debs/${base}"_*.deb
	# apt drops to the _apt user for downloads when it can write there.
	chown _apt "$debs" 2>/dev/null || true
	say "fetching $pkg"
	(cd "$debs" && apt_get download "$pkg" >/dev/null) || {
		apt_get update -q >/dev/null
		(cd "$debs" && apt_get download "$pkg" >/dev/null)
	}
	deb=$(compgen -G "$debs/${base}_*.deb" | head -n 1)
	[ -n "$deb" ] || die "apt-get download $pkg left no .deb"
	rm -rf "$dest.tmp"
	mkdir -p "$(dirname "$dest")"
	dpkg -x "$deb" "$dest.tmp"
	rm -f "$deb"
	mv "$dest.tmp" "$dest"
}

# fetch_kernel ARCH: Debian's current cloud kernel for ARCH (amd64, arm64),
# unpacked once in $cache/kernel; sets kdir, kver, vmlinuz.
fetch_kernel() {
	local arch=$1 meta pkg suffix=
	meta=linux-image-cloud-$arch
	[ "$arch" = "$(dpkg --print-architecture)" ] || suffix=:$arch
	pkg=$(apt-cache depends "$meta$suffix" 2>/dev/null | awk '$1 == "Depends:" && $2 ~ /^linux-image-/ { sub(/:.*/, "", $2); print $2; exit }')
	if [ -z "$pkg" ]; then
		apt_get update -q >/dev/null || true
		pkg=$(apt-cache depends "$meta$suffix" 2>/dev/null | awk '$1 == "Depends:" && $2 ~ /^linux-image-/ { sub(/:.*/, "", $2); print $2; exit }')
	fi
	[ -n "$pkg" ] || die "apt knows no $meta$suffix (for arm64: dpkg --add-architecture arm64 && apt-get update)"
	kdir=$cache/kernel/$pkg
	deb_extract "$pkg$suffix" "$kdir"
	vmlinuz=$(compgen -G "$kdir/boot/vmlinuz-*" | head -n 1)
	[ -n "$vmlinuz" ] || die "$pkg has no boot/vmlinuz-*"
	kver=${vmlinuz##*/vmlinuz-}
}

# busybox_rootfs DIR BUSYBOX: BUSYBOX as /bin/busybox with a link per
# applet (listed by the host's busybox, the same version).
busybox_rootfs() {
	local d=$1 bb=$2 a
	mkdir -p "$d/bin"
	cp "$bb" "$d/bin/busybox"
	for a in $(/bin/busybox --list-full); do
		[ "$a" = bin/busybox ] && continue
		mkdir -p "$d/${a%/*}"
		ln -sf /bin/busybox "$d/$a"
	done
}

# oci_image ROOTFS DEST [ARCH]: an OCI image layout of ROOTFS (one layer,
# owners as on disk) at DEST, made with umoci.
oci_image() {
	local rootfs=$1 dest=$2 arch=${3:-amd64} tmp
	tmp=$(mktemp -d "$work/oci.XXXXXX")
	tar --sort=name --numeric-owner --mtime=@0 -C "$rootfs" -cf "$tmp/layer.tar" .
	rm -rf "$dest.tmp"
	mkdir -p "$(dirname "$dest")"
	umoci init --layout "$dest.tmp"
	umoci new --image "$dest.tmp:latest"
	umoci raw add-layer --image "$dest.tmp:latest" --history.created_by "scripts/vmlib.sh" "$tmp/layer.tar"
	umoci config --image "$dest.tmp:latest" --config.cmd sh --architecture "$arch" \
		--config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
	umoci gc --layout "$dest.tmp"
	chmod -R a+rX "$dest.tmp"
	rm -rf "$dest" "$tmp"
	mv "$dest.tmp" "$dest"
}

# test_images BUSYBOX DESTDIR ARCH: two OCI layouts in DESTDIR: busybox
# (root only) and multiuser (busybox plus an `app` user, uid 1000, whose
# home and a directory in /srv belong to it).
test_images() {
	local bb=$1 dest=$2 arch=$3 r
	r=$(mktemp -d "$work/rootfs.XXXXXX")
	busybox_rootfs "$r" "$bb"
	(
		cd "$r"
		mkdir -p dev etc home root tmp var/spool/mail srv
		chmod 1777 tmp
		chmod 0700 root
		printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n' >etc/passwd
		printf 'root:x:0:\nnobody:x:65534:\n' >etc/group
	)
	oci_image "$r" "$dest/busybox" "$arch"
	(
		cd "$r"
		printf 'app:x:1000:1000:app:/home/app:/bin/sh\n' >>etc/passwd
		printf 'app:x:1000:\n' >>etc/group
		mkdir -p home/app srv/app
		echo "made by root" >srv/app/by-root
		chown -R 1000:1000 home/app srv/app
		chown 0:0 srv/app/by-root
		chmod 0750 home/app
	)
	oci_image "$r" "$dest/multiuser" "$arch"
	rm -rf "$r"
}

# verdict LOG QEMU_RC TIMEOUT: prints the summary of the VMTEST lines in
# LOG and returns 0 when every check passed and the run finished.
verdict() {
	local log=$1 qemu_rc=$2 timeout=$3 results n_pass n_fail done_seen why status=0 problems=()
	results=$(tr -d '\r' <"$log" | grep -a '^VMTEST ' || true)
	n_pass=$(grep -c '^VMTEST PASS ' <<<"$results" || true)
	n_fail=$(grep -c '^VMTEST FAIL ' <<<"$results" || true)
	done_seen=$(grep -c '^VMTEST DONE' <<<"$results" || true)
	[ "$n_fail" -gt 0 ] && status=1
	if [ "$qemu_rc" -eq 124 ] || [ "$qemu_rc" -eq 137 ]; then
		problems+=("timed out after ${timeout}s")
		status=1
	fi
	[ "$done_seen" -eq 0 ] && problems+=("no VMTEST DONE") && status=1
	[ "$((n_pass + n_fail))" -eq 0 ] && problems+=("no results") && status=1
	echo
	why=
	[ ${#problems[@]} -gt 0 ] && why=$(printf '%s, ' "${problems[@]}") && why=" (${why%, })"
	echo "$vm_name summary: $n_pass passed, $n_fail failed$why"
	grep '^VMTEST FAIL ' <<<"$results" || true
	if [ "$status" -ne 0 ]; then
		echo "---- last 60 lines of the boot log (qemu exit $qemu_rc)"
		tr -d '\r' <"$log" | tail -n 60
	fi
	return "$status"
}

# boot_qemu LOG TIMEOUT QEMU-ARGS...: runs qemu with the serial console on
# stdout into LOG, echoing the VMTEST and "vmtest:" lines as they come.
boot_qemu() {
	local log=$1 timeout=$2
	shift 2
	: >"$log"
	set +e
	timeout -k 10 "$timeout" "$@" </dev/null 2>&1 |
		tee "$log" |
		while IFS= read -r line; do
			line=${line%$'\r'}
			case $line in
			VMTEST\ * | vmtest:\ *) printf '%s\n' "$line" ;;
			esac
		done
	qemu_rc=${PIPESTATUS[0]}
	set -e
}
