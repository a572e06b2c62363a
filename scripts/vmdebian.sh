#!/usr/bin/env bash
# Runs cove on the host most people have: Debian 12 with systemd and a pure
# cgroup v2 hierarchy, booted for real under qemu (Debian's cloud kernel,
# a debootstrapped root filesystem), as a normal user in the systemd user
# manager's delegated subtree and as root. The guest's checks
# (scripts/vmdebian/guest.sh) print one line each on the serial console:
#   VMTEST PASS user/NAME | VMTEST FAIL root/NAME: detail
# and this script fails if any check fails or the run does not finish.
#
#   scripts/vmdebian.sh          (as root)
#
# The root filesystem image is built once (debootstrap from the machine's
# Debian mirror, then mkfs.ext4 -d: no loop mount) and kept in
# $COVE_VM_CACHE (default /var/cache/cove-vm), keyed by the kernel and
# scripts/vmdebian/rootfs.sh; each run boots it with snapshot=on (the image
# is never written) and a small data disk holding this tree's cove, the
# checks and the test images. COVE_VM_TIMEOUT (default 600) bounds the boot;
# COVE_DEBIAN_MIRROR picks the mirror (default http://deb.debian.org/debian).
# The serial console log is kept at $COVE_VM_CACHE/debian-last-boot.log.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
export PATH="$PATH:/usr/local/go/bin:/usr/sbin:/sbin"
vm_name=vmdebian
cache=${COVE_VM_CACHE:-/var/cache/cove-vm}
boot_timeout=${COVE_VM_TIMEOUT:-600}
log_file=$cache/debian-last-boot.log
# shellcheck source=scripts/vmlib.sh disable=SC2154 # kdir, kver, vmlinuz, qemu_rc: set by its functions
. "$repo/scripts/vmlib.sh"

[ "$(id -u)" -eq 0 ] || die "run as root (it installs packages, runs debootstrap and writes $cache)"
t_start=$(now)
mkdir -p "$cache"
work=$(mktemp -d /tmp/cove-vmdebian.XXXXXX)
trap 'rm -rf "$work"' EXIT

# -- 1. tools, kernel, root filesystem image (cached)
t0=$(now)
need_packages qemu-system-x86 debootstrap e2fsprogs busybox-static umoci kmod
fetch_kernel amd64
mirror=${COVE_DEBIAN_MIRROR:-http://deb.debian.org/debian}
key=$( (cat scripts/vmdebian/rootfs.sh; echo "$kver") | sha256sum | cut -c 1-16)
base=$cache/debian12-$key.img
t_build=-
if [ ! -f "$base" ]; then
	say "building the Debian 12 image ($base): debootstrap from $mirror"
	tb=$(now)
	rm -f "$cache"/debian12-*.img # images of older inputs
	rootfs=$work/rootfs
	scripts/vmdebian/rootfs.sh "$rootfs" "$kdir" "$kver" "$mirror"
	mkfs.ext4 -q -F -L coveroot -d "$rootfs" "$work/root.img" 3G >/dev/null
	rm -rf "$rootfs"
	mv "$work/root.img" "$base"
	t_build=$(since "$tb")
	say "image built in ${t_build}s ($(du -h "$base" | cut -f1) used of 3G)"
fi
t_prep=$(since "$t0")

# -- 2. this tree's cove, the checks and the test images on a data disk
t0=$(now)
data=$work/data
mkdir -p "$data/images"
scripts/build.sh "$data/cove" -trimpath
install -m 0755 scripts/vmdebian/guest.sh "$data/guest.sh"
images=$cache/images/amd64-busybox-$(dpkg-query -W -f='${Version}' busybox-static | tr ':~+' '___')
[ -f "$images/multiuser/index.json" ] || { rm -rf "$images" && test_images /bin/busybox "$images" amd64; }
cp -a "$images/busybox" "$images/multiuser" "$data/images/"
mkfs.ext4 -q -F -L covedata -d "$data" "$work/data.img" 256M >/dev/null
t_data=$(since "$t0")

# -- 3. boot: the root image read-only (snapshot), the data disk; no network
accel=()
if [ "${COVE_VM_KVM:-auto}" = 1 ] || { [ "${COVE_VM_KVM:-auto}" = auto ] && (exec 3<>/dev/kvm) 2>/dev/null && grep -qwE 'vmx|svm' /proc/cpuinfo; }; then
	accel=(-enable-kvm -cpu host)
fi
say "booting $kver ($([ ${#accel[@]} -gt 0 ] && echo KVM || echo TCG), timeout ${boot_timeout}s)"
t0=$(now)
boot() {
	boot_qemu "$log_file" "$boot_timeout" qemu-system-x86_64 -m 2048 -smp 2 -nographic -no-reboot "${accel[@]}" -nic none \
		-drive "file=$base,format=raw,if=none,id=root,snapshot=on" -device nvme,drive=root,serial=root \
		-drive "file=$work/data.img,format=raw,if=none,id=data,readonly=on" -device nvme,drive=data,serial=data \
		-kernel "$vmlinuz" \
		-append "root=/dev/nvme0n1 rw console=ttyS0 quiet loglevel=4 sysctl.kernel.hung_task_timeout_secs=20 panic=-1 systemd.unified_cgroup_hierarchy=1 systemd.show_status=0"
}
boot
# A guest whose kernel locked up in its own boot, before any check ran
# (soft lockups and RCU stalls of udev and dbus under TCG, seen once in
# 2026-12-03's CI at 28 s of boot), says nothing of cove: it boots again,
# once, and says so. A hang once the checks run is a failure as any other.
if ! tr -d '\r' <"$log_file" | grep -aq '^VMTEST ' && grep -aqE 'soft lockup|rcu_preempt self-detected stall' "$log_file"; then
	cp "$log_file" "$log_file.hung"
	say "the guest's kernel locked up in its boot before any check ran (log: $log_file.hung): booting it again, once"
	boot
fi
t_boot=$(since "$t0")

status=0
verdict "$log_file" "$qemu_rc" "$boot_timeout" || status=1
# Each way of running cove must have reported: a mode whose run broke
# before its first check would otherwise pass unseen.
for mode in user login root; do
	if ! tr -d '\r' <"$log_file" | grep -aqE "^VMTEST (PASS|FAIL) $mode/"; then
		echo "$vm_name: no results as $mode"
		status=1
	fi
done
printf '%s timings: prepare %ss (image build %ss), data disk %ss, boot to poweroff %ss, all %ss\n' \
	"$vm_name" "$t_prep" "$t_build" "$t_data" "$t_boot" "$(since "$t_start")"
echo "$vm_name boot log: $log_file"
exit "$status"
