package main

import (
	"path/filepath"

	"github.com/cove-sh/cove/internal/insideexe"
)

// insideProgram is cove-inside as the build put it in this binary (see
// inside_embed.go); empty in a build without it.
var insideProgram insideexe.Program

// insideBinary is the static program a container runs as its init (and a
// workspace as its IDE server, a Pod as its file sync): cove-inside,
// written out to the data directory once per build, else this binary
// itself, which answers the same command lines (slower to start: its
// package initialisers).
func (e *env) insideBinary() (string, error) {
	if p, err := insideProgram.Path(filepath.Join(e.layout.Data, "bin")); err == nil {
		return p, nil
	}
	return coveBinary()
}
