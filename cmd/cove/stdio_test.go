package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cove-sh/cove/internal/testregistry"
)

// TestStdioFilesAreNotHandedOver: a host file or directory given as a
// container's standard stream (cove exec/run/shell < FILE, > FILE) reaches
// it through a pipe, never as the descriptor itself, which the container
// could open again through /proc/self/fd/N as the host's file: a
// read-only stdin is not written over, a directory given as stdin shows
// nothing of what it holds, and the bytes still flow both ways.
func TestStdioFilesAreNotHandedOver(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	ref := testregistry.Push(t, addr, layered(t))
	root := t.TempDir()
	if r := runProc(t, root, "", "run", "-d", "--name", "box", ref, "sleep", "300"); r.code != 0 {
		t.Fatalf("run -d: %+v", r)
	}
	t.Cleanup(func() { runProc(t, root, "", "rm", "-f", "box") })
	host := t.TempDir()
	dump := filepath.Join(host, "dump.sql")
	if err := os.WriteFile(dump, []byte("original\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(host, "canary"), []byte("host-canary-bytes\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Each: read stdin, then try to write over it and read a file beside
	// it, through the descriptor.
	script := "cat; echo PWNED > /proc/self/fd/0; cat /proc/self/fd/0/canary; ls /proc/self/fd/0/; true"
	for _, args := range [][]string{
		{"exec", "-i", "box", "sh", "-c", script},
		{"exec", "box", "sh", "-c", script},
		{"run", "--rm", "-i", ref, "sh", "-c", script},
	} {
		name := strings.Join(args[:2], " ")
		// stdin a read-only file, stdout a file.
		in, err := os.Open(dump)
		if err != nil {
			t.Fatal(err)
		}
		outPath := filepath.Join(t.TempDir(), "out")
		out, err := os.Create(outPath)
		if err != nil {
			t.Fatal(err)
		}
		cmd, _, errb := coveProc(root, args...)
		cmd.Stdin, cmd.Stdout = in, out
		err = cmd.Run()
		in.Close()
		out.Close()
		if err != nil {
			t.Fatalf("cove %s: %v: %s", name, err, errb)
		}
		if b, _ := os.ReadFile(dump); string(b) != "original\n" {
			t.Errorf("cove %s: the container wrote over the host file given as its stdin: now %q", name, b)
		}
		if b, _ := os.ReadFile(outPath); !strings.HasPrefix(string(b), "original\n") {
			t.Errorf("cove %s: stdout (a file) got %q, want the stdin's bytes first", name, b)
		}
		// stdin a directory.
		dir, err := os.Open(host)
		if err != nil {
			t.Fatal(err)
		}
		cmd, stdout, errb := coveProc(root, args...)
		cmd.Stdin = dir
		cmd.Run()
		dir.Close()
		if got := stdout.String() + errb.String(); strings.Contains(got, "host-canary-bytes") || strings.Contains(got, "dump.sql") {
			t.Errorf("cove %s: the container read the host directory given as its stdin:\n%s", name, got)
		}
	}
}
