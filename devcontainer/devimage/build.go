// Package devimage makes the workspace image a devcontainer.json
// describes beyond an image to pull: built from the project's Dockerfile
// (its build section), with its Features installed on top. Both go
// through cove build (package build), so each step is cached and an
// unchanged file rebuilds in milliseconds to the same digest.
//
// The project is the workspace's to write: the Dockerfile is read
// through projectfs (confined, regular, bounded) into a private copy, the
// context is a directory opened confined and handed on by its descriptor
// (nothing the workspace links or renames meanwhile leads the build out
// of it), and every RUN step runs in a container with the network the
// workspace has, never on the host.
package devimage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cove-sh/cove/build"
	"github.com/cove-sh/cove/devcontainer"
	"github.com/cove-sh/cove/image"
	"github.com/cove-sh/cove/internal/projectfs"
)

// Options are what building needs from the launcher.
type Options struct {
	Store *image.Store
	// Binary is the static cove binary RUN's containers run as init.
	Binary string
	// CacheDir is cove build's step cache (shared with cove build).
	CacheDir string
	// Output receives the steps and RUN's output; nil discards them.
	Output io.Writer
	// Pull are the options FROM's pulls use (progress…).
	Pull []image.Option
	// Refresh asks the registry again for each OCI Feature reference,
	// fetched before or not (a workspace started --fresh takes a moved
	// tag's newest Feature); a layer already here is not fetched again.
	Refresh bool
}

// maxDockerfile is the most of a Dockerfile read: real ones are a few KiB.
const maxDockerfile = 1 << 20

// Build builds the image b describes from the project in dir and stores
// it under tag.
func Build(ctx context.Context, dir string, b *devcontainer.ImageBuild, tag string, o Options) (*build.Result, error) {
	d, err := projectfs.Open(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	df, err := d.ReadFileLimit(b.Dockerfile, maxDockerfile)
	if err != nil {
		return nil, fmt.Errorf("devcontainer.json's build: the Dockerfile %s: %w", b.Dockerfile, err)
	}
	ctxDir, err := d.OpenDir(b.Context)
	if err != nil {
		return nil, fmt.Errorf("devcontainer.json's build: the context %s: %w", b.Context, err)
	}
	defer ctxDir.Close()
	// The build opens .dockerignore itself: a FIFO there would hang it.
	if fi, err := d.Lstat(filepath.Join(b.Context, ".dockerignore")); err == nil && !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("devcontainer.json's build: %s: %w", filepath.Join(b.Context, ".dockerignore"), projectfs.ErrNotRegular)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("devcontainer.json's build: %w", err)
	}
	tmp, err := os.MkdirTemp("", "cove-devbuild-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	dockerfile := filepath.Join(tmp, "Dockerfile")
	if err := os.WriteFile(dockerfile, df, 0o600); err != nil {
		return nil, err
	}
	pull := o.Pull
	if b.Pull {
		pull = append(pull[:len(pull):len(pull)], image.WithPolicy(image.PullAlways))
	}
	res, err := build.Build(ctx, o.Store, build.Options{
		Context:    fmt.Sprintf("/proc/self/fd/%d", ctxDir.Fd()),
		Dockerfile: dockerfile, Tag: tag, BuildArgs: b.Args, Target: b.Target, NoCache: b.NoCache,
		Binary: o.Binary, CacheDir: o.CacheDir, Output: o.Output, Pull: pull,
		// The project's Dockerfile is untrusted: RUN gets a network of its
		// own, never the host's (build.Options.Confined).
		Confined: true,
	})
	if err != nil {
		// build names the context by the descriptor it was given: the
		// user knows it by its path.
		if inner := errors.Unwrap(err); inner != nil {
			err = inner
		}
		return nil, fmt.Errorf("build %s (devcontainer.json's build, context %s): %w", b.Dockerfile, filepath.Join(dir, b.Context), err)
	}
	return res, nil
}
