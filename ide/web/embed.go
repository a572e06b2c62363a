// Package web holds the IDE's built web UI (see scripts/build-web.sh).
package web

import (
	"embed"
	"io/fs"
)

//go:embed dist
var dist embed.FS

// Dist is the built UI: index.html, app.js and app.css.
func Dist() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // the embed above guarantees the directory
	}
	return sub
}
