package dirs

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestStateDir: the agent's state is in the invoking user's state
// directory: theirs under sudo (whatever HOME says), XDG_STATE_HOME when
// absolute, else ~/.local/state; under COVE_ROOT with the rest.
func TestStateDir(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  Env
		want string
		uid  int
	}{
		{"user", Env{UID: 1000, Home: "/home/u", SudoUID: -1}, "/home/u/.local/state/cove", -1},
		{"XDG_STATE_HOME", Env{UID: 1000, Home: "/home/u", XDGStateHome: "/s", SudoUID: -1}, "/s/cove", -1},
		{"relative XDG_STATE_HOME", Env{UID: 1000, Home: "/home/u", XDGStateHome: "s", SudoUID: -1}, "/home/u/.local/state/cove", -1},
		{"root", Env{UID: 0, Home: "/root", SudoUID: -1}, "/root/.local/state/cove", -1},
		{"sudo", Env{UID: 0, Home: "/root", XDGStateHome: "/root/s", SudoUID: 1000, SudoGID: 1000, SudoHome: "/home/u"}, "/home/u/.local/state/cove", 1000},
		{"COVE_ROOT", Env{Root: "/r", UID: 1000, Home: "/home/u", SudoUID: -1}, "/r/state", -1},
	} {
		l, err := Resolve(tc.env)
		if err != nil || l.State != tc.want || l.StateUID != tc.uid {
			t.Errorf("%s: %q uid %d (%v), want %q uid %d", tc.name, l.State, l.StateUID, err, tc.want, tc.uid)
		}
	}
}

// TestProjectStateOwned: as root for a sudo user, every directory made on
// the way is theirs and the project's is 0700; a name with a slash is
// refused.
func TestProjectStateOwned(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	const user = 12345
	home := t.TempDir()
	os.Chown(home, user, user)
	l, err := Resolve(Env{UID: 0, Home: "/root", SudoUID: user, SudoGID: user, SudoHome: home})
	if err != nil {
		t.Fatal(err)
	}
	dir, err := l.ProjectState("p-abc")
	if err != nil {
		t.Fatal(err)
	}
	for p := dir; p != home; p = filepath.Dir(p) {
		fi, err := os.Lstat(p)
		if err != nil || fi.Sys().(*syscall.Stat_t).Uid != user || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v %v", p, fi.Mode(), err)
		}
	}
	for _, name := range []string{"../x", "a/b", "..", ""} {
		if _, err := l.ProjectState(name); err == nil {
			t.Errorf("%q taken", name)
		}
	}
}

// TestBrowserProfileIsTheUsers: the app window's profile is a 0700
// directory of the user's state, made theirs under sudo; one planted as a
// symlink, or another user's, is refused (in /tmp, where it was, anyone
// could make it first).
func TestBrowserProfileIsTheUsers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	const user = 12345
	home := t.TempDir()
	os.Chown(home, user, user)
	l, err := Resolve(Env{UID: 0, Home: "/root", SudoUID: user, SudoGID: user, SudoHome: home})
	if err != nil {
		t.Fatal(err)
	}
	dir, err := l.BrowserProfile()
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(dir); err != nil || !strings.HasPrefix(dir, home+"/") || fi.Sys().(*syscall.Stat_t).Uid != user || fi.Mode().Perm() != 0o700 {
		t.Errorf("profile %s: %v %v", dir, fi.Mode(), err)
	}
	os.Remove(dir)
	os.Symlink(t.TempDir(), dir)
	if _, err := l.BrowserProfile(); err == nil || !strings.Contains(err.Error(), "browser profile") || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("a symlinked profile: %v", err)
	}
	os.Remove(dir)
	os.Mkdir(dir, 0o700)
	os.Chown(dir, 4242, 4242)
	if _, err := l.BrowserProfile(); err == nil || !strings.Contains(err.Error(), "not a directory of uid 12345") {
		t.Errorf("another user's profile: %v", err)
	}
}
