// Package testuser runs a test again as an unprivileged user, for tests
// of what root is let past: root reads a directory chmod 000 closes, so a
// test of what cannot be read, run as root, would pass whether or not the
// code under test minds.
package testuser

import (
	"context"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Name is the user the test runs as: scripts/test.sh makes it.
const Name = "covetest"

// envChild marks the process Rerun started.
const envChild = "COVE_TEST_UNPRIVILEGED"

// Rerun makes the calling test run as a user other than root. As root, it
// runs the test binary again with only that test, as the user Name, fails
// t if that run fails (with its output), and returns true: the caller
// then returns, the other run having done its work. As any other user
// (that run among them), it returns false and the caller goes on. With no
// such user, it skips t.
func Rerun(t *testing.T) bool {
	t.Helper()
	if os.Geteuid() != 0 {
		return false
	}
	if os.Getenv(envChild) != "" {
		t.Fatalf("the run as %s is still root", Name)
	}
	u, err := user.Lookup(Name)
	if err != nil {
		t.Skipf("needs a user other than root (root reads what chmod 000 closes): no user %s (scripts/test.sh makes it)", Name)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	// The test binary sits in go's build directory, closed to others: a
	// copy in a directory the user may enter, and a TMPDIR it owns.
	dir, err := os.MkdirTemp("", "cove-testuser-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	tmp := filepath.Join(dir, "tmp")
	bin := filepath.Join(dir, "test")
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(tmp, uid, gid); err != nil {
		t.Fatal(err)
	}
	if err := copyFile(os.Args[0], bin); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), envChild+"=1", "TMPDIR="+tmp, "HOME="+tmp)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Errorf("%s as %s: %v\n%s", t.Name(), Name, err, out)
	} else {
		t.Logf("passed as %s", Name)
	}
	return true
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
