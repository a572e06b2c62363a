#!/bin/sh
# Installs cove: curl -fsSL https://github.com/cove-sh/cove/releases/latest/download/install.sh | sh
#
# Environment:
#   COVE_VERSION       the version to install (default: the latest release)
#   COVE_DOWNLOAD_URL  a directory holding one release's files (default: the GitHub releases)
#   COVE_INSTALL_DIR   where cove goes (default: /usr/local/bin as root, else ~/.local/bin)
# Options:
#   --dry-run          say what would be done, change nothing
#
# Everything is inside main, called on the last line: a download cut off
# half-way runs nothing.

main() {
	set -eu
	# Tests point this at a directory standing in for / (its proc/sys and
	# etc/apparmor.d); empty on a real install.
	sysroot=${COVE_TEST_SYSROOT:-}
	dry_run=0
	for arg in "$@"; do
		case $arg in
		--dry-run) dry_run=1 ;;
		-h | --help)
			# Not read from "$0": piped into sh, that is the shell.
			cat <<'EOF'
Installs cove: curl -fsSL https://github.com/cove-sh/cove/releases/latest/download/install.sh | sh
(options after: ... | sh -s -- --dry-run)

Environment:
  COVE_VERSION       the version to install (default: the latest release)
  COVE_DOWNLOAD_URL  a directory holding one release's files (default: the GitHub releases)
  COVE_INSTALL_DIR   where cove goes (default: /usr/local/bin as root, else ~/.local/bin)
Options:
  --dry-run          say what would be done, change nothing
  -h, --help         this
EOF
			return 0
			;;
		*) die "unknown option $arg (try --dry-run)" ;;
		esac
	done

	os=$(uname -s)
	case $os in
	Linux) ;;
	Darwin) die "cove runs on Linux: it uses Linux namespaces and cgroups. On a Mac, run it in a Linux VM (for example with Lima or OrbStack) and install it there." ;;
	MINGW* | MSYS* | CYGWIN* | Windows*) die "cove runs on Linux. On Windows, install it inside WSL 2." ;;
	*) die "cove runs on Linux, not $os." ;;
	esac
	case $(uname -m) in
	x86_64 | amd64) arch=amd64 ;;
	aarch64 | arm64) arch=arm64 ;;
	*) die "no cove build for $(uname -m): there are linux/amd64 and linux/arm64 builds (or build from source: CGO_ENABLED=0 go install -tags urfave_cli_no_docs ./cmd/cove)" ;;
	esac

	if command -v curl >/dev/null 2>&1; then
		fetch=curl
	elif command -v wget >/dev/null 2>&1; then
		fetch=wget
	else
		die "neither curl nor wget is installed: install one of them"
	fi
	if command -v sha256sum >/dev/null 2>&1; then
		sha=sha256sum
	elif command -v shasum >/dev/null 2>&1; then
		sha="shasum -a 256"
	else
		die "neither sha256sum nor shasum is installed, so the download cannot be verified: install coreutils (or perl's shasum)"
	fi

	base=${COVE_DOWNLOAD_URL:-https://github.com/cove-sh/cove/releases}
	version=${COVE_VERSION:-latest}
	if [ -n "${COVE_DOWNLOAD_URL:-}" ] && [ "$version" != latest ]; then
		die "COVE_VERSION=$version and COVE_DOWNLOAD_URL together: COVE_DOWNLOAD_URL names one release's files; point it at version $version's (or unset COVE_VERSION)"
	elif [ -n "${COVE_DOWNLOAD_URL:-}" ]; then
		url=$base
	elif [ "$version" = latest ]; then
		url=$base/latest/download
	else
		url=$base/download/v${version#v}
	fi

	if [ -n "${COVE_INSTALL_DIR:-}" ]; then
		dir=$COVE_INSTALL_DIR
	elif [ "$(id -u)" = 0 ]; then
		dir=/usr/local/bin
	else
		dir=${HOME:?HOME is not set: set COVE_INSTALL_DIR}/.local/bin
	fi

	tmp=$(mktemp -d 2>/dev/null || mktemp -d -t cove-install)
	trap 'rm -rf "$tmp"' EXIT INT TERM

	say "downloading SHA256SUMS from $url"
	download "$url/SHA256SUMS" "$tmp/SHA256SUMS" || die "cannot download $url/SHA256SUMS: no release there, or the network is down"
	# The archive's name carries the version; SHA256SUMS says which it is.
	archive=$(sed -n "s/^[0-9a-f]\{64\}  \(cove-[^ ]*-linux-$arch\.tar\.gz\)\$/\1/p" "$tmp/SHA256SUMS" | head -n 1)
	[ -n "$archive" ] || die "SHA256SUMS at $url lists no linux-$arch archive"
	want=$(sed -n "s/^\([0-9a-f]\{64\}\)  $archive\$/\1/p" "$tmp/SHA256SUMS")

	if [ "$dry_run" = 1 ]; then
		say "would download $url/$archive, check it against sha256 $want, and install cove into $dir"
		check_runtime
		return 0
	fi

	say "downloading $archive"
	download "$url/$archive" "$tmp/$archive" || die "cannot download $url/$archive (cut off or missing): nothing was installed"
	got=$($sha "$tmp/$archive" | cut -d' ' -f1)
	[ "$got" = "$want" ] || die "$archive does not match SHA256SUMS (got $got, want $want): the download is corrupt or tampered with; nothing was installed"

	mkdir -p "$tmp/x"
	tar -xzf "$tmp/$archive" -C "$tmp/x" || die "cannot unpack $archive: nothing was installed"
	new=$(find "$tmp/x" -type f -name cove | head -n 1)
	[ -n "$new" ] || die "$archive holds no cove binary: nothing was installed"
	chmod 755 "$new"
	installed=$("$new" version 2>/dev/null | head -n 1) || die "the downloaded cove does not run on this machine: nothing was installed"

	mkdir -p "$dir" || die "cannot create $dir: set COVE_INSTALL_DIR to a directory you can write"
	# Copy beside the target, then rename over it: atomic, and a running
	# cove keeps its old file.
	cp "$new" "$dir/.cove.new.$$" 2>/dev/null || die "cannot write to $dir: run as root, or set COVE_INSTALL_DIR"
	mv -f "$dir/.cove.new.$$" "$dir/cove" || die "cannot install into $dir"
	say "installed $installed in $dir/cove"
	apparmor_profile "$dir/cove"
	# As root: cove's inside programs beside it, root's, for every user
	# (rootless containers then run an init they cannot write: one exec
	# fewer per start). A cove installed where root alone may not write
	# says why and goes on without them.
	if [ "$(id -u)" = 0 ]; then
		"$dir/cove" system write-programs >/dev/null 2>"$tmp/programs" ||
			say "note: cove system write-programs: $(cat "$tmp/programs") (each user's cove writes its own copies instead)"
	fi

	case ":$PATH:" in
	*":$dir:"*) ;;
	*) say "$dir is not on your PATH: add it, e.g. echo 'export PATH=\"$dir:\$PATH\"' >> ~/.profile" ;;
	esac
	check_runtime
	say "next: cd my-project && cove"
}

