#!/bin/sh
# Builds the IDE's web UI (ide/web/src) into ide/web/dist, which is
# committed and embedded in the cove binary, so `go build` never runs npm.
# The lockfile pins every package: two runs give the same bytes, and CI
# checks that the committed dist/ is what this script makes.
set -eu
cd "$(dirname "$0")/../ide/web"
npm ci --no-audit --no-fund --loglevel=error
npm run --silent build
cp index.html dist/index.html
