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
	"golang.org/x/sys/unix"
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
// and gives is relative to the root (slash-separated). Each is opened
// from the root's descriptor one component at a time with O_NOFOLLOW, so
// none leads outside the root nor through a symlink inside it. A Tree is
// safe for concurrent use; close it when done.
type Tree struct {
	root *os.File            // the project directory
	git  bool                // .git at the root: git's ignore rules apply
	base []gitignore.Pattern // the host user's global excludes
}

// Open opens the project at dir (which may itself be reached through a
// symlink: the host named it). A global excludes file that cannot be
// read (missing, not a regular file, over MaxRulesSize) is left out.
func Open(dir string, opts *Options) (*Tree, error) {
	root, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, fmt.Errorf("open project %s: %w", dir, err)
	}
	t := &Tree{root: root}
	var st unix.Stat_t
	if unix.Fstatat(int(root.Fd()), ".git", &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
		t.git = true
	}
	if t.git && opts != nil && opts.ExcludesFile != "" {
		if b, err := readHostFile(opts.ExcludesFile, MaxRulesSize); err == nil {
			t.base = parseRules(b, nil)
		}
	}
	return t, nil
}

// Close releases the root's descriptor.
func (t *Tree) Close() error { return t.root.Close() }

// entry is a file a walk found: a regular file, or a symlink (listed,
// never followed); or a directory, when the walk lists them.
type entry struct {
	path    string
	regular bool
	dir     bool
}

// Files lists the files under the relative path under ("" or "." for the
// whole project; a file gives itself) that the rules let through, sorted
// byte-wise as git ls-files sorts them. Under inside an ignored directory
// lists nothing.
func (t *Tree) Files(ctx context.Context, under string) ([]string, error) {
	es, err := t.walk(ctx, under, false, nil)
	if err != nil {
		return nil, err
	}
	files := make([]string, len(es))
	for i, e := range es {
		files[i] = e.path
	}
	return files, nil
}

// Listing is what FilesAndDirs found.
type Listing struct {
	Files []string
	// Dirs are the directories the walk entered (not under itself).
	Dirs []string
	// Unreadable are the paths the walk could not read, sorted: a
	// directory it could not open or list, whose contents it does not
	// know. A file sync must not take their absence for a deletion.
	Unreadable []Unreadable
}

// Unreadable is a path a walk could not read.
type Unreadable struct {
	Path string
	Dir  bool  // a directory (else a file)
	Err  error // why: the system's error (permission denied)
}

// FilesAndDirs lists what Files does, and the directories the walk
// entered (not under itself): those the rules let through, empty ones
// among them, as a file sync carries them; and what it could not read,
// which Files leaves out unsaid. Under itself unreadable is an error.
func (t *Tree) FilesAndDirs(ctx context.Context, under string) (Listing, error) {
	var bad []Unreadable
	es, err := t.walk(ctx, under, true, &bad)
	if err != nil {
		return Listing{}, err
	}
	l := Listing{Unreadable: bad}
	for _, e := range es {
		if e.dir {
			l.Dirs = append(l.Dirs, e.path)
		} else {
			l.Files = append(l.Files, e.path)
		}
	}
	slices.SortFunc(l.Unreadable, func(a, b Unreadable) int { return strings.Compare(a.Path, b.Path) })
	return l, nil
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
	d, err := t.openDir(comps)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	defer d.Close()
	entries, err := readDir(d)
	if err != nil {
		return nil, err
	}
	if !hidden {
		ps, _ = t.rulesIn(d, comps, entries, ps)
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

// walk finds the files under under (and the directories, with dirs),
// sorted by path, and adds what it could not read to bad (nil: left out
// unsaid).
func (t *Tree) walk(ctx context.Context, under string, dirs bool, bad *[]Unreadable) ([]entry, error) {
	comps, err := split(under)
	if err != nil {
		return nil, err
	}
	ps, hidden, err := t.rulesDown(comps)
	if err != nil || hidden {
		return nil, err
	}
	d, err := t.openDir(comps)
	if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
		// A file (or a symlink, not followed): itself, if listed.
		m, err := t.lstatMode(comps)
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", under, err)
		}
		if listed(m) {
			return []entry{{path: strings.Join(comps, "/"), regular: m.IsRegular()}}, nil
		}
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", under, err)
	}
	var out []entry
	var unread []Unreadable
	err = t.walkDir(ctx, d, comps, ps, dirs, &out, &unread)
	if err != nil {
		return nil, err
	}
	if len(unread) > 0 && unread[0].Path == strings.Join(comps, "/") {
		// The directory asked for itself: an empty listing would say
		// that it holds nothing.
		return nil, fmt.Errorf("list %s: %w", d.Name(), unread[0].Err)
	}
	if bad != nil {
		*bad = append(*bad, unread...)
	}
	slices.SortFunc(out, func(a, b entry) int { return strings.Compare(a.path, b.path) })
	return out, nil
}

