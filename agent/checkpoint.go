package agent

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"sync"
	"time"

	"github.com/cove-sh/cove/internal/projectfs"
	"golang.org/x/sys/unix"
)

// Checkpoints snapshot the project's files at each prompt, so that a
// rewind can put them back. They are kept in Store, a host-only directory
// of the user's (the project's agent state), never in the project, and
// made in process: no git runs on the host, so nothing the workspace
// writes (a repository's config, hooks, attributes) is ever run or
// applied, and the bytes a rewind brings back are the bytes saved.
//
// The store is content-addressed: per checkpoint a manifest (path → mode,
// size and sha256, or a symlink's target), and each file's content once,
// by its hash, however many checkpoints hold it. A save hashes only what
// changed since the last one: a file whose size, mtime, ctime and inode
// are those the previous manifest recorded keeps its hash.
//
// Left out, and left alone by a rewind: .git, cove's old state in .cove
// (sessions, checkpoints.git, out), what Ignore says, files over MaxFile
// (recorded as skipped) and what is not a regular file, a directory or a
// symlink (FIFOs, devices, sockets). Methods may be called concurrently;
// several processes may share a store.
type Checkpoints struct {
	Dir   string // the project
	Store string // where checkpoints are kept; host-only, cove's alone
	// Ignore tells whether a path (relative to Dir, slash-separated) is
	// ignored; nil means DefaultIgnore. (The project's ignore rules come
	// from an in-process matcher, never from git on the host.)
	Ignore func(rel string, isDir bool) bool
	// NewIgnore, when set, makes the Ignore of each walk anew (rules
	// read once per walk, and again for the next, as they change); it
	// takes precedence over Ignore.
	NewIgnore func() func(rel string, isDir bool) bool
	// MaxFile is the largest file stored, in bytes; 0 means 64 MiB.
	MaxFile int64
	// Share are other stores of this user's (a project's tasks' own:
	// the same files at their start) whose copy of a content is linked
	// (a hard link) instead of written again: a task's first checkpoint
	// costs no disk for what its siblings hold. Each store keeps its own
	// links, so removing one leaves the others whole; a linked copy is
	// checked against its hash when read, as every copy is.
	Share []string

	mu   sync.Mutex
	last *manifest // the latest checkpoint, for its stat cache
	// racy is racyWindow unless a test sets it; hashed counts the files
	// the last walk read, for tests of the stat cache.
	racy   time.Duration
	hashed int
}

// defaultMaxFile is MaxFile's default: bigger files are build output or
// data more often than work a rewind should bring back.
const defaultMaxFile = 64 << 20

// DefaultIgnore leaves out node_modules directories, until the project's
// own ignore rules are read (by an in-process gitignore matcher).
func DefaultIgnore(rel string, isDir bool) bool {
	return isDir && path.Base(rel) == "node_modules"
}

// alwaysLeftOut are never checkpointed nor touched by a rewind, whatever
// Ignore says: the user's repository, and what older cove kept in the
// project (no longer read; see the package cmd/cove's note).
func alwaysLeftOut(rel string) bool {
	switch rel {
	case ".cove/sessions", ".cove/checkpoints.git", ".cove/out":
		return true
	}
	return path.Base(rel) == ".git"
}

