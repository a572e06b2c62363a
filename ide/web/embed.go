// Package web holds the IDE's built web UI (see scripts/build-web.sh).
package web

import (
	"embed"
	"io/fs"
)

//go:embed dist
var dist embed.FS

// Dist is the built UI: index.html, app.js, app.css, the chunks app.js
// loads on demand (chunks/), and each gzipped (NAME.gz).
func Dist() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // the embed above guarantees the directory
	}
	return sub
}