// walkDir adds the files in the directory d (at comps; walkDir closes
// it), whose parents' rules are ps, and in its subdirectories, to out. A
// directory that cannot be opened or listed is added to bad: what it
// holds is unknown, not gone.
func (t *Tree) walkDir(ctx context.Context, d *os.File, comps []string, ps []gitignore.Pattern, dirs bool, out *[]entry, bad *[]Unreadable) error {
	defer d.Close()
	if err := ctx.Err(); err != nil {
		return err
	}
	entries, err := readDir(d)
	if err == nil && len(entries) > 0 {
		// A directory that can be listed but not entered (r without x)
		// names what it holds and can give none of it: unreadable as a
		// whole, said once, not once for each thing in it.
		var st unix.Stat_t
		if serr := unix.Fstatat(int(d.Fd()), entries[0].Name(), &st, unix.AT_SYMLINK_NOFOLLOW); errors.Is(serr, unix.EACCES) {
			err = serr
		}
	}
	if err != nil {
		*bad = append(*bad, Unreadable{Path: strings.Join(comps, "/"), Dir: true, Err: cause(err)})
		return nil
	}
	ps, err = t.rulesIn(d, comps, entries, ps)
	if err != nil {
		// Its rules unknown, so is what the directory shows: to the sync,
		// files they would hide must not look like new ones.
		*bad = append(*bad, Unreadable{Path: strings.Join(comps, "/"), Dir: true, Err: cause(err)})
		return nil
	}
	for _, e := range entries {
		p := append(slices.Clip(comps), e.Name())
		if t.hides(ps, p, e.IsDir()) {
			continue
		}
		if e.IsDir() {
			sub, err := openAt(d, e.Name())
			if errors.Is(err, unix.ENOENT) {
				continue // gone since the listing
			}
			if err != nil {
				*bad = append(*bad, Unreadable{Path: strings.Join(p, "/"), Dir: true, Err: cause(err)})
				continue
			}
			if dirs {
				*out = append(*out, entry{path: strings.Join(p, "/"), dir: true})
			}
			if err := t.walkDir(ctx, sub, p, ps, dirs, out, bad); err != nil {
				return err
			}
		} else if listed(e.Type()) {
			*out = append(*out, entry{path: strings.Join(p, "/"), regular: e.Type().IsRegular()})
		}
	}
	return nil
}

