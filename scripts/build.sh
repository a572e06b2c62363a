#!/bin/sh
# Builds cove as it is released and tested: a static binary with its
# inside program (cmd/cove-inside: what runs in containers, see package
# inside) built in. Plain `go build ./cmd/cove` makes a cove that works
# without it, each container's init then being cove itself, slower to
# start.
#
#   scripts/build.sh OUT [go build flags for cove...]
#
# GOOS/GOARCH in the environment choose the target, for both programs.
# The inside program is built reproducibly (-trimpath, no build id or VCS
# stamp, stripped) whatever the flags given for cove; it goes to
# cmd/cove/inside.zst and inside.sum (not committed), embedded by
# -tags cove_inside.
set -eu
[ $# -ge 1 ] || { echo "usage: scripts/build.sh OUT [go build flags...]" >&2; exit 2; }
out=$1
shift
repo=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export CGO_ENABLED=0 # a container's init must be static
cd "$repo"
go build -trimpath -buildvcs=false -ldflags "-s -w -buildid=" -o "$tmp/inside" ./cmd/cove-inside
go run ./scripts/packinside "$tmp/inside" "$tmp/inside.zst" "$tmp/inside.sum"
# Renamed into place: a build running beside this one reads a whole file.
mv -f "$tmp/inside.zst" cmd/cove/inside.zst
mv -f "$tmp/inside.sum" cmd/cove/inside.sum
go build -tags urfave_cli_no_docs,cove_inside "$@" -o "$out" ./cmd/cove