say() { printf 'cove-install: %s\n' "$*" >&2; }

die() {
	printf 'cove-install: error: %s\n' "$*" >&2
	exit 1
}

download() {
	if [ "$fetch" = curl ]; then
		curl -fsSL --retry 2 -o "$2" "$1"
	else
		wget -q -O "$2" "$1"
	fi
}

# apparmor_profile BIN: where AppArmor refuses unprivileged user namespaces
# (Ubuntu 23.10 and later) and we are root, installs and loads a profile
# that lets BIN use them, as Ubuntu's own profiles for podman and Chromium
# do (the same text as cove doctor --apparmor-profile).
apparmor_profile() {
	[ "$(cat "${sysroot}/proc/sys/kernel/apparmor_restrict_unprivileged_userns" 2>/dev/null || echo 0)" = 1 ] || return 0
	[ "$(id -u)" = 0 ] || return 0
	mkdir -p "${sysroot}/etc/apparmor.d" || return 0
	cat >"${sysroot}/etc/apparmor.d/cove" <<EOF || { say "note: cannot write ${sysroot}/etc/apparmor.d/cove"; return 0; }
# cove: lets $1 create user namespaces, which
# kernel.apparmor_restrict_unprivileged_userns=1 refuses to unconfined
# programs. Written by cove's install.sh (or cove doctor --apparmor-profile).
abi <abi/4.0>,
include <tunables/global>

profile cove $1 flags=(unconfined) {
  userns,

  include if exists <local/cove>
}
EOF
	say "wrote ${sysroot}/etc/apparmor.d/cove: AppArmor lets $1 use user namespaces"
	if [ -z "$sysroot" ] && command -v apparmor_parser >/dev/null 2>&1; then
		apparmor_parser -r /etc/apparmor.d/cove || say "note: apparmor_parser -r /etc/apparmor.d/cove failed: load it by hand"
	fi
}

# check_runtime says what cove will miss at run time; it never fails.
check_runtime() {
	userns=$(cat /proc/sys/user/max_user_namespaces 2>/dev/null || echo 0)
	clone=$(cat /proc/sys/kernel/unprivileged_userns_clone 2>/dev/null || echo 1)
	apparmor=$(cat "${sysroot}/proc/sys/kernel/apparmor_restrict_unprivileged_userns" 2>/dev/null || echo 0)
	if [ "$userns" = 0 ] || [ "$clone" = 0 ]; then
		say "missing: user namespaces are off (cove needs them unless run as root): sudo sysctl -w user.max_user_namespaces=15000 kernel.unprivileged_userns_clone=1"
	elif [ "$apparmor" = 1 ] && [ -f "${sysroot}/etc/apparmor.d/cove" ]; then
		say "ok: user namespaces (AppArmor restricts them; ${sysroot}/etc/apparmor.d/cove allows cove)"
	elif [ "$apparmor" = 1 ]; then
		say "missing: AppArmor refuses unprivileged user namespaces here (kernel.apparmor_restrict_unprivileged_userns=1): run this installer as root to install a profile for cove, or: cove doctor --apparmor-profile | sudo tee /etc/apparmor.d/cove >/dev/null && sudo apparmor_parser -r /etc/apparmor.d/cove (or sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0)"
	else
		say "ok: user namespaces"
	fi
	if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
		say "ok: cgroup v2 (memory, pids and cpu limits)"
	else
		say "note: no cgroup v2 here (v1 or hybrid): limits work only as root, through cgroup v1"
	fi
	if command -v newuidmap >/dev/null 2>&1 && command -v newgidmap >/dev/null 2>&1; then
		say "ok: newuidmap and newgidmap"
	else
		say "note: no newuidmap/newgidmap (package uidmap): rootless containers get one id only"
	fi
	if command -v pasta >/dev/null 2>&1; then
		say "ok: pasta (containers get a network of their own)"
	else
		say "missing: pasta (package passt: sudo apt install passt, or dnf install passt): containers' own network needs it; without it only --net host (your network, loopback included) or --net none work"
	fi
	for b in chromium chromium-browser google-chrome google-chrome-stable microsoft-edge brave-browser; do
		if command -v "$b" >/dev/null 2>&1; then
			say "ok: browser for the app window: $b"
			return 0
		fi
	done
	say "note: no Chromium, Chrome, Edge or Brave: cove will open your default browser or print the URL"
}

main "$@"
