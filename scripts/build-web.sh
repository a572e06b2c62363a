#!/bin/sh
# Builds the IDE's web UI (ide/web/src) into ide/web/dist, which is
# committed and embedded in the cove binary, so `go build` never runs npm.
# The lockfile pins every package: two runs give the same bytes, and CI
# checks that the committed dist/ is what this script makes. The entry
# (app.js, app.css) loads at once; languages, the merge view and markdown
# are chunks loaded on first use. Each file is also gzipped here (-n: no
# name or time inside, so the bytes repeat), for the server to send as is.
set -eu
cd "$(dirname "$0")/../ide/web"
npm ci --no-audit --no-fund --loglevel=error
rm -rf dist
npm run --silent build
cp index.html boot.js favicon.svg dist/
find dist -type f \( -name '*.js' -o -name '*.css' -o -name '*.html' -o -name '*.svg' \) -exec gzip -9nk {} +
