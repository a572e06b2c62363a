// Package dirs decides where cove keeps its state.
package dirs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// Layout is where cove keeps its state.
type Layout struct {
	Images  string // the image store (blobs and flattened root filesystems)
	Data    string // workspaces' persistent layers and settings
	Runtime string // state of running containers, sockets
	// State is the invoking user's own state directory for cove
	// (${XDG_STATE_HOME:-~/.local/state}/cove), host-only: the agent keeps
	// each project's sessions, checkpoints and saved output below it (see
	// ProjectState), never in the project, which the workspace can write.
	State string
	// StateUID and StateGID own what cove makes below State: the user who
	// ran sudo when cove runs as root through it (the state is theirs),
	// else -1 (whoever makes it).
	StateUID, StateGID int
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
	XDGStateHome  string
	// SudoUID and SudoGID are the invoking user's ids when cove runs as
	// root through sudo (SUDO_UID, SUDO_GID), else -1; SudoHome is their
	// home directory (from the user database, not the environment, which
	// sudo may have left as root's).
	SudoUID, SudoGID int
	SudoHome         string
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
		XDGStateHome:  os.Getenv("XDG_STATE_HOME"),
		SudoUID:       -1,
		SudoGID:       -1,
	}
	if rootFlag != "" {
		e.Root = rootFlag
	}
	if e.UID == 0 {
		// Only root can have been made by sudo; anyone else setting
		// SUDO_UID gains nothing from it.
		uid, errU := strconv.Atoi(os.Getenv("SUDO_UID"))
		gid, errG := strconv.Atoi(os.Getenv("SUDO_GID"))
		if errU == nil && errG == nil && uid > 0 {
			if u, err := user.LookupId(strconv.Itoa(uid)); err == nil && filepath.IsAbs(u.HomeDir) {
				e.SudoUID, e.SudoGID, e.SudoHome = uid, gid, u.HomeDir
			}
		}
	}
	return e
}

// Resolve returns the layout for e: all under Root when it is set; for
// root /var/lib/cove and /run/cove; for others the XDG directories.
func Resolve(e Env) (Layout, error) {
	l, err := resolve(e)
	if err != nil {
		return Layout{}, err
	}
	l.StateUID, l.StateGID = -1, -1
	if e.UID == 0 && e.SudoUID > 0 {
		l.StateUID, l.StateGID = e.SudoUID, e.SudoGID
	}
	return l, nil
}

func resolve(e Env) (Layout, error) {
	if e.Root != "" {
		r, err := filepath.Abs(e.Root)
		if err != nil {
			return Layout{}, err
		}
		return Layout{
			Images:  filepath.Join(r, "images"),
			Data:    filepath.Join(r, "data"),
			Runtime: filepath.Join(r, "run"),
			State:   filepath.Join(r, "state"),
		}, nil
	}
	if e.UID == 0 {
		return Layout{Images: "/var/lib/cove/images", Data: "/var/lib/cove", Runtime: "/run/cove", State: stateHome(e)}, nil
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
		State:   stateHome(e),
	}, nil
}

// stateHome is cove's directory in the invoking user's state directory:
// under sudo the user's (~user/.local/state/cove; the environment may be
// root's), else $XDG_STATE_HOME/cove (an absolute one, as the XDG spec
// says) or ~/.local/state/cove; with no home at all, a directory beside
// cove's other data.
func stateHome(e Env) string {
	switch {
	case e.UID == 0 && e.SudoUID > 0:
		return filepath.Join(e.SudoHome, ".local", "state", "cove")
	case filepath.IsAbs(e.XDGStateHome):
		return filepath.Join(e.XDGStateHome, "cove")
	case filepath.IsAbs(e.Home):
		return filepath.Join(e.Home, ".local", "state", "cove")
	case e.UID == 0:
		return "/var/lib/cove/state"
	case filepath.IsAbs(e.XDGDataHome):
		return filepath.Join(e.XDGDataHome, "cove", "state")
	}
	return filepath.Join(os.TempDir(), "cove-state-"+strconv.Itoa(e.UID))
}

// ProjectState makes (if need be) and returns the agent's state directory
// for the project named name (a workspace's name: the directory's base
// name and a hash of its path), State/projects/NAME: mode 0700, and with
// every directory cove makes on the way owned by StateUID (the user's,
// under sudo). It refuses a path whose last part is a symlink or is not
// the owner's, so that nothing is written where someone else pointed it.
func (l Layout) ProjectState(name string) (string, error) {
	if name == "" || name == "." || name == ".." || filepath.Base(name) != name {
		return "", fmt.Errorf("agent state: %q is not a project name", name)
	}
	if l.State == "" {
		return "", errors.New("agent state: no state directory (set HOME, XDG_STATE_HOME or COVE_ROOT)")
	}
	return l.ownedStateDir("agent state", filepath.Join(l.State, "projects", name))
}

