package main

import (
	"path/filepath"

	"github.com/cove-sh/cove/internal/insideexe"
)

// insideProgram is the program name (insideexe.Init or Inside) as
// scripts/build.sh appended it to this binary (insideexe.ErrNone in a
// plain go build).
func insideProgram(name string) (insideexe.Program, error) {
	return insideexe.Open("/proc/self/exe", name)
}

// programPath is the program name written out to the data directory
// (once per build), else this binary itself, which answers the same
// command lines (slower to start: its package initialisers). cove doctor
// says which, and why.
func (e *env) programPath(name string) (string, error) {
	if p, err := insideProgram(name); err == nil {
		if path, err := p.Path(filepath.Join(e.layout.Data, "bin")); err == nil {
			return path, nil
		}
	}
	return coveBinary()
}

// initBinary is the static program a container runs as its init:
// cove-init.
func (e *env) initBinary() (string, error) { return e.programPath(insideexe.Init) }

// insideBinary is the static program a workspace runs its IDE server
// with (a Pod its file sync, the agent its MCP relay), bound at
// /.cove/cove: cove-inside.
func (e *env) insideBinary() (string, error) { return e.programPath(insideexe.Inside) }
