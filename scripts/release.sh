#!/bin/sh
# Builds the release into dist/: for linux/amd64 and linux/arm64 a static
# cove in cove-VERSION-linux-ARCH.tar.gz, plus SHA256SUMS and install.sh,
# flat, as a GitHub release's downloads are (so a static file server over
# dist/ is a valid COVE_DOWNLOAD_URL). Two builds of one commit give the
# same bytes.
#
#   scripts/release.sh [VERSION]      VERSION defaults to `git describe`
#   DIST=dir scripts/release.sh       another output directory
set -eu
cd "$(dirname "$0")/.."

version=${1:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
version=${version#v}
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
dist=${DIST:-dist}
# Everything that could differ between two builds is pinned: paths
# (-trimpath), build ids, VCS stamping (the commit is given explicitly),
# and the archives' times, owners and order.
epoch=$(git log -1 --format=%ct 2>/dev/null || echo 0)

rm -rf "$dist"
mkdir -p "$dist"
for arch in amd64 arm64; do
	work=$(mktemp -d)
	name=cove-$version-linux-$arch
	mkdir "$work/$name"
	GOOS=linux GOARCH=$arch scripts/build.sh "$work/$name/cove" -trimpath -buildvcs=false \
		-ldflags "-s -w -buildid= -X main.version=$version -X main.commit=$commit"
	cp README.md "$work/$name/"
	touch -d "@$epoch" "$work/$name" "$work/$name/cove" "$work/$name/README.md"
	tar -C "$work" --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner \
		-cf - "$name" | gzip -n -9 >"$dist/$name.tar.gz"
	size=$(wc -c <"$work/$name/cove")
	echo "release: $name: binary $((size / 1024 / 1024)) MB ($size bytes)" >&2
	rm -rf "$work"
done
cp install.sh "$dist/install.sh"
(cd "$dist" && sha256sum ./*.tar.gz install.sh | sed 's| \./| |' >SHA256SUMS)
echo "release: $version in $dist/" >&2
