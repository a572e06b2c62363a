// Package projectwalk lists, searches and reads a project's files on the
// host, beneath the project's root, deciding in-process what its ignore
// rules hide. The host never runs git on a project: the project,
// .git/config included, is written by the workspace, and git started by
// the host in it would run whatever that config names (core.fsmonitor,
// hooks, filters) as the host user, root under sudo.
//
// In a git project (one with .git at its root) the rules are git's:
// .gitignore files at every level, .git/info/exclude, and the host user's
// global excludes file (never one the project names), with negation,
// directory-only, anchored and ** patterns, matched by go-git's gitignore
// package. A directory the rules hide is not entered, as git does, so a
// file in it cannot be re-included. Files git tracks although a rule
// ignores them are hidden too, as ripgrep and VS Code's search do: their
// list lives in the index, a binary file the workspace writes, and the
// host does not parse it. Elsewhere every file is listed but those in
// .git and node_modules.
//
// Symlinks are listed as files and never followed; .git directories are
// skipped; rule files and the files searched are opened without following
// a symlink or blocking on a FIFO, must be regular files, and are read up
// to a cap.
package projectwalk

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
)

// Options are what the host, never the project, adds to the rules. The
// zero value adds nothing.
type Options struct {
	// ExcludesFile is the host user's global excludes file (git's
	// core.excludesFile; UserExcludesFile gives git's default), read on
	// the host like the user's own config. Empty: none.
	ExcludesFile string
}

// UserExcludesFile is where git looks for the user's global excludes
// when core.excludesFile is not set: $XDG_CONFIG_HOME/git/ignore, else
// ~/.config/git/ignore. cmd/cove passes the host user's home and
// XDG_CONFIG_HOME; "" when both are empty.
func UserExcludesFile(home, xdgConfigHome string) string {
	if xdgConfigHome != "" {
		return filepath.Join(xdgConfigHome, "git", "ignore")
	}
	if home == "" {
		return ""
	}
	return filepath.Join(home, ".config", "git", "ignore")
}

// Tree is a project directory opened for walking. Every path it takes
// and gives is relative to the root (slash-separated); none leads
// outside it (os.Root refuses). A Tree is safe for concurrent use; close
// it when done.
type Tree struct {
	root *os.Root
	git  bool                // .git at the root: git's ignore rules apply
	base []gitignore.Pattern // the host user's global excludes
}

// Open opens the project at dir. A global excludes file that cannot be
// read (missing, not a regular file, over MaxRulesSize) is left out.
func Open(dir string, opts *Options) (*Tree, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open project %s: %w", dir, err)
	}
	t := &Tree{root: root}
	if _, err := root.Lstat(".git"); err == nil {
		t.git = true
	}
	if t.git && opts != nil && opts.ExcludesFile != "" {
		if b, err := readHostFile(opts.ExcludesFile, MaxRulesSize); err == nil {
			t.base = parseRules(b, nil)
		}
	}
	return t, nil
}

// Close releases the root.
func (t *Tree) Close() error { return t.root.Close() }

// entry is a file a walk found: a regular file, or a symlink (listed,
// never followed).
type entry struct {
	path    string
	regular bool
}

// Files lists the files under the relative path under ("" or "." for the
// whole project; a file gives itself) that the rules let through, sorted
// byte-wise as git ls-files sorts them. Under inside an ignored directory
// lists nothing.
func (t *Tree) Files(ctx context.Context, under string) ([]string, error) {
	es, err := t.walk(ctx, under)
	if err != nil {
		return nil, err
	}
	files := make([]string, len(es))
	for i, e := range es {
		files[i] = e.path
	}
	return files, nil
}

// Ignored lists the names in the directory dir (relative) that the rules
// hide, sorted: everything in it when dir is itself hidden; never .git.
// The IDE's tree dims them.
func (t *Tree) Ignored(ctx context.Context, dir string) ([]string, error) {
	comps, err := split(dir)
	if err != nil {
		return nil, err
	}
	ps, hidden, err := t.rulesDown(comps)
	if err != nil {
		return nil, err
	}
	entries, err := t.readDir(comps)
	if err != nil {
		return nil, err
	}
	if !hidden {
		ps = t.rulesIn(comps, entries, ps)
	}
	names := []string{}
	for _, e := range entries {
		if e.Name() == ".git" {
			continue
		}
		if hidden || t.hides(ps, append(slices.Clip(comps), e.Name()), e.IsDir()) {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// walk finds the files under under, sorted by path.
func (t *Tree) walk(ctx context.Context, under string) ([]entry, error) {
	comps, err := split(under)
	if err != nil {
		return nil, err
	}
	ps, hidden, err := t.rulesDown(comps)
	if err != nil || hidden {
		return nil, err
	}
	if len(comps) > 0 {
		fi, err := t.root.Lstat(strings.Join(comps, "/"))
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", under, err)
		}
		if !fi.IsDir() {
			if listed(fi.Mode()) {
				return []entry{{path: strings.Join(comps, "/"), regular: fi.Mode().IsRegular()}}, nil
			}
			return nil, nil
		}
	}
	var out []entry
	if err := t.walkDir(ctx, comps, ps, &out); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b entry) int { return strings.Compare(a.path, b.path) })
	return out, nil
}

