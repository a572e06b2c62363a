#!/usr/bin/env bash
# Runs cove's cgroup v2 checks on a real kernel: this host has hybrid
# cgroups, so boot Debian's cloud kernel in qemu with an initramfs holding
# busybox, a static cove and a test image, and let its /init
# (scripts/vmtest/init.sh) mount a pure cgroup v2 hierarchy and run the
# checks. See scripts/vmtest/README.md.
#
#   scripts/vmtest.sh                  (as root)
#   COVE_VM_ARCH=arm64 scripts/vmtest.sh
#                                      the released arm64 binary
#                                      (scripts/release.sh) on Debian's arm64
#                                      cloud kernel, in qemu-system-aarch64
#
# Environment: COVE_VM_CACHE (default /var/cache/cove-vm) keeps the kernel
# and the test image between runs; COVE_VM_TIMEOUT (default 300) bounds the
# boot in seconds; COVE_VM_KVM=1 or 0 forces KVM or TCG (default: KVM when
# /dev/kvm opens and the CPU flags show vmx or svm); COVE_VM_MODULES (default
# "overlay") names the kernel modules to load when they are not built in.
# The serial console log is kept at $COVE_VM_CACHE/last-boot.log
# (last-boot-arm64.log for arm64).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
export PATH="$PATH:/usr/local/go/bin:/usr/sbin:/sbin"

cache=${COVE_VM_CACHE:-/var/cache/cove-vm}
boot_timeout=${COVE_VM_TIMEOUT:-300}
modules=${COVE_VM_MODULES:-overlay}
arch=${COVE_VM_ARCH:-amd64}
case $arch in
amd64) log_file=$cache/last-boot.log ;;
arm64) log_file=$cache/last-boot-arm64.log ;;
*) echo "vmtest: COVE_VM_ARCH=$arch: amd64 or arm64" >&2 && exit 2 ;;
esac
vm_name=vmtest
[ "$arch" = amd64 ] || vm_name=vmtest-$arch

# shellcheck source=scripts/vmlib.sh disable=SC2154 # kdir, kver, vmlinuz: set by its fetch_kernel
. "$repo/scripts/vmlib.sh"

[ "$(id -u)" -eq 0 ] || die "run as root (it installs packages, creates device nodes and writes $cache)"

t_start=$(now)
work=$(mktemp -d /tmp/cove-vmtest.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$cache"

install_deps() {
	if [ "$arch" = arm64 ]; then
		if ! dpkg --print-foreign-architectures | grep -qx arm64; then
			say "adding the arm64 architecture to dpkg (for the arm64 kernel and busybox)"
			dpkg --add-architecture arm64
			apt_get update -q >/dev/null
		fi
		need_packages qemu-system-arm cpio busybox-static umoci xz-utils
	else
		need_packages qemu-system-x86 cpio busybox-static umoci
	fi
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

# build_image: the busybox test images (OCI layouts, see vmlib.sh's
# test_images) for $arch in $cache, made once per busybox version.
build_image() {
	local ver dir
	ver=$(dpkg-query -W -f='${Version}' busybox-static | tr ':~+' '___')
	dir=$cache/images/$arch-busybox-$ver
	image_dir=$dir/busybox
	[ -f "$dir/multiuser/index.json" ] && return 0
	say "building the busybox test images for $arch"
	rm -rf "$dir"
	test_images "$busybox" "$dir" "$arch"
}

# -- 1. tools, kernel, modules, image
t0=$(now)
install_deps
command -v go >/dev/null || die "go is not installed (looked in PATH and /usr/local/go/bin)"
fetch_kernel "$arch"
busybox=/bin/busybox
if [ "$arch" != "$(dpkg --print-architecture)" ]; then
	# The same busybox for the other architecture, from its .deb.
	deb_extract "busybox-static:$arch" "$cache/busybox-$arch-$(dpkg-query -W -f='${Version}' busybox-static | tr ':~+' '___')"
	busybox=$(compgen -G "$cache/busybox-$arch-*/bin/busybox" | head -n 1)
fi
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

# -- 2. static cove: for arm64 the released binary, as scripts/release.sh
# builds it and install.sh unpacks it.
t0=$(now)
if [ "$arch" = amd64 ]; then
	scripts/build.sh "$work/cove" -trimpath
else
	DIST=$work/dist scripts/release.sh 0.0.0-vmtest
	tar -xzf "$work/dist/cove-0.0.0-vmtest-linux-$arch.tar.gz" -C "$work" --strip-components=1 "cove-0.0.0-vmtest-linux-$arch/cove"
fi
t_cove=$(since "$t0")

# -- 3. initramfs
t0=$(now)
busybox_rootfs "$root" "$busybox"
mkdir -p "$root"/{dev,proc,sys,tmp,run,root,etc,mnt,images}
mknod -m 600 "$root/dev/console" c 5 1
mknod -m 666 "$root/dev/null" c 1 3
cp "$work/cove" "$root/bin/cove"
cp -a "$image_dir" "$root/images/busybox"
cp -a "${image_dir%/busybox}/multiuser" "$root/images/multiuser"
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
[ "$kvm" = 1 ] && [ "$arch" = amd64 ] && accel=(-enable-kvm -cpu host)
if [ "$arch" = amd64 ]; then
	qemu=(qemu-system-x86_64)
	console=ttyS0
else
	# TCG: cortex-a72 emulates faster than "max" (no pointer
	# authentication or SVE to emulate).
	qemu=(qemu-system-aarch64 -M virt -cpu cortex-a72)
	console=ttyAMA0
fi
say "booting ($([ ${#accel[@]} -gt 0 ] && echo KVM || echo TCG), timeout ${boot_timeout}s)"
: >"$log_file"
t0=$(now)
set +e
timeout -k 10 "$boot_timeout" "${qemu[@]}" -m 1024 -smp 2 -nographic -no-reboot \
	"${accel[@]}" -nic none \
	-kernel "$vmlinuz" -initrd "$initrd" \
	-append "console=$console quiet panic=-1" </dev/null 2>&1 |
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
echo "$vm_name summary: $n_pass passed, $n_fail failed$why"
grep '^VMTEST FAIL ' <<<"$results" || true
printf '%s timings: prepare %ss (tools, kernel, image), cove build %ss, initramfs %ss, boot to DONE %ss, boot total %ss, all %ss\n' \
	"$vm_name" "$t_prep" "$t_cove" "$t_initrd" "$t_done" "$t_boot" "$(since "$t_start")"
echo "$vm_name boot log: $log_file"
if grep -qa 'KVM internal error' "$log_file"; then
	echo "vmtest: KVM failed to run the guest; run with COVE_VM_KVM=0 for TCG"
fi
if [ "$status" -ne 0 ]; then
	echo "---- last 40 lines of the boot log (qemu exit $qemu_rc)"
	tr -d '\r' <"$log_file" | tail -n 40
fi
exit "$status"
