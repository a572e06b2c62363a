// Command hostilesync is a hostile workspace's own "cove sync-serve": it
// answers the launcher's sync calls from the real project copy, but lies
// in the way the file .attack in that copy names. The kube tests put it
// where cove's binary is in the Pod, as any process in the workspace can
// (/.cove is the Pod's to write), to show what the host side of the sync
// refuses.
package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/cove-sh/cove/workspace/filesync"
)

func main() {
	// Called as cove is: sync-serve DIR.
	dir := os.Args[len(os.Args)-1]
	d, err := filesync.OpenDir(dir, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	filesync.Serve(stdio{os.Stdin, os.Stdout}, &liar{Dir: d, dir: dir})
}

type stdio struct {
	io.Reader
	io.WriteCloser
}

// liar is the project copy with the attack of the moment on top.
type liar struct {
	*filesync.Dir
	dir string
}

// attack reads the attack's name and its argument (a host path the test
// hopes stays untouched).
func (l *liar) attack() (string, string) {
	b, _ := os.ReadFile(filepath.Join(l.dir, ".attack"))
	mode, arg, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
	return mode, arg
}

func file(data string, perm fs.FileMode) filesync.Entry {
	return filesync.Entry{Mode: perm, Size: int64(len(data)), Sum: filesync.Sum([]byte(data))}
}

// invented are the entries each attack adds to an honest scan, and what
// a read of each answers.
func invented(mode, arg string) (map[string]filesync.Entry, map[string]string) {
	const payload = "#!/bin/sh\necho pwned\n"
	e, data := map[string]filesync.Entry{}, map[string]string{}
	add := func(p string, en filesync.Entry, d string) { e[p], data[p] = en, d }
	switch mode {
	case "escape": // arg: the outside directory's path relative to the project
		add(arg+"/pwned", file(payload, 0o755), payload)
	case "middle":
		add("a/../"+arg+"/pwned", file(payload, 0o755), payload)
	case "absolute": // arg: the outside directory's absolute path
		add(arg+"/pwned", file(payload, 0o755), payload)
	case "git":
		add(".git/hooks/post-checkout", file(payload, 0o755), payload)
	case "subgit":
		add("vendor/x/.git/config", file("[core]\n\tfsmonitor = touch /tmp/pwned\n", 0o644), "[core]\n\tfsmonitor = touch /tmp/pwned\n")
	case "nul":
		add("a\x00b", file(payload, 0o644), payload)
	case "link": // arg: the outside directory's absolute path
		add("ln", filesync.Entry{Mode: fs.ModeSymlink | 0o777, Size: int64(len(arg)), Sum: filesync.Sum([]byte(arg))}, arg)
		add("ln/pwned", file(payload, 0o755), payload)
	case "gitlink":
		add("g", filesync.Entry{Mode: fs.ModeSymlink | 0o777, Size: 4, Sum: filesync.Sum([]byte(".git"))}, ".git")
		add("g/hooks/pre-commit", file(payload, 0o755), payload)
	case "setuid":
		add("suid", file(payload, fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky|0o777), payload)
	case "special":
		add("dev", file(payload, fs.ModeDevice|fs.ModeCharDevice|0o666), payload)
		add("fifo", file(payload, fs.ModeNamedPipe|0o666), payload)
		add("sock", file(payload, fs.ModeSocket|0o666), payload)
	case "sum": // listed as one content, read as another
		e["sum.txt"] = file("honest\n", 0o644)
		data["sum.txt"] = "dishonest\n"
	case "huge": // listed small, read as more than cove ever takes
		e["huge"] = file("small\n", 0o644)
		data["huge"] = strings.Repeat("x", filesync.MaxFileSize+(1<<20))
	}
	return e, data
}

func (l *liar) Scan(ctx context.Context) (filesync.Listing, error) {
	ls, err := l.Dir.Scan(ctx)
	if err != nil {
		return ls, err
	}
	delete(ls.Entries, ".attack")
	e, _ := invented(l.attack())
	for p, en := range e {
		ls.Entries[p] = en
	}
	return ls, nil
}

func (l *liar) Read(ctx context.Context, p string) ([]byte, error) {
	if _, data := invented(l.attack()); data[p] != "" {
		return []byte(data[p]), nil
	}
	return l.Dir.Read(ctx, p)
}
