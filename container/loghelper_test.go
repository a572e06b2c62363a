package container

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestLogHelperKeepsTheLogBounded: what goes into the pipe reaches the
// log file; past maxLog the log moves to log.1 and starts again, so that
// no workload fills the disk; the helper ends when the writer is gone.
func TestLogHelperKeepsTheLogBounded(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "log")
	w, err := StartLogHelper(coveBin, path)
	must(t, err)
	chunk := bytes.Repeat([]byte("x"), 1<<20)
	for range maxLog>>20 + 1 {
		if _, err := w.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	w.Write([]byte("last line\n"))
	w.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		if bytes.HasSuffix(b, []byte("last line\n")) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the log has %d bytes, and not the last line", len(b))
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, p := range []string{path, path + ".1"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > maxLog || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %d bytes, mode %v; want at most %d, 0600", p, fi.Size(), fi.Mode(), maxLog)
		}
	}
}
