#!/usr/bin/env bash
# Runs cove's cgroup v2 checks on a real kernel: this host has hybrid
# cgroups, so boot Debian's cloud kernel in qemu with an initramfs holding
# busybox, a static cove and a test image, and let its /init
# (scripts/vmtest/init.sh) mount a pure cgroup v2 hierarchy and run the
# checks. See scripts/vmtest/README.md.
#
#   scripts/vmtest.sh          (as root)
#
# Environment: COVE_VM_CACHE (default /var/cache/cove-vm) keeps the kernel
# and the test image between runs; COVE_VM_TIMEOUT (default 300) bounds the
# boot in seconds; COVE_VM_KVM=1 or 0 forces KVM or TCG (default: KVM when
# /dev/kvm opens and the CPU flags show vmx or svm); COVE_VM_MODULES (default
# "overlay") names the kernel modules to load when they are not built in.
# The serial console log is kept at $COVE_VM_CACHE/last-boot.log.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
export PATH="$PATH:/usr/local/go/bin:/usr/sbin:/sbin"

cache=${COVE_VM_CACHE:-/var/cache/cove-vm}
boot_timeout=${COVE_VM_TIMEOUT:-300}
modules=${COVE_VM_MODULES:-overlay}
log_file=$cache/last-boot.log

say() { printf 'vmtest: %s\n' "$*" >&2; }
die() {
	say "$*"
	exit 2
}
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

[ "$(id -u)" -eq 0 ] || die "run as root (it installs packages, creates device nodes and writes $cache)"

t_start=$(now)
work=$(mktemp -d /tmp/cove-vmtest.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$cache"

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

install_deps() {
	local p missing=()
	for p in qemu-system-x86 cpio busybox-static umoci; do
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

# kernel: sets kver, kdir (the unpacked kernel package, cached).
fetch_kernel() {
	local pkg deb
	pkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null | awk '$1 == "Depends:" && $2 ~ /^linux-image-/ { print $2; exit }')
	if [ -z "$pkg" ]; then
		apt_get update -q >/dev/null || true
		pkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null | awk '$1 == "Depends:" && $2 ~ /^linux-image-/ { print $2; exit }')
	fi
	pkg=${pkg:-linux-image-6.1.0-57-cloud-amd64}
	kdir=$cache/kernel/$pkg
	if ! compgen -G "$kdir/boot/vmlinuz-*" >/dev/null; then
		say "fetching $pkg"
		mkdir -p "$cache/debs"
		rm -f "$cache/debs/${pkg}"_*.deb
		# apt drops to the _apt user for downloads when it can write there.
		chown _apt "$cache/debs" 2>/dev/null || true
		(cd "$cache/debs" && apt_get download "$pkg" >/dev/null) || {
			apt_get update -q >/dev/null
			(cd "$cache/debs" && apt_get download "$pkg" >/dev/null)
		}
		deb=$(compgen -G "$cache/debs/${pkg}_*.deb" | head -n 1)
		[ -n "$deb" ] || die "apt-get download $pkg left no .deb"
		rm -rf "$kdir.tmp"
		mkdir -p "$cache/kernel"
		dpkg -x "$deb" "$kdir.tmp"
		rm -rf "$kdir"
		mv "$kdir.tmp" "$kdir"
	fi
	vmlinuz=$(compgen -G "$kdir/boot/vmlinuz-*" | head -n 1)
	kver=${vmlinuz##*/vmlinuz-}
}

# modfile NAME: the path of module NAME in the unpacked kernel, if any.
modfile() {
	local n=$1 alt=${1//_/-}
	find "$kdir/lib/modules/$kver" \( -name "$n.ko*" -o -name "$alt.ko*" \) | head -n 1
}

# add_module NAME DESTDIR: puts NAME and what it depends on, decompressed,
# into DESTDIR and appends them to DESTDIR/load.list, dependencies first.
add_module() {
	local name=$1 dest=$2 f ko deps d
	grep -qx "$name.ko" "$dest/load.list" 2>/dev/null && return 0
	f=$(modfile "$name")
	if [ -z "$f" ]; then
		if grep -qE "/$name\.ko(\..*)?$" "$kdir/lib/modules/$kver/modules.builtin"; then
			return 0
		fi
		die "kernel $kver has no module $name, and it is not built in"
	fi
	ko=$dest/$name.ko
	case $f in
	*.ko) cp "$f" "$ko" ;;
	*.ko.xz) xz -dc "$f" >"$ko" ;;
	*.ko.zst) zstd -qdc "$f" >"$ko" ;;
	*.ko.gz) gzip -dc "$f" >"$ko" ;;
	*) die "module $f: unknown compression" ;;
	esac
	deps=$(tr '\0' '\n' <"$ko" | sed -n 's/^depends=//p' | head -n 1 | tr ',' ' ')
	for d in $deps; do
		add_module "$d" "$dest"
	done
	echo "$name.ko" >>"$dest/load.list"
}

