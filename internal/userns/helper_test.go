package userns

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/cove-sh/cove/internal/testuser"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == HelperArg {
		// This test binary is the helper too, with a task that makes what
		// a container leaves: a 0700 directory and a file of uid 5.
		Main(os.Args[2:], map[string]Task{"mk": func(args []string, _ io.Reader, _ io.Writer) error {
			d := filepath.Join(args[0], "private")
			if err := os.Mkdir(d, 0o700); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(d, "f"), make([]byte, 1000), 0o600); err != nil {
				return err
			}
			if err := os.Chown(filepath.Join(d, "f"), 5, 5); err != nil {
				return err
			}
			return os.Chown(d, 5, 5)
		}})
	}
	os.Exit(m.Run())
}

// TestHelperOwnsSubordinateIDs, as a user with subordinate ids: a task
// in the helper is root over them (it makes a 0700 directory of uid 5,
// which on the host is the range's start + 4 and closed to the user);
// Usage counts what is in it and RemoveAll deletes it, neither of which
// the user can do alone.
func TestHelperOwnsSubordinateIDs(t *testing.T) {
	if testuser.Rerun(t) {
		return
	}
	m := Current()
	if !m.Helps() {
		t.Skip("no subordinate ids or newuidmap for this user")
	}
	dir := t.TempDir()
	tree := filepath.Join(dir, "tree")
	os.Mkdir(tree, 0o755)
	if _, err := Run(context.Background(), m, "mk", tree); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(tree, "private"))
	if err != nil {
		t.Fatal(err)
	}
	if uid := int(fi.Sys().(*syscall.Stat_t).Uid); uid != m.UIDSub.Start+4 {
		t.Fatalf("uid 5 in the helper is %d on the host, want %d", uid, m.UIDSub.Start+4)
	}
	if err := os.RemoveAll(tree); err == nil {
		t.Fatal("the user alone removed the directory of a subordinate id: the test proves nothing")
	}
	if n := Usage(context.Background(), tree); n != 1000 {
		t.Errorf("Usage = %d, want 1000", n)
	}
	if err := RemoveAll(context.Background(), tree); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(tree); !os.IsNotExist(err) {
		t.Errorf("%s after RemoveAll: %v", tree, err)
	}
}
