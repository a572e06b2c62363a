package agent

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestBashToolKeepsBoundedOutput: what a command prints is the workspace's
// to choose, and a command may print without end (cat /dev/zero, a test
// looping on one long line). The launcher keeps a bounded head and tail of
// it, in memory and in the saved file, however much comes, and says how
// much it left out; before, it held all of it (400 MB here, and the saved
// file as large), which can run the host out of memory.
func TestBashToolKeepsBoundedOutput(t *testing.T) {
	w, err := OpenWorkspace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	out := t.TempDir()
	b := &BashTool{W: w, Out: out}
	defer b.Close()
	const total = 400 << 20
	var before syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	act, err := b.Plan(context.Background(), json.RawMessage(`{"command":"head -c 419430400 /dev/zero | tr '\\0' x; echo; echo the-end","timeout":120}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := act.Do(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var after syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	if grew := (after.Maxrss - before.Maxrss) << 10; grew > 200<<20 {
		t.Errorf("the launcher's memory grew by %d MB for %d MB of output: it kept what it should not", grew>>20, total>>20)
	}
	if !strings.HasSuffix(got, "the-end") || !strings.Contains(got, "bytes left out") || len(got) > 2*clipAt {
		t.Errorf("the model's view: %d bytes, ends %q", len(got), got[max(0, len(got)-80):])
	}
	names, _ := os.ReadDir(out)
	for _, n := range names {
		fi, err := os.Stat(filepath.Join(out, n.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > int64(32<<20)+clipAt+1024 {
			t.Errorf("saved %s: %d bytes, want at most about %d", n.Name(), fi.Size(), 32<<20)
		}
	}
	if len(names) != 1 {
		t.Errorf("saved files: %v, want one", names)
	}
}
