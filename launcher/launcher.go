// Package launcher is the host half of a running workspace that outlives
// no command: the claim on a workspace (one launcher a workspace, a
// second cove waits for the first), the record by which a second cove
// finds the launcher that serves it, the wait while it serves (until
// Ctrl-C, the last window gone, or the workspace stopped under it) and
// its end (the windows told, the workspace stopped), the background
// server of cove up --detach and what it reports of its log, and the app
// window it opens. cmd/cove's up parses the flags and wires these.
package launcher

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/cove-sh/cove/container"
	"github.com/cove-sh/cove/internal/atomicfile"
	"github.com/cove-sh/cove/internal/dirs"
	"github.com/cove-sh/cove/internal/procstat"
	"github.com/cove-sh/cove/workspace"
)

// Record says where a workspace's launcher serves it, so that a
// second cove in the same directory opens a window on it. The identity
// fields make sure the pid is still that launcher.
type Record struct {
	URL      string          `json:"url"`
	Launcher container.State `json:"launcher"`
	// Workspace is the ID of the workspace it serves: a launcher on its
	// way out (its workspace stopped) does not serve the next one.
	Workspace string `json:"workspace,omitempty"`
	// Name, Where and Dir say which workspace, where it runs and on which
	// project, for cove ps (a cluster's workspaces served from here).
	Name  string `json:"name,omitempty"`
	Where string `json:"where,omitempty"`
	Dir   string `json:"dir,omitempty"`
}

// Serves says whether the launcher of rec serves the workspace ws.
func (rec Record) Serves(ws workspace.Workspace) bool {
	return ws.Running() && rec.Workspace == ws.ID()
}

// Read reads the record at path and says whether its launcher still
// runs (the pid is that process, by its start time and executable).
func Read(path string) (Record, bool) {
	var rec Record
	b, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(b, &rec) != nil {
		return rec, false
	}
	return rec, rec.Launcher.Status() == container.Running
}

// Write stores rec at path, whole or not at all.
func (rec Record) Write(path string) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, b)
}

// OpenWindow opens a chromeless app window with its own profile (in the
// user's state directory), else the default browser, else leaves the
// printed URL to the user.
func OpenWindow(layout dirs.Layout, url string) error {
	profile, err := layout.BrowserProfile()
	if b := FindBrowser(); b != "" && err == nil {
		if cmd, err := BrowserCommand(b, url, profile, os.Getenv); err == nil && cmd.Start() == nil {
			go cmd.Wait()
			return nil
		}
	}
	for _, opener := range []string{"xdg-open", "open"} {
		if p, err := exec.LookPath(opener); err == nil {
			if exec.Command(p, url).Start() == nil {
				return nil
			}
		}
	}
	return nil // the URL is printed already
}

// BrowserCommand is the app window's command. Under sudo it runs as the
// user who ran sudo, with their home, so the browser keeps its sandbox and
// its files are theirs: a browser should not run as root (Chromium only
// does with --no-sandbox, which is the last resort, for a real root login).
func BrowserCommand(browser, url, profile string, getenv func(string) string) (*exec.Cmd, error) {
	uid := os.Getuid()
	var cred *syscall.Credential
	env := os.Environ()
	if os.Geteuid() == 0 {
		if u, err := user.LookupId(getenv("SUDO_UID")); err == nil && u.Uid != "0" {
			id, _ := strconv.Atoi(u.Uid)
			gid, _ := strconv.Atoi(u.Gid)
			cred = &syscall.Credential{Uid: uint32(id), Gid: uint32(gid)}
			if groups, err := u.GroupIds(); err == nil {
				for _, g := range groups {
					if n, err := strconv.Atoi(g); err == nil {
						cred.Groups = append(cred.Groups, uint32(n))
					}
				}
			}
			uid = id
			env = append(env, "HOME="+u.HomeDir, "USER="+u.Username, "LOGNAME="+u.Username)
			env = append(env, desktopEnv(os.Getppid(), id, getenv)...)
		}
	}
	// window=app tells the page it is an app window, which it may close
	// when its launcher ends (a tab in the user's browser stays).
	args := []string{"--app=" + url + "&window=app", "--user-data-dir=" + profile, "--no-first-run", "--no-default-browser-check"}
	if uid == 0 {
		args = append(args, "--no-sandbox") // Chromium refuses to run as root otherwise
	}
	cmd := exec.Command(browser, args...)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: cred}
	return cmd, nil
}

// desktopVars say where the user's desktop is; sudo's env_reset drops
// them, and without them the window has no screen to open on.
var desktopVars = []string{"DISPLAY", "WAYLAND_DISPLAY", "XAUTHORITY", "XDG_RUNTIME_DIR",
	"DBUS_SESSION_BUS_ADDRESS", "XDG_SESSION_TYPE", "XDG_CURRENT_DESKTOP"}

// desktopEnv finds, for a browser started for user uid under sudo, the
// desktop variables our environment lacks: in the environment sudo itself
// was started with (a parent of ours: sudo, or its monitor and then
// sudo), else the user's runtime dir where systemd makes it.
func desktopEnv(ppid, uid int, getenv func(string) string) []string {
	if getenv("DISPLAY") != "" || getenv("WAYLAND_DISPLAY") != "" {
		return nil
	}
	found := map[string]string{}
	for pid, hops := ppid, 0; pid > 1 && hops < 4 && len(found) == 0; hops++ {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		for _, kv := range strings.Split(string(b), "\x00") {
			k, v, _ := strings.Cut(kv, "=")
			if slices.Contains(desktopVars, k) && v != "" {
				found[k] = v
			}
		}
		if found["DISPLAY"] == "" && found["WAYLAND_DISPLAY"] == "" {
			clear(found) // not the user's session
		}
		pid = parentOf(pid)
	}
	if found["XDG_RUNTIME_DIR"] == "" {
		if dir := fmt.Sprintf("/run/user/%d", uid); isDir(dir) {
			found["XDG_RUNTIME_DIR"] = dir
		}
	}
	var env []string
	for _, k := range desktopVars {
		if v := found[k]; v != "" {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// parentOf is a process's parent, 0 if unknown.
func parentOf(pid int) int {
	f, err := procstat.Fields(pid)
	if err != nil || len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// FindBrowser is the Chromium-family browser the app window opens in:
// $COVE_BROWSER, else the first found; "" when there is none.
func FindBrowser() string {
	if b := os.Getenv("COVE_BROWSER"); b != "" {
		return b
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "microsoft-edge", "microsoft-edge-stable", "brave-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	for _, p := range []string{"/usr/bin/chromium", "/snap/bin/chromium", "/opt/google/chrome/chrome", "/opt/microsoft/msedge/msedge", "/opt/brave.com/brave/brave"} {
		if isFile(p) {
			return p
		}
	}
	return ""
}

func isFile(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// LogTail is the last n bytes of the log at path, from a line's start:
// what the server said last, where it may have printed the workspace's
// output without end before it.
func LogTail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(fi.Size()-n, 0)
	b := make([]byte, fi.Size()-off)
	k, _ := f.ReadAt(b, off)
	b = b[:k]
	if off > 0 {
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return strings.TrimSpace(string(b))
}