# busybox_rootfs DIR: busybox with a link per applet, as the usual image.
busybox_rootfs() {
	local d=$1 a
	mkdir -p "$d/bin"
	cp /bin/busybox "$d/bin/busybox"
	for a in $(/bin/busybox --list-full); do
		[ "$a" = bin/busybox ] && continue
		mkdir -p "$d/${a%/*}"
		ln -sf /bin/busybox "$d/$a"
	done
}

# build_image: an OCI image layout of busybox in $cache, made once per
# busybox version (umoci, no registry, no network).
build_image() {
	local ver dir tmp
	ver=$(dpkg-query -W -f='${Version}' busybox-static | tr ':~+' '___')
	dir=$cache/images/busybox-$ver
	image_dir=$dir
	[ -f "$dir/index.json" ] && return 0
	say "building the busybox test image"
	tmp=$work/image
	mkdir -p "$tmp/rootfs"
	busybox_rootfs "$tmp/rootfs"
	(
		cd "$tmp/rootfs"
		mkdir -p dev etc home root tmp var/spool/mail
		chmod 1777 tmp
		chmod 0700 root
		printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n' >etc/passwd
		printf 'root:x:0:\nnobody:x:65534:\n' >etc/group
	)
	tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 \
		-C "$tmp/rootfs" -cf "$tmp/layer.tar" bin dev etc home root sbin tmp usr var
	rm -rf "$dir.tmp"
	mkdir -p "$(dirname "$dir")"
	umoci init --layout "$dir.tmp"
	umoci new --image "$dir.tmp:latest"
	umoci raw add-layer --image "$dir.tmp:latest" --history.created_by "scripts/vmtest.sh" "$tmp/layer.tar"
	umoci config --image "$dir.tmp:latest" --config.cmd sh \
		--config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
	umoci gc --layout "$dir.tmp"
	chmod -R a+rX "$dir.tmp"
	rm -rf "$dir"
	mv "$dir.tmp" "$dir"
}

# -- 1. tools, kernel, modules, image
t0=$(now)
install_deps
command -v go >/dev/null || die "go is not installed (looked in PATH and /usr/local/go/bin)"
fetch_kernel
cfg=$kdir/boot/config-$kver
overlay_cfg=$(grep -E '^(# )?CONFIG_OVERLAY_FS[= ]' "$cfg" || true)
say "kernel $kver ($overlay_cfg)"
root=$work/initramfs
mkdir -p "$root/lib/modules"
for m in $modules; do
	add_module "$m" "$root/lib/modules"
done
build_image
t_prep=$(since "$t0")

# -- 2. static cove
t0=$(now)
CGO_ENABLED=0 go build -trimpath -o "$work/cove" ./cmd/cove
t_cove=$(since "$t0")

