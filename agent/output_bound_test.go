package agent

import (
	"context"
	"encoding/json"
	"github.com/cove-sh/cove/internal/execfile"
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

// TestProjectToolOutputIsBounded: a project tool (.cove/tools/, the
// workspace's to write) that prints without end, asked for its schema or
// called, leaves the launcher holding at most MaxToolOutput of it, and the
// call's answer says it was cut; before, all of it was kept.
func TestProjectToolOutputIsBounded(t *testing.T) {
	dir := t.TempDir()
	tools := filepath.Join(dir, ".cove", "tools")
	os.MkdirAll(tools, 0o755)
	execfile.Write(filepath.Join(tools, "flood"), []byte("#!/bin/sh\nhead -c 314572800 /dev/zero\n"), 0o755)
	execfile.Write(filepath.Join(tools, "big"), []byte(`#!/bin/sh
if [ "$1" = --schema ]; then
  echo '{"description":"prints a lot","schema":{"type":"object"}}'
  exit 0
fi
head -c 314572800 /dev/zero
`), 0o755)
	var before, after syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	loaded, broken := LoadProjectTools(context.Background(), dir, LocalRunner(dir))
	if len(loaded) != 1 || len(broken) != 1 || !strings.HasSuffix(broken[0].Path, "flood") {
		t.Fatalf("loaded %v, broken %+v", loaded, broken)
	}
	act, err := loaded[0].Plan(context.Background(), json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := act.Do(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	if grew := (after.Maxrss - before.Maxrss) << 10; grew > 200<<20 {
		t.Errorf("the launcher's memory grew by %d MB for 2×300 MB of a tool's output", grew>>20)
	}
	if len(got) > MaxToolOutput+100 || !strings.HasSuffix(got, "[output cut at 1048576 bytes]") {
		t.Errorf("the call's answer: %d bytes, ends %q", len(got), got[max(0, len(got)-60):])
	}
}
