#!/usr/bin/env bash
# Makes the root filesystem of the Debian 12 test VM (scripts/vmdebian.sh)
# in DIR: debootstrap from the machine's Debian mirror with systemd, dbus,
# logind's PAM module and uidmap; a normal user `cove` (uid 1000) with
# /etc/subuid and /etc/subgid ranges whose systemd user manager starts at
# boot (lingering); the kernel's modules; and a unit that runs the checks
# from the data disk, then powers off. The VM script keys its cache on
# this file's content: any change here builds the image anew.
#
#   scripts/vmdebian/rootfs.sh DIR KERNEL_DIR KVER MIRROR
set -euo pipefail
dir=$1 kdir=$2 kver=$3 mirror=$4

debootstrap --variant=minbase \
	--include=systemd,systemd-sysv,dbus,dbus-user-session,libpam-systemd,uidmap,kmod,udev,util-linux,procps,curl,ca-certificates \
	bookworm "$dir" "$mirror" >"$dir.debootstrap.log" 2>&1 || {
	tail -n 30 "$dir.debootstrap.log" >&2
	exit 1
}
rm -f "$dir.debootstrap.log"

# The kernel's modules (overlay, for one), with their index.
mkdir -p "$dir/lib/modules"
cp -a "$kdir/lib/modules/$kver" "$dir/lib/modules/"
depmod -b "$dir" "$kver"

echo covevm >"$dir/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 covevm\n' >"$dir/etc/hosts"
printf '/dev/nvme0n1 / ext4 rw,noatime 0 1\n' >"$dir/etc/fstab"
chroot "$dir" useradd -m -u 1000 -s /bin/bash cove
# Ranges as useradd writes them on a desktop install (the same numbers,
# written out so that the test does not depend on login.defs).
printf 'cove:100000:65536\n' >"$dir/etc/subuid"
printf 'cove:100000:65536\n' >"$dir/etc/subgid"
# Lingering: logind starts user@1000.service at boot, the user's systemd
# with its delegated cgroup subtree, as a login would.
mkdir -p "$dir/var/lib/systemd/linger"
touch "$dir/var/lib/systemd/linger/cove"

# What a quick, quiet boot does without: gettys (they would write to the
# serial console the results are read from), timers, network waits.
for u in serial-getty@ttyS0.service getty@tty1.service apt-daily.timer apt-daily-upgrade.timer \
	dpkg-db-backup.timer e2scrub_all.timer e2scrub_reap.service fstrim.timer systemd-timesyncd.service \
	man-db.timer logrotate.timer systemd-networkd-wait-online.service; do
	ln -sf /dev/null "$dir/etc/systemd/system/$u"
done

cat >"$dir/usr/local/sbin/cove-vmtest" <<'EOS'
#!/bin/sh
# Mounts the data disk the host made for this run and runs its checks.
mkdir -p /mnt/cove
dev=$(blkid -L covedata)
if [ -z "$dev" ] || ! mount -o ro "$dev" /mnt/cove; then
	echo "VMTEST FAIL setup: no data disk labelled covedata"
	echo "VMTEST DONE"
else
	/mnt/cove/guest.sh
fi
sync
systemctl poweroff --force --force
EOS
chmod 755 "$dir/usr/local/sbin/cove-vmtest"
cat >"$dir/etc/systemd/system/cove-vmtest.service" <<'EOS'
[Unit]
Description=cove's checks on this VM
After=multi-user.target systemd-logind.service user@1000.service
Wants=user@1000.service

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/cove-vmtest
StandardOutput=tty
StandardError=tty
TTYPath=/dev/ttyS0

[Install]
WantedBy=multi-user.target
EOS
ln -sf /etc/systemd/system/cove-vmtest.service "$dir/etc/systemd/system/multi-user.target.wants/cove-vmtest.service"
# The apt lists and caches are of no use in the image.
rm -rf "$dir"/var/lib/apt/lists/* "$dir"/var/cache/apt/*.bin "$dir"/var/cache/apt/archives/*.deb