// checkpointID is what a checkpoint's id looks like: the sha256 of its
// manifest, so that an id from a session log or a window names nothing
// but a manifest in the store.
var checkpointID = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{64}$`) })

// Checkpoint is one saved state.
type Checkpoint struct {
	ID    string
	Label string
}

// manifest is one checkpoint: every path kept, sorted as the walk found
// them (a directory before what it holds).
type manifest struct {
	Label   string    `json:"label"`
	Time    time.Time `json:"time"`
	Entries []entry   `json:"entries"`
}

// entry is a path in a manifest. Mode has fs.FileMode's type bits and the
// permission bits (never setuid, setgid or sticky).
type entry struct {
	Path string      `json:"p"`
	Mode fs.FileMode `json:"m"`
	Size int64       `json:"s,omitempty"`
	Hash string      `json:"h,omitempty"` // a regular file's sha256, hex
	Link string      `json:"l,omitempty"` // a symlink's target
	// Skipped: a regular file over MaxFile, not stored; a rewind leaves
	// whatever is at its path alone.
	Skipped bool `json:"x,omitempty"`
	// The stat cache: unchanged (and not changed just before the save,
	// when a later change could keep them), the file keeps its Hash.
	MTime int64  `json:"t,omitempty"`
	CTime int64  `json:"c,omitempty"`
	Ino   uint64 `json:"i,omitempty"`
}

// logLine is a line of the store's log: the checkpoints in order.
type logLine struct {
	ID    string    `json:"id"`
	Label string    `json:"label"`
	Time  time.Time `json:"time"`
}

// OpenCheckpoints opens the checkpoints of the project dir kept in store
// (made 0700 if missing).
func OpenCheckpoints(ctx context.Context, dir, store string) (*Checkpoints, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("checkpoints: %w", err)
	}
	for _, d := range []string{store, filepath.Join(store, "blobs"), filepath.Join(store, "manifests")} {
		if err := mkdirState(d); err != nil {
			return nil, fmt.Errorf("checkpoints: %w", err)
		}
	}
	cp := &Checkpoints{Dir: abs, Store: store}
	if list, err := cp.List(ctx); err == nil && len(list) > 0 {
		cp.last, _ = cp.load(list[len(list)-1].ID) // no cache: every file is hashed once
	}
	return cp, nil
}

// Save records the project's files now, labelled, and returns the
// checkpoint's id.
func (cp *Checkpoints) Save(ctx context.Context, label string) (string, error) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	m := &manifest{Label: label, Time: time.Now().UTC()}
	var err error
	if m.Entries, err = cp.scan(ctx, true); err != nil {
		return "", fmt.Errorf("checkpoint: %w", err)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("checkpoint: %w", err)
	}
	sum := sha256.Sum256(b)
	id := hex.EncodeToString(sum[:])
	var z bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&z, gzip.BestSpeed)
	zw.Write(b)
	zw.Close()
	if err := cp.writeNew(filepath.Join(cp.Store, "manifests", id+".json.gz"), z.Bytes()); err != nil {
		return "", fmt.Errorf("checkpoint: %w", err)
	}
	line, _ := json.Marshal(logLine{ID: id, Label: label, Time: m.Time})
	f, err := openState(filepath.Join(cp.Store, "log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND)
	if err != nil {
		return "", fmt.Errorf("checkpoint: %w", err)
	}
	_, err = f.Write(append(line, '\n')) // one write: lines of two processes never interleave
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("checkpoint: %w", err)
	}
	cp.last = m
	return id, nil
}

// List returns the checkpoints, oldest first.
func (cp *Checkpoints) List(ctx context.Context) ([]Checkpoint, error) {
	f, err := openState(filepath.Join(cp.Store, "log"), os.O_RDONLY)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // none yet
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoints: %w", err)
	}
	defer f.Close()
	var list []Checkpoint
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var l logLine
		if json.Unmarshal(sc.Bytes(), &l) == nil && checkpointID().MatchString(l.ID) {
			list = append(list, Checkpoint{ID: l.ID, Label: l.Label})
		}
	}
	return list, sc.Err()
}

// Rewind puts the project's files back as they were at checkpoint id,
// through projectfs (confined to the project, no symlink followed out of
// it, new files the owner's): changed files get their content and mode
// back, removed ones return, and files made since go. What a checkpoint
// leaves out (ignored files, .git, files too big) is left alone.
func (cp *Checkpoints) Rewind(ctx context.Context, id string) error {
	if !checkpointID().MatchString(id) {
		return fmt.Errorf("rewind: %q is not a checkpoint id", id)
	}
	cp.mu.Lock()
	defer cp.mu.Unlock()
	target, err := cp.load(id)
	if err != nil {
		return fmt.Errorf("rewind: %w", err)
	}
	// Every file it needs is there before anything changes.
	for _, t := range target.Entries {
		if t.Mode.IsRegular() && !t.Skipped {
			if fi, err := os.Lstat(cp.blobPath(t.Hash)); err != nil || fi.Size() != t.Size {
				return fmt.Errorf("rewind: the content of %s is missing from the checkpoints", t.Path)
			}
		}
	}
	now, err := cp.scan(ctx, false)
	if err != nil {
		return fmt.Errorf("rewind: %w", err)
	}
	w, err := projectfs.Open(cp.Dir)
	if err != nil {
		return fmt.Errorf("rewind: %w", err)
	}
	defer w.Close()
	want := map[string]*entry{}
	for i := range target.Entries {
		want[target.Entries[i].Path] = &target.Entries[i]
	}
	have := map[string]*entry{}
	// What is not in the checkpoint, or is something else there, goes:
	// deepest first, so that a directory is empty when its turn comes.
	for i := len(now) - 1; i >= 0; i-- {
		e := &now[i]
		t := want[e.Path]
		switch {
		case e.Skipped || t != nil && t.Skipped:
			continue // too big to keep: left alone
		case t != nil && t.Mode.Type() == e.Mode.Type():
			have[e.Path] = e
			continue
		case e.Mode.IsDir() && t == nil:
			// Made since: removed once empty; what it holds that the
			// checkpoint leaves out (ignored files) keeps it.
			if left, err := fs.ReadDir(w.FS(), e.Path); err != nil || len(left) > 0 {
				continue
			}
		}
		if err := w.Remove(e.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("rewind: remove %s: %w", e.Path, err)
		}
	}
	for _, t := range target.Entries {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("rewind: %w", err)
		}
		if t.Skipped {
			continue
		}
		e := have[t.Path]
		if err := cp.restore(w, t, e); err != nil {
			return fmt.Errorf("rewind: %s: %w", t.Path, err)
		}
	}
	return nil
}

// restore makes t so in the project, where e is what is there now of the
// same type (nil: nothing).
func (cp *Checkpoints) restore(w *projectfs.Dir, t entry, e *entry) error {
	perm := fs.FileMode(0o644) // what WriteFile gives a new file
	switch {
	case t.Mode.IsDir():
		if e == nil {
			if err := w.Create(t.Path, true); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			perm = 0o755
		} else {
			perm = e.Mode.Perm()
		}
	case t.Mode.Type() == fs.ModeSymlink:
		if e != nil && e.Link == t.Link {
			return nil
		}
		if e != nil {
			if err := w.Remove(t.Path); err != nil {
				return err
			}
		}
		return w.Symlink(t.Link, t.Path)
	default:
		if e != nil {
			perm = e.Mode.Perm()
		}
		if e == nil || e.Hash != t.Hash {
			data, err := cp.readBlob(t.Hash)
			if err != nil {
				return err
			}
			if err := w.WriteFile(t.Path, data); err != nil {
				return err
			}
		}
	}
	if perm != t.Mode.Perm() {
		return w.Chmod(t.Path, t.Mode.Perm())
	}
	return nil
}

// load reads checkpoint id's manifest.
func (cp *Checkpoints) load(id string) (*manifest, error) {
	f, err := openState(filepath.Join(cp.Store, "manifests", id+".json.gz"), os.O_RDONLY)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %.12s: %w", id, err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %.12s: %w", id, err)
	}
	var m manifest
	if err := json.NewDecoder(zr).Decode(&m); err != nil {
		return nil, fmt.Errorf("checkpoint %.12s: %w", id, err)
	}
	return &m, nil
}

func (cp *Checkpoints) blobPath(hash string) string {
	return filepath.Join(cp.Store, "blobs", hash[:2], hash[2:])
}

// readBlob reads the content of hash, checked against it.
func (cp *Checkpoints) readBlob(hash string) ([]byte, error) {
	f, err := openState(cp.blobPath(hash), os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, cp.maxFile()+1))
	if err != nil {
		return nil, err
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != hash {
		return nil, fmt.Errorf("the checkpoint's copy is damaged (sha256 %.12s…)", hash)
	}
	return data, nil
}

// putBlob stores data as hash, unless it is there.
func (cp *Checkpoints) putBlob(hash string, data []byte, made map[string]bool) error {
	p := cp.blobPath(hash)
	if _, err := os.Lstat(p); err == nil {
		return nil
	}
	if dir := filepath.Dir(p); !made[dir] {
		if err := mkdirState(dir); err != nil {
			return err
		}
		made[dir] = true
	}
	for _, other := range cp.Share {
		if os.Link(filepath.Join(other, "blobs", hash[:2], hash[2:]), p) == nil {
			return nil
		}
	}
	return cp.writeNew(p, data)
}

// writeNew writes a file of the store whole: under a temporary name, then
// renamed, so that a reader never sees part of it.
func (cp *Checkpoints) writeNew(p string, data []byte) error {
	b := make([]byte, 6)
	rand.Read(b)
	tmp := p + ".tmp-" + hex.EncodeToString(b)
	f, err := openState(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

func (cp *Checkpoints) maxFile() int64 {
	if cp.MaxFile > 0 {
		return cp.MaxFile
	}
	return defaultMaxFile
}

// ignorer is the ignore predicate for one walk.
func (cp *Checkpoints) ignorer() func(rel string, isDir bool) bool {
	ignore := cp.Ignore
	if cp.NewIgnore != nil {
		ignore = cp.NewIgnore()
	}
	if ignore == nil {
		ignore = DefaultIgnore
	}
	return func(rel string, isDir bool) bool { return alwaysLeftOut(rel) || ignore(rel, isDir) }
}

// racyWindow: a file changed this close to a save may change again
// within the file system's clock tick and keep its mtime, so its stat is
// not trusted next time (git's "racily clean" entries).
const racyWindow = 2 * time.Second

// scanner walks the project for a save (store set: the content of what
// changed goes to the store) or a rewind (what is there now).
type scanner struct {
	cp      *Checkpoints
	ctx     context.Context
	prev    map[string]*entry
	racy    int64 // ns: stat times from here on are not cached
	store   bool
	ignored func(rel string, isDir bool) bool
	made    map[string]bool // blob directories known to exist
	buf     []byte
	entries []entry
	hashed  int
}

// scan walks the project beneath its root by directory descriptors: no
// symlink is followed, so nothing outside it is read, whatever is
// swapped in while it walks.
func (cp *Checkpoints) scan(ctx context.Context, store bool) ([]entry, error) {
	window := racyWindow
	if cp.racy != 0 {
		window = cp.racy
	}
	s := &scanner{cp: cp, ctx: ctx, prev: map[string]*entry{}, store: store, made: map[string]bool{}, ignored: cp.ignorer(),
		racy: time.Now().Add(-window).UnixNano()}
	defer func() { cp.hashed = s.hashed }()
	if cp.last != nil {
		for i := range cp.last.Entries {
			s.prev[cp.last.Entries[i].Path] = &cp.last.Entries[i]
		}
	}
	fd, err := unix.Open(cp.Dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", cp.Dir, err)
	}
	if err := s.dir(fd, ""); err != nil {
		return nil, err
	}
	return s.entries, nil
}

// gone is whether err says an entry went or changed type while the walk
// looked at it: it is then left out, as if the walk came a moment later.
func gone(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR)
}

// dir walks the directory open as fd (closed when done), rel its path.
func (s *scanner) dir(fd int, rel string) error {
	d := os.NewFile(uintptr(fd), rel)
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("read %s: %w", rel, err)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := s.ctx.Err(); err != nil {
			return err
		}
		p := name
		if rel != "" {
			p = rel + "/" + name
		}
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if gone(err) {
				continue
			}
			return fmt.Errorf("stat %s: %w", p, err)
		}
		kind := st.Mode & unix.S_IFMT
		if s.ignored(p, kind == unix.S_IFDIR) {
			continue
		}
		perm := fs.FileMode(st.Mode & 0o777)
		switch kind {
		case unix.S_IFDIR:
			s.entries = append(s.entries, entry{Path: p, Mode: fs.ModeDir | perm})
			sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				if gone(err) {
					s.entries = s.entries[:len(s.entries)-1]
					continue
				}
				return fmt.Errorf("open %s: %w", p, err)
			}
			if err := s.dir(sub, p); err != nil {
				return err
			}
		case unix.S_IFLNK:
			target, err := readlinkat(fd, name)
			if err != nil {
				if gone(err) || errors.Is(err, unix.EINVAL) {
					continue
				}
				return fmt.Errorf("readlink %s: %w", p, err)
			}
			s.entries = append(s.entries, entry{Path: p, Mode: fs.ModeSymlink | 0o777, Link: target})
		case unix.S_IFREG:
			if err := s.file(fd, name, p, &st); err != nil {
				return err
			}
		default:
			// FIFOs, devices, sockets: nothing to keep, never opened.
		}
	}
	return nil
}

// file records the regular file name (path p) in the directory fd, whose
// stat is st, hashing it unless the stat cache says it is unchanged.
func (s *scanner) file(dirfd int, name, p string, st *unix.Stat_t) error {
	e := entry{Path: p, Mode: fs.FileMode(st.Mode & 0o777), Size: st.Size,
		MTime: st.Mtim.Nano(), CTime: st.Ctim.Nano(), Ino: st.Ino}
	if e.Size > s.cp.maxFile() {
		e.Skipped, e.MTime, e.CTime, e.Ino = true, 0, 0, 0
		s.entries = append(s.entries, e)
		return nil
	}
	if old := s.prev[p]; old != nil && old.Hash != "" && old.Ino != 0 && old.Ino == e.Ino &&
		old.Size == e.Size && old.MTime == e.MTime && old.CTime == e.CTime && old.Mode == e.Mode {
		e.Hash = old.Hash
	} else {
		s.hashed++
		fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			if gone(err) {
				return nil
			}
			return fmt.Errorf("open %s: %w", p, err)
		}
		f := os.NewFile(uintptr(fd), p)
		defer f.Close()
		var now unix.Stat_t
		if err := unix.Fstat(fd, &now); err != nil {
			return fmt.Errorf("stat %s: %w", p, err)
		}
		if now.Mode&unix.S_IFMT != unix.S_IFREG {
			return nil // swapped for something else meanwhile
		}
		data, err := s.read(f, now.Size)
		if err != nil {
			return fmt.Errorf("read %s: %w", p, err)
		}
		if int64(len(data)) > s.cp.maxFile() {
			e.Skipped, e.MTime, e.CTime, e.Ino, e.Size = true, 0, 0, 0, int64(len(data))
			s.entries = append(s.entries, e)
			return nil
		}
		sum := sha256.Sum256(data)
		e.Hash = hex.EncodeToString(sum[:])
		e.Size, e.Mode = int64(len(data)), fs.FileMode(now.Mode&0o777)
		e.MTime, e.CTime, e.Ino = now.Mtim.Nano(), now.Ctim.Nano(), now.Ino
		if s.store {
			if err := s.cp.putBlob(e.Hash, data, s.made); err != nil {
				return fmt.Errorf("store %s: %w", p, err)
			}
		}
	}
	if e.MTime >= s.racy || e.CTime >= s.racy {
		e.MTime, e.CTime, e.Ino = 0, 0, 0 // hashed again next time
	}
	s.entries = append(s.entries, e)
	return nil
}

// read reads f whole, at most MaxFile+1 bytes (it may have grown since
// its stat), into the scanner's buffer when it fits.
func (s *scanner) read(f *os.File, size int64) ([]byte, error) {
	limit := s.cp.maxFile() + 1
	want := min(max(size+1, 4<<10), limit)
	if want > int64(cap(s.buf)) && want <= 1<<20 {
		s.buf = make([]byte, max(want, 64<<10))
	}
	buf := s.buf
	if want > int64(cap(buf)) {
		buf = make([]byte, want)
	}
	buf = buf[:cap(buf)]
	n := 0
	for int64(n) < limit {
		if n == len(buf) {
			buf = append(buf, make([]byte, min(int64(len(buf)), limit-int64(n)))...)
		}
		m, err := f.Read(buf[n:])
		n += m
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	return buf[:n], nil
}

// readlinkat is readlink(2) on name in the directory dirfd.
func readlinkat(dirfd int, name string) (string, error) {
	for size := 256; ; size *= 2 {
		b := make([]byte, size)
		n, err := unix.Readlinkat(dirfd, name, b)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(b[:n]), nil
		}
	}
}