// BrowserProfile makes (if need be) and returns the app window's
// browser profile, State/browser, as ProjectState makes its directories:
// a profile in a shared place (/tmp) could be made first by another user
// of this machine, with their extensions in it.
func (l Layout) BrowserProfile() (string, error) {
	if l.State == "" {
		return "", errors.New("browser profile: no state directory (set HOME, XDG_STATE_HOME or COVE_ROOT)")
	}
	return l.ownedStateDir("browser profile", filepath.Join(l.State, "browser"))
}

// ownedStateDir makes dir below State, 0700 and StateUID's, and refuses
// it when it is a symlink or someone else's; what names it in errors.
func (l Layout) ownedStateDir(what, dir string) (string, error) {
	if err := l.mkdirOwned(dir); err != nil {
		return "", fmt.Errorf("%s %s: %w", what, dir, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	want := uint32(os.Geteuid())
	if l.StateUID >= 0 {
		want = uint32(l.StateUID)
	}
	if !fi.IsDir() || !ok || st.Uid != want {
		return "", fmt.Errorf("%s %s: not a directory of uid %d; move it away", what, dir, want)
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return "", fmt.Errorf("%s: %w", what, err)
		}
	}
	return dir, nil
}

// mkdirOwned is os.MkdirAll(dir, 0o700), each directory it makes given
// to StateUID.
func (l Layout) mkdirOwned(dir string) error {
	fi, err := os.Lstat(dir)
	if err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s: not a directory", dir)
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := l.mkdirOwned(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if l.StateUID >= 0 {
		return os.Lchown(dir, l.StateUID, l.StateGID)
	}
	return nil
}

// ConfigDir is cove's directory in the user's config directory, where
// the user's own files live (settings, agent config, trust records):
// $XDG_CONFIG_HOME/cove when that is set to an absolute path (the XDG
// spec ignores a relative one), else HOME/.config/cove. The variable is
// read from the environment, as os.UserConfigDir does, and only for the
// user whose home is $HOME: a caller with another home (a test's
// temporary one, another user's) gets that home's own directory, never
// this user's files. Every path of cove's under the config directory is
// made from it, so that the variable moves all of them.
func ConfigDir(home string) string {
	if x := os.Getenv("XDG_CONFIG_HOME"); filepath.IsAbs(x) && filepath.Clean(home) == filepath.Clean(os.Getenv("HOME")) {
		return filepath.Join(x, "cove")
	}
	return filepath.Join(home, ".config", "cove")
}

// Secure makes cove's own directories (the image store, the data and
// runtime directories, and the cache directory holding the store) mode
// 0700, creating those missing and tightening those an older cove made
// 0755. What is below them keeps its modes (a root filesystem's are the
// image's; a workspace's layer holds setuid programs of its own): no
// other user of the machine reaches any of it, since every way down
// passes one of these. Docker makes its data directory 0710 (after
// CVE-2021-41091) for the sake of a remapped root that must traverse it;
// nothing of cove's needs another uid to traverse these (a container
// reaches its files through its mounts, made by its owner), so they are
// 0700. A directory of someone else's, or a symlink, is left as it is.
func (l Layout) Secure() error {
	type named struct{ what, dir string }
	var list []named
	if parent := filepath.Dir(l.Images); filepath.Base(parent) == "cove" && parent != l.Data {
		list = append(list, named{"cache directory", parent}) // $XDG_CACHE_HOME/cove: the store's
	}
	list = append(list, named{"image store", l.Images}, named{"data directory", l.Data}, named{"runtime directory", l.Runtime})
	for _, d := range list {
		if d.dir == "" {
			continue
		}
		if err := os.MkdirAll(d.dir, 0o700); err != nil {
			return fmt.Errorf("cove's %s %s: %w (set COVE_ROOT to a directory you can write)", d.what, d.dir, err)
		}
		if err := tighten(d.dir, os.Geteuid()); err != nil {
			return err
		}
	}
	if l.State != "" {
		owner := os.Geteuid()
		if l.StateUID >= 0 {
			owner = l.StateUID
		}
		if err := tighten(l.State, owner); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// tighten makes dir 0700 if it is a directory of uid's with more open.
func tighten(dir string, uid int) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != uid || fi.Mode().Perm()&0o077 == 0 {
		return nil
	}
	if err := os.Chmod(dir, fi.Mode().Perm()&0o700); err != nil {
		return fmt.Errorf("make cove's directory %s private: %w", dir, err)
	}
	return nil
}
