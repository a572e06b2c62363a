// Package dirs decides where cove keeps its state.
package dirs

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// Layout is where cove keeps its state.
type Layout struct {
	Images  string // the image store (blobs and flattened root filesystems)
	Data    string // workspaces' persistent layers and settings
	Runtime string // state of running containers, sockets
}

// Env is the part of the environment the layout depends on; cmd/cove reads
// it once, so that nothing below it reads the environment.
type Env struct {
	Root          string // COVE_ROOT or --root: everything below one directory
	UID           int
	Home          string
	XDGCacheHome  string
	XDGDataHome   string
	XDGRuntimeDir string
}

// FromOS reads Env from the process environment. rootFlag, if set, wins
// over COVE_ROOT.
func FromOS(rootFlag string) Env {
	e := Env{
		Root:          os.Getenv("COVE_ROOT"),
		UID:           os.Geteuid(),
		Home:          os.Getenv("HOME"),
		XDGCacheHome:  os.Getenv("XDG_CACHE_HOME"),
		XDGDataHome:   os.Getenv("XDG_DATA_HOME"),
		XDGRuntimeDir: os.Getenv("XDG_RUNTIME_DIR"),
	}
	if rootFlag != "" {
		e.Root = rootFlag
	}
	return e
}

// Resolve returns the layout for e: all under Root when it is set; for
// root /var/lib/cove and /run/cove; for others the XDG directories.
func Resolve(e Env) (Layout, error) {
	if e.Root != "" {
		r, err := filepath.Abs(e.Root)
		if err != nil {
			return Layout{}, err
		}
		return Layout{
			Images:  filepath.Join(r, "images"),
			Data:    filepath.Join(r, "data"),
			Runtime: filepath.Join(r, "run"),
		}, nil
	}
	if e.UID == 0 {
		return Layout{Images: "/var/lib/cove/images", Data: "/var/lib/cove", Runtime: "/run/cove"}, nil
	}
	if e.Home == "" && (e.XDGCacheHome == "" || e.XDGDataHome == "") {
		return Layout{}, fmt.Errorf("neither HOME nor XDG_CACHE_HOME and XDG_DATA_HOME are set: set COVE_ROOT")
	}
	cache := e.XDGCacheHome
	if cache == "" {
		cache = filepath.Join(e.Home, ".cache")
	}
	data := e.XDGDataHome
	if data == "" {
		data = filepath.Join(e.Home, ".local", "share")
	}
	run := e.XDGRuntimeDir
	if run == "" {
		run = filepath.Join(os.TempDir(), "cove-"+strconv.Itoa(e.UID))
	}
	return Layout{
		Images:  filepath.Join(cache, "cove", "images"),
		Data:    filepath.Join(data, "cove"),
		Runtime: filepath.Join(run, "cove"),
	}, nil
}