// cause is the system's error inside err (permission denied), without
// the host's path around it: the path is said beside it, relative.
func cause(err error) error {
	var errno unix.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return err
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
		d, err := t.openDir(comps[:i])
		if err != nil {
			return nil, false, fmt.Errorf("list %s: %w", strings.Join(comps[:i], "/"), err)
		}
		entries, err := readDir(d)
		if err == nil {
			ps, _ = t.rulesIn(d, comps[:i], entries, ps)
		}
		d.Close()
		if err != nil {
			return nil, false, err
		}
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
// MaxRulesSize, are skipped; a .gitignore that cannot be read is skipped
// too, and said in the error (what it hides is not known).
func (t *Tree) rulesIn(d *os.File, comps []string, entries []fs.DirEntry, ps []gitignore.Pattern) ([]gitignore.Pattern, error) {
	if !t.git {
		return ps, nil
	}
	var unreadable error
	for _, e := range entries {
		var b []byte
		var err error
		switch {
		case e.Name() == ".git" && e.IsDir():
			b, err = readBounded(d, []string{".git", "info", "exclude"}, MaxRulesSize)
		case e.Name() == ".gitignore" && e.Type().IsRegular():
			b, err = readBounded(d, []string{".gitignore"}, MaxRulesSize)
		default:
			continue
		}
		if e.Name() == ".gitignore" && (errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM)) {
			unreadable = err
		}
		if err != nil {
			continue
		}
		// info/exclude ranks below .gitignore; entries come sorted, and
		// ".git" < ".gitignore", so appending in order keeps that.
		ps = append(slices.Clip(ps), parseRules(b, comps)...)
	}
	return ps, unreadable
}

// readDir reads the directory d, sorted by name. The entries' types come
// from the directory itself (d_type), with no stat of each.
func readDir(d *os.File) ([]fs.DirEntry, error) {
	entries, err := d.ReadDir(-1)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", d.Name(), err)
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, nil
}

// openDir opens the directory comps beneath the root, one component at a
// time, following no symlink; the caller closes it.
func (t *Tree) openDir(comps []string) (*os.File, error) {
	d, err := openAt(t.root, ".")
	for _, c := range comps {
		if err != nil {
			return nil, err
		}
		var sub *os.File
		sub, err = openAt(d, c)
		d.Close()
		d = sub
	}
	return d, err
}

// openAt opens the directory name in d, not through a symlink.
func openAt(d *os.File, name string) (*os.File, error) {
	fd, err := unix.Openat(int(d.Fd()), name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), filepath.Join(d.Name(), name)), nil
}

// lstatMode is the type of what is at comps (not followed).
func (t *Tree) lstatMode(comps []string) (fs.FileMode, error) {
	d, err := t.openDir(comps[:len(comps)-1])
	if err != nil {
		return 0, err
	}
	defer d.Close()
	var st unix.Stat_t
	if err := unix.Fstatat(int(d.Fd()), comps[len(comps)-1], &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return 0, err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return 0, nil
	case unix.S_IFDIR:
		return fs.ModeDir, nil
	case unix.S_IFLNK:
		return fs.ModeSymlink, nil
	}
	return fs.ModeIrregular, nil
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

// Ignorer returns a predicate saying whether the rules hide the path rel
// (relative, slash-separated; isDir for a directory), for a walk of the
// caller's own (the agent's checkpoints). It reads each directory's rules
// once and keeps them: make a new one for each walk, as rules change.
// It is not safe for concurrent use.
func (t *Tree) Ignorer() func(rel string, isDir bool) bool {
	type dirRules struct {
		ps     []gitignore.Pattern
		hidden bool
	}
	cache := map[string]dirRules{}
	var rulesOf func(comps []string) dirRules
	rulesOf = func(comps []string) dirRules {
		key := strings.Join(comps, "/")
		if r, ok := cache[key]; ok {
			return r
		}
		r := dirRules{ps: t.base}
		if len(comps) > 0 {
			parent := rulesOf(comps[:len(comps)-1])
			r.ps = parent.ps
			r.hidden = parent.hidden || t.hides(parent.ps, comps, true)
		}
		if !r.hidden {
			if d, err := t.openDir(comps); err == nil {
				if entries, err := readDir(d); err == nil {
					r.ps, _ = t.rulesIn(d, comps, entries, r.ps)
				}
				d.Close()
			}
		}
		cache[key] = r
		return r
	}
	return func(rel string, isDir bool) bool {
		comps, err := split(rel)
		if err != nil || len(comps) == 0 {
			return false
		}
		parent := rulesOf(comps[:len(comps)-1])
		return parent.hidden || t.hides(parent.ps, comps, isDir)
	}
}
