package main

import (
	"path/filepath"

	"github.com/cove-sh/cove/internal/insideexe"
)

// insideProgram is cove-inside as scripts/build.sh appended it to this
// binary (insideexe.ErrNone in a plain go build).
func insideProgram() (insideexe.Program, error) {
	return insideexe.Open("/proc/self/exe")
}

// insideBinary is the static program a container runs as its init (and a
// workspace as its IDE server, a Pod as its file sync): cove-inside,
// written out to the data directory once per build, else this binary
// itself, which answers the same command lines (slower to start: its
// package initialisers). cove doctor says which, and why.
func (e *env) insideBinary() (string, error) {
	if p, err := insideProgram(); err == nil {
		if path, err := p.Path(filepath.Join(e.layout.Data, "bin")); err == nil {
			return path, nil
		}
	}
	return coveBinary()
}
