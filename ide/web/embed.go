// Package web holds the IDE's built web UI (see scripts/build-web.sh).
package web

import (
	"embed"
	"io/fs"
)

// Only the gzipped files: every browser takes them as they are, and the
// rare client that does not gets them unzipped as it asks (ide's static
// handler). The plain ones beside them in dist/ would add 2.2 MB to cove.
//
//go:embed dist/*.gz dist/chunks/*.gz
var dist embed.FS

// Dist is the built UI, each file gzipped (NAME.gz): index.html, app.js,
// app.css and the chunks app.js loads on demand (chunks/).
func Dist() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // the embed above guarantees the directory
	}
	return sub
}
