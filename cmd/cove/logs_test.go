package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cove-sh/cove/internal/testregistry"
)

func TestTailOffset(t *testing.T) {
	t.Parallel()
	var long strings.Builder
	for i := range 20000 {
		fmt.Fprintf(&long, "line %d\n", i)
	}
	cases := []struct {
		text string
		n    int
		want string
	}{
		{"a\nb\nc\n", 1, "c\n"},
		{"a\nb\nc\n", 2, "b\nc\n"},
		{"a\nb\nc", 1, "c"},
		{"a\nb\nc", 3, "a\nb\nc"},
		{"a\nb\nc\n", 9, "a\nb\nc\n"},
		{"a\nb\nc\n", 0, ""},
		{"", 3, ""},
		{"\n\n", 1, "\n"},
		{long.String(), 2, "line 19998\nline 19999\n"}, // across 32 KiB blocks
	}
	for _, c := range cases {
		path := filepath.Join(t.TempDir(), "log")
		os.WriteFile(path, []byte(c.text), 0o644)
		f, _ := os.Open(path)
		off, err := tailOffset(f, c.n)
		f.Close()
		if err != nil || c.text[off:] != c.want {
			t.Errorf("last %d lines of %.20q: %q (%v), want %q", c.n, c.text, c.text[off:], err, c.want)
		}
	}
}

// TestLogs: what a detached container writes is there to read, its tail,
// and followed until the container stops; one not detached says why it
// has no log.
func TestLogs(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	ref := testregistry.Push(t, addr, layered(t))
	root := t.TempDir()
	r := runProc(t, root, "", "run", "-d", "--name", "talker", ref, "sh", "-c", "echo one; echo two >&2; read x </dev/null; until test -e /tmp/go; do sleep 0.05; done; echo three; sleep 30")
	if r.code != 0 {
		t.Fatalf("run -d: %+v", r)
	}
	t.Cleanup(func() { runProc(t, root, "", "rm", "-f", "talker") })
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(runProc(t, root, "", "logs", "talker").stdout, "two") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if r := runProc(t, root, "", "logs", "talker"); r.code != 0 || !strings.HasPrefix(r.stdout, "one\ntwo\n") {
		t.Fatalf("logs: %+v", r)
	}
	if r := runProc(t, root, "", "logs", "-n", "1", "talker"); !strings.HasPrefix(r.stdout, "two\n") {
		t.Errorf("logs -n 1: %+v", r)
	}
	// -f: the line written later arrives, and the stop ends it.
	cmd, _, errb := coveProc(root, "logs", "-f", "talker")
	cmd.Stdout = nil
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The third line only now, whatever the machine's load: -n 1 above
	// saw the second as the last.
	if r := runProc(t, root, "", "exec", "talker", "touch", "/tmp/go"); r.code != 0 {
		t.Fatalf("exec: %+v", r)
	}
	lines := bufio.NewScanner(out)
	var got []string
	for lines.Scan() {
		if got = append(got, lines.Text()); lines.Text() == "three" {
			break
		}
	}
	if strings.Join(got, ",") != "one,two,three" {
		t.Fatalf("logs -f: %q %s", got, errb)
	}
	runProc(t, root, "", "stop", "-t", "1", "talker")
	done := make(chan error, 1)
	go func() {
		for lines.Scan() {
		}
		done <- cmd.Wait()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("logs -f after the stop: %v %s", err, errb)
		}
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("logs -f did not end when the container stopped")
	}
	// A container run in the foreground has none, and says why.
	runProc(t, root, "", "run", "--name", "quiet", ref, "true")
	if r := runProc(t, root, "", "logs", "quiet"); r.code == 0 || !strings.Contains(r.stderr, "cove run -d") {
		t.Errorf("logs of a foreground container: %+v", r)
	}
}
