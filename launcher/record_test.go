package launcher

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRecordNamesOnlyALiveLauncher: a record read back names a launcher
// that runs; once that process is gone, or the pid names another process
// (as after a reuse), the record serves nothing.
func TestRecordNamesOnlyALiveLauncher(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "launcher.json")
	sleep := exec.Command("sleep", "30")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	defer sleep.Process.Kill()
	rec := Record{URL: "http://127.0.0.1:1/?token=x", Workspace: "id", Name: "p"}
	rec.Launcher.Created = time.Now().UTC()
	if err := rec.Launcher.Track(sleep.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if err := rec.Write(path); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm()&0o077 != 0 {
		t.Errorf("the record (it holds the token) is %v (%v), want private", fi.Mode(), err)
	}
	if got, ok := Read(path); !ok || got.URL != rec.URL || got.Name != "p" {
		t.Errorf("Read = %+v, %v", got, ok)
	}
	// Another process under the recorded pid: its start time differs.
	other := rec
	other.Launcher.StartTime++
	if err := other.Write(path); err != nil {
		t.Fatal(err)
	}
	if _, ok := Read(path); ok {
		t.Error("a record whose start time names another process is taken as live")
	}
	if err := rec.Write(path); err != nil {
		t.Fatal(err)
	}
	sleep.Process.Kill()
	sleep.Wait()
	if _, ok := Read(path); ok {
		t.Error("a record of a launcher that ended is taken as live")
	}
	if _, ok := Read(path + ".none"); ok {
		t.Error("no record read as live")
	}
}

// TestBrowserCommandIsAnAppWindow: the window is an app window on the URL
// with its own profile; as root (not under sudo) Chromium needs
// --no-sandbox, and only then.
func TestBrowserCommandIsAnAppWindow(t *testing.T) {
	t.Parallel()
	cmd, err := BrowserCommand("/usr/bin/chromium", "http://127.0.0.1:9/?token=t", "/profile", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Join(cmd.Args, " ")
	for _, want := range []string{"--app=http://127.0.0.1:9/?token=t&window=app", "--user-data-dir=/profile", "--no-first-run"} {
		if !strings.Contains(args, want) {
			t.Errorf("args %q lack %q", args, want)
		}
	}
	if root := os.Getuid() == 0; strings.Contains(args, "--no-sandbox") != root {
		t.Errorf("args %q as uid %d", args, os.Getuid())
	}
	if cmd.SysProcAttr == nil || !cmd.SysProcAttr.Setsid {
		t.Error("the browser is not in a session of its own")
	}
}