# -- 3. initramfs
t0=$(now)
busybox_rootfs "$root"
mkdir -p "$root"/{dev,proc,sys,tmp,run,root,etc,mnt,images}
mknod -m 600 "$root/dev/console" c 5 1
mknod -m 666 "$root/dev/null" c 1 3
cp "$work/cove" "$root/bin/cove"
cp -a "$image_dir" "$root/images/busybox"
install -m 0755 "$repo/scripts/vmtest/init.sh" "$root/init"
printf 'root:x:0:0:root:/root:/bin/sh\n' >"$root/etc/passwd"
printf 'root:x:0:\n' >"$root/etc/group"
initrd=$work/initrd.gz
(cd "$root" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc -R 0:0 --quiet | gzip -1 >"$initrd")
t_initrd=$(since "$t0")
say "initramfs $(du -h "$initrd" | cut -f1) (modules: $(tr '\n' ' ' <"$root/lib/modules/load.list" 2>/dev/null))"

# -- 4. boot
# KVM only where the CPU offers hardware virtualization: a /dev/kvm that
# opens is not enough (this machine's kvm_pvm module opens, then stops the
# guest with "KVM internal error" during boot). TCG boots in a few seconds.
accel=()
kvm=${COVE_VM_KVM:-auto}
if [ "$kvm" = auto ]; then
	kvm=0
	if (exec 3<>/dev/kvm) 2>/dev/null && grep -qwE 'vmx|svm' /proc/cpuinfo; then
		kvm=1
	fi
fi
[ "$kvm" = 1 ] && accel=(-enable-kvm -cpu host)
say "booting ($([ ${#accel[@]} -gt 0 ] && echo KVM || echo TCG), timeout ${boot_timeout}s)"
: >"$log_file"
t0=$(now)
set +e
timeout -k 10 "$boot_timeout" qemu-system-x86_64 -m 1024 -smp 2 -nographic -no-reboot \
	"${accel[@]}" -nic none \
	-kernel "$vmlinuz" -initrd "$initrd" \
	-append "console=ttyS0 quiet panic=-1" </dev/null 2>&1 |
	tee "$log_file" |
	while IFS= read -r line; do
		line=${line%$'\r'}
		case $line in
		"VMTEST DONE"*)
			printf '%s\n' "$line"
			now >"$work/done_at"
			;;
		VMTEST\ * | vmtest:\ *) printf '%s\n' "$line" ;;
		esac
	done
qemu_rc=${PIPESTATUS[0]}
set -e
t_boot=$(since "$t0")
t_done=-
[ -f "$work/done_at" ] && t_done=$(awk -v a="$t0" -v b="$(cat "$work/done_at")" 'BEGIN { printf "%.1f", b - a }')

# -- 5. verdict
results=$(tr -d '\r' <"$log_file" | grep -a '^VMTEST ' || true)
n_pass=$(grep -c '^VMTEST PASS ' <<<"$results" || true)
n_fail=$(grep -c '^VMTEST FAIL ' <<<"$results" || true)
done_seen=$(grep -c '^VMTEST DONE' <<<"$results" || true)
status=0
problems=()
[ "$n_fail" -gt 0 ] && status=1
if [ "$qemu_rc" -eq 124 ] || [ "$qemu_rc" -eq 137 ]; then
	problems+=("timed out after ${boot_timeout}s")
	status=1
fi
[ "$done_seen" -eq 0 ] && problems+=("no VMTEST DONE") && status=1
[ "$((n_pass + n_fail))" -eq 0 ] && problems+=("no results") && status=1

echo
why=
[ ${#problems[@]} -gt 0 ] && why=$(printf '%s, ' "${problems[@]}") && why=" (${why%, })"
echo "vmtest summary: $n_pass passed, $n_fail failed$why"
grep '^VMTEST FAIL ' <<<"$results" || true
printf 'vmtest timings: prepare %ss (tools, kernel, image), cove build %ss, initramfs %ss, boot to DONE %ss, boot total %ss, all %ss\n' \
	"$t_prep" "$t_cove" "$t_initrd" "$t_done" "$t_boot" "$(since "$t_start")"
echo "vmtest boot log: $log_file"
if grep -qa 'KVM internal error' "$log_file"; then
	echo "vmtest: KVM failed to run the guest; run with COVE_VM_KVM=0 for TCG"
fi
if [ "$status" -ne 0 ]; then
	echo "---- last 40 lines of the boot log (qemu exit $qemu_rc)"
	tr -d '\r' <"$log_file" | tail -n 40
fi
exit "$status"
