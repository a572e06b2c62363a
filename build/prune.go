package build

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cove-sh/cove/image"
	"github.com/cove-sh/cove/internal/userns"
	"golang.org/x/sys/unix"
)

// CacheReport says what PruneCache removed.
type CacheReport struct {
	Steps  int // step cache entries (a layer each)
	Mounts int // RUN --mount=type=cache directories
	// Features are fetched devcontainer Features (devcontainer/devimage keeps
	// them beside the steps), fetched again when next needed.
	Features int
	Bytes    int64 // bytes of files freed
}

// PruneCache removes from the build cache in cacheDir (Options.CacheDir)
// the steps whose layer no image in store has, and what killed builds
// left; with all, every step, every RUN --mount=type=cache directory and
// every fetched devcontainer Feature.
// It waits (until ctx ends) for builds in progress, which may be using
// any step as a lower layer.
func PruneCache(ctx context.Context, cacheDir string, store *image.Store, all bool) (rep CacheReport, err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("prune the build cache %s: %w", cacheDir, err)
		}
	}()
	if _, err := os.Stat(cacheDir); errors.Is(err, os.ErrNotExist) {
		return rep, nil
	}
	lock, err := lockCache(ctx, cacheDir, unix.LOCK_EX)
	if err != nil {
		return rep, err
	}
	defer lock.Close()
	used := map[string]bool{}
	if !all {
		entries, err := store.List()
		if err != nil {
			return rep, err
		}
		for _, e := range entries {
			for _, l := range e.Image.Layers {
				used[l.String()] = true
			}
		}
	}
	steps := filepath.Join(cacheDir, "steps")
	dirs, err := os.ReadDir(steps)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return rep, err
	}
	for _, d := range dirs {
		p := filepath.Join(steps, d.Name())
		if !strings.HasPrefix(d.Name(), ".tmp-") && !all {
			raw, err := os.ReadFile(filepath.Join(p, "entry.json"))
			var e cacheEntry
			if err == nil && json.Unmarshal(raw, &e) == nil && used[e.Layer.Digest.String()] {
				continue
			}
		}
		n := userns.Usage(ctx, p)
		if err := userns.RemoveAll(ctx, p); err != nil {
			return rep, err
		}
		rep.Bytes += n
		if !strings.HasPrefix(d.Name(), ".tmp-") {
			rep.Steps++
		}
	}
	// No build runs: every scratch directory is a killed build's.
	top, _ := os.ReadDir(cacheDir)
	for _, d := range top {
		if strings.HasPrefix(d.Name(), ".tmp-") {
			p := filepath.Join(cacheDir, d.Name())
			rep.Bytes += userns.Usage(ctx, p)
			if err := userns.RemoveAll(ctx, p); err != nil {
				return rep, err
			}
		}
	}
	if all {
		n, bytes, err := emptyDir(ctx, filepath.Join(cacheDir, "mounts"), func(string) bool { return true })
		rep.Mounts, rep.Bytes = n, rep.Bytes+bytes
		if err != nil {
			return rep, err
		}
		// A Feature is a record (ref-…, url-…) and the layer it names.
		n, bytes, err = emptyDir(ctx, filepath.Join(cacheDir, "features"), func(name string) bool {
			return strings.HasPrefix(name, "ref-") || strings.HasPrefix(name, "url-")
		})
		rep.Features, rep.Bytes = n, rep.Bytes+bytes
		if err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// emptyDir removes everything in dir, and says how many of the names
// counts counted and how many bytes of files went.
func emptyDir(ctx context.Context, dir string, counts func(name string) bool) (n int, bytes int64, err error) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		bytes += userns.Usage(ctx, p)
		if err := userns.RemoveAll(ctx, p); err != nil {
			return n, bytes, err
		}
		if counts(e.Name()) {
			n++
		}
	}
	return n, bytes, nil
}

// lockCache takes the build cache's lock: builds hold it shared while
// they run, PruneCache alone.
func lockCache(ctx context.Context, cacheDir string, how int) (*os.File, error) {
	if err := os.MkdirAll(cacheDir, 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(cacheDir, "lock"), os.O_CREATE|os.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock: %w", err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
