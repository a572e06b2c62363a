package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/cove-sh/cove/internal/dirs"
	"github.com/cove-sh/cove/internal/insideexe"
	"github.com/urfave/cli/v2"
)

// insideProgram is the program name (insideexe.Init or Inside) as
// scripts/build.sh appended it to this binary (insideexe.ErrNone in a
// plain go build).
func insideProgram(name string) (insideexe.Program, error) {
	return insideexe.Open("/proc/self/exe", name)
}

// programFile is the file of the program name: as root wrote it for
// every user beside a cove installed by root (systemPrograms), else
// written out to the data directory (once per build). cove doctor says
// which, or why neither.
func programFile(layout dirs.Layout, name string) (string, error) {
	p, err := insideProgram(name)
	if err != nil {
		return "", err
	}
	if dir, err := systemPrograms(); err == nil {
		if path, err := p.Installed(dir); err == nil {
			return path, nil
		}
	}
	return p.Path(filepath.Join(layout.Data, "bin"))
}

// programPath is programFile, else this binary itself, which answers the
// same command lines (slower to start: its package initialisers).
func (e *env) programPath(name string) (string, error) {
	if path, err := programFile(e.layout, name); err == nil {
		return path, nil
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

// systemPrograms is where root writes cove's inside programs for every
// user of a cove it installed: PREFIX/lib/cove beside PREFIX/bin/cove,
// when cove is root's and only root may write where it is.
func systemPrograms() (string, error) {
	exe, err := coveBinary()
	if err != nil {
		return "", err
	}
	var st syscall.Stat_t
	if err := syscall.Stat(exe, &st); err != nil {
		return "", err
	}
	if st.Uid != 0 || st.Mode&0o022 != 0 {
		return "", fmt.Errorf("%s is not root's alone", exe)
	}
	if err := insideexe.RootOnly(filepath.Dir(exe)); err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(filepath.Dir(exe)), "lib", "cove"), nil
}

// writeProgramsCommand is cove system write-programs: what install.sh
// runs as root.
func writeProgramsCommand() *cli.Command {
	return &cli.Command{
		Name:  "write-programs",
		Usage: "as root: write cove-init and cove-inside beside a cove installed by root (PREFIX/lib/cove), for every user's containers",
		Description: `install.sh runs it as root. Rootless containers then run a program the
container cannot write (no re-execution of their init: one exec fewer on each
start), and what cove runs of it on your side (the network and log helpers) is
nothing a container could have changed. Each user's cove takes the files only
while they are root's and only root's to write.`,
		Action: func(c *cli.Context) error {
			if os.Geteuid() != 0 {
				return errors.New("write-programs: run it as root (sudo cove system write-programs)")
			}
			dir, err := systemPrograms()
			if err != nil {
				return fmt.Errorf("write-programs: %w: install cove in a directory of root's (as install.sh run as root does)", err)
			}
			// Every user reads them: 0755 whatever root's umask.
			for _, d := range []string{filepath.Dir(dir), dir} {
				if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
					return fmt.Errorf("write-programs: %w", err)
				}
			}
			if err := os.Chmod(dir, 0o755); err != nil {
				return fmt.Errorf("write-programs: %w", err)
			}
			if err := insideexe.RootOnly(dir); err != nil {
				return fmt.Errorf("write-programs: %w", err)
			}
			for _, name := range []string{insideexe.Init, insideexe.Inside} {
				p, err := insideProgram(name)
				if err != nil {
					return fmt.Errorf("write-programs: %w", err)
				}
				path, err := p.Path(dir)
				if err != nil {
					return fmt.Errorf("write-programs: %w", err)
				}
				fmt.Fprintln(c.App.Writer, path)
			}
			return nil
		},
	}
}
