#!/bin/sh
# Builds cove as it is released and tested: a static binary with its
# inside programs appended: cmd/cove-init (a container's init) and
# cmd/cove-inside (what runs in a workspace: its IDE server, see package
# inside). Plain `go build ./cmd/cove` makes a cove that works without
# them, each container's init then being cove itself, slower to start.
#
#   scripts/build.sh OUT [go build flags for cove...]
#
# GOOS/GOARCH in the environment choose the target, for both programs.
# The inside programs are built reproducibly (-trimpath, no build id or
# VCS stamp, stripped) whatever the flags given for cove, and appended to
# OUT compressed (scripts/appendinside; internal/insideexe reads them).
set -eu
[ $# -ge 1 ] || { echo "usage: scripts/build.sh OUT [go build flags...]" >&2; exit 2; }
out=$1
shift
repo=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export CGO_ENABLED=0 # a container's init must be static
case $out in /*) ;; *) out=$PWD/$out ;; esac
cd "$repo"
go build -trimpath -buildvcs=false -ldflags "-s -w -buildid=" -o "$tmp/inside" ./cmd/cove-inside
go build -trimpath -buildvcs=false -ldflags "-s -w -buildid=" -o "$tmp/init" ./cmd/cove-init
go build -tags urfave_cli_no_docs "$@" -o "$tmp/cove" ./cmd/cove
GOOS='' GOARCH='' go build -o "$tmp/appendinside" ./scripts/appendinside
"$tmp/appendinside" cove-inside "$tmp/inside" "$tmp/cove"
"$tmp/appendinside" cove-init "$tmp/init" "$tmp/cove"
mv -f "$tmp/cove" "$out"
