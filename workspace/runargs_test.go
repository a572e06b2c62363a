package workspace

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestEnvFileStaysInProject: runArgs' --env-file is read through the
// project's confinement: a symlink the workspace planted toward one of
// this machine's files, or a FIFO, is an error, not the file's contents
// handed to the workspace; outside the project only a trusted file's.
func TestEnvFileStaysInProject(t *testing.T) {
	project, host := t.TempDir(), t.TempDir()
	secret := filepath.Join(host, "credentials")
	os.WriteFile(secret, []byte("AWS_SECRET=hunter2\n"), 0o600)
	os.WriteFile(filepath.Join(project, "ok.env"), []byte("A=1\n"), 0o644)
	os.Symlink(secret, filepath.Join(project, "link.env"))
	os.Symlink(host, filepath.Join(project, "hostdir"))
	syscall.Mkfifo(filepath.Join(project, "fifo.env"), 0o644)
	var notes []string
	note := func(f string, a ...any) { notes = append(notes, f) }

	if vars, err := readEnvFile(true, project, "ok.env", note); err != nil || strings.Join(vars, ",") != "A=1" {
		t.Errorf("ok.env: %v %v", vars, err)
	}
	for _, p := range []string{"link.env", "hostdir/credentials", "fifo.env", filepath.Join(project, "link.env")} {
		vars, err := readEnvFile(true, project, p, note)
		if err == nil || strings.Contains(strings.Join(vars, ","), "hunter2") {
			t.Errorf("%s: %v %v: want an error", p, vars, err)
		}
	}
	if _, err := readEnvFile(true, project, "missing.env", note); err == nil || !strings.Contains(err.Error(), "write it (KEY=VALUE lines)") {
		t.Errorf("missing: %v", err)
	}
	// Outside the project: the user's own file, trusted only.
	if vars, err := readEnvFile(true, project, secret, note); err != nil || strings.Join(vars, ",") != "AWS_SECRET=hunter2" {
		t.Errorf("trusted, outside: %v %v", vars, err)
	}
	if _, err := readEnvFile(false, project, secret, note); err == nil {
		t.Error("untrusted, outside: want an error")
	}
	os.WriteFile(filepath.Join(project, "bad.env"), []byte("NOT A VAR=1\n"), 0o644)
	if _, err := readEnvFile(true, project, "bad.env", note); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("bad.env: %v", err)
	}
}