// walkDir adds the files in the directory comps, whose parents' rules are
// ps, and in its subdirectories, to out. A directory that cannot be read
// is left out, as a walk that ignores errors does.
func (t *Tree) walkDir(ctx context.Context, comps []string, ps []gitignore.Pattern, out *[]entry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	entries, err := t.readDir(comps)
	if err != nil {
		return nil
	}
	ps = t.rulesIn(comps, entries, ps)
	for _, e := range entries {
		p := append(slices.Clip(comps), e.Name())
		if t.hides(ps, p, e.IsDir()) {
			continue
		}
		if e.IsDir() {
			if err := t.walkDir(ctx, p, ps, out); err != nil {
				return err
			}
		} else if listed(e.Type()) {
			*out = append(*out, entry{path: strings.Join(p, "/"), regular: e.Type().IsRegular()})
		}
	}
	return nil
}

// listed is whether a walk lists a non-directory of this type: regular
// files and symlinks (as git does), not FIFOs, sockets or devices.
func listed(m fs.FileMode) bool { return m.IsRegular() || m&fs.ModeSymlink != 0 }

// hides is whether the rules ps hide the path p: .git always, then
// node_modules outside a git project, else the last rule that matches.
func (t *Tree) hides(ps []gitignore.Pattern, p []string, isDir bool) bool {
	name := p[len(p)-1]
	if name == ".git" {
		return true
	}
	if !t.git {
		return isDir && name == "node_modules"
	}
	for i := len(ps) - 1; i >= 0; i-- {
		if m := ps[i].Match(p, isDir); m != gitignore.NoMatch {
			return m == gitignore.Exclude
		}
	}
	return false
}

// rulesDown gathers the rules that apply in the directory comps from its
// parents, and says whether the way there is hidden (comps is in .git or
// an ignored directory).
func (t *Tree) rulesDown(comps []string) ([]gitignore.Pattern, bool, error) {
	ps := t.base
	for i := range comps {
		entries, err := t.readDir(comps[:i])
		if err != nil {
			return nil, false, err
		}
		ps = t.rulesIn(comps[:i], entries, ps)
		if t.hides(ps, comps[:i+1], true) {
			return nil, true, nil
		}
	}
	return ps, false, nil
}

// rulesIn adds to ps the rules the directory comps holds, given its
// entries: .git/info/exclude when it holds a .git directory (the project,
// or a repository nested in it), then its .gitignore, which comes later
// and so wins. Rule files that are not regular files, or over
// MaxRulesSize, are skipped.
func (t *Tree) rulesIn(comps []string, entries []fs.DirEntry, ps []gitignore.Pattern) []gitignore.Pattern {
	if !t.git {
		return ps
	}
	for _, e := range entries {
		var name string
		switch {
		case e.Name() == ".git" && e.IsDir():
			name = ".git/info/exclude"
		case e.Name() == ".gitignore" && e.Type().IsRegular():
			name = ".gitignore"
		default:
			continue
		}
		b, err := readBounded(t.root, strings.Join(append(slices.Clip(comps), name), "/"), MaxRulesSize)
		if err != nil {
			continue
		}
		// info/exclude ranks below .gitignore; entries come sorted, and
		// ".git" < ".gitignore", so appending in order keeps that.
		ps = append(slices.Clip(ps), parseRules(b, comps)...)
	}
	return ps
}

// readDir reads the directory comps, sorted by name.
func (t *Tree) readDir(comps []string) ([]fs.DirEntry, error) {
	name := "."
	if len(comps) > 0 {
		name = strings.Join(comps, "/")
	}
	entries, err := fs.ReadDir(t.root.FS(), name)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", name, err)
	}
	return entries, nil
}

// split turns a relative path into its components: none for the root;
// an error for a path that leaves it.
func split(rel string) ([]string, error) {
	rel = filepath.ToSlash(filepath.Clean(rel))
	if rel == "." || rel == "" {
		return nil, nil
	}
	if filepath.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") {
		return nil, fmt.Errorf("%s: %w", rel, errOutside)
	}
	return strings.Split(rel, "/"), nil
}

var errOutside = errors.New("not a path inside the project")
