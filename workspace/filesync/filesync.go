// Package filesync keeps two copies of a project alike: the user's files on
// their machine and the workspace's copy where it runs elsewhere (a
// Kubernetes Pod). Each round compares both sides with what they had in
// common after the last round (the base): a change on one side is carried
// to the other, a deletion too, and a file changed on both sides keeps both
// versions and says so. Nothing is ever lost: a deletion never wins over a
// change.
//
// What the project's ignore rules exclude is not synchronised: build
// outputs stay on the side that made them.
package filesync

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
)

// MaxFileSize is the largest file carried across; larger ones are left
// where they are and reported.
const MaxFileSize = 64 << 20

// Entry is what a side has at a path: a regular file, a symlink or a
// directory.
type Entry struct {
	Mode fs.FileMode // the type bit (symlink, directory or none) and the permissions
	Size int64       // 0 for a directory
	// Sum identifies the content: a SHA-256 of a file's bytes, or a
	// symlink's target as written; "" for a directory.
	Sum string
}

// same says whether two entries are the same content and mode.
func same(a, b *Entry) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

const modeSymlink = fs.ModeSymlink

func (e Entry) symlink() bool { return e.Mode&modeSymlink != 0 }
func (e Entry) dir() bool     { return e.Mode&fs.ModeDir != 0 }

// Listing is what a side's scan found.
type Listing struct {
	Entries map[string]Entry
	// Unreadable are the paths the side could not read: what is at or
	// under each is unknown for the round, not gone. Nothing there is
	// deleted, written or carried, on either side, and the base keeps
	// what it had for them, so that once they can be read again what
	// changed meanwhile on either side is carried as usual.
	Unreadable []Unreadable
}

// Unreadable is a path a side could not read.
type Unreadable struct {
	Path string
	Dir  bool   // a directory (else a file)
	Why  string // the side's error (permission denied)
}

// Tree is one side: paths are slash-separated and relative to the project.
type Tree interface {
	// Scan lists what the side has that the ignore rules let through,
	// and what it could not read.
	Scan(ctx context.Context) (Listing, error)
	// Read returns a file's content, or a symlink's target.
	Read(ctx context.Context, p string) ([]byte, error)
	// Write replaces what is at p (atomically) with a file of that
	// content and permissions, a symlink to string(data), or a
	// directory (data is nil); it never removes a directory that holds
	// something to do so.
	Write(ctx context.Context, p string, e Entry, data []byte) error
	// Remove deletes what is at p: a directory only if it is empty (it
	// stays otherwise, with no error).
	Remove(ctx context.Context, p string) error
}

// Conflict is a path changed on both sides since the last round.
type Conflict struct {
	Path string
	// Kept is where the remote side's version now is, on both sides; the
	// local version stays at Path. "" when one side had deleted it: the
	// change won.
	Kept string
	// Dir says that one side made a directory at Path and the other a
	// file (or symlink): the directory is at Path on both sides, and the
	// file at Kept, whichever side it came from.
	Dir bool
}

// Report is what a round did.
type Report struct {
	ToRemote, ToLocal []string // carried across
	Removed           []string // deleted on the side that still had them
	Conflicts         []Conflict
	TooLarge          []string // over MaxFileSize, left where they are
	// UnreadableLocal and UnreadableRemote are paths a side could not
	// read, left alone on both sides (see Listing.Unreadable): each is
	// in the report of the first round that finds it so, not again
	// while it stays so.
	UnreadableLocal, UnreadableRemote []Unreadable
}

// Empty says whether the round changed nothing and found nothing new to
// say.
func (r Report) Empty() bool {
	return len(r.ToRemote)+len(r.ToLocal)+len(r.Removed)+len(r.Conflicts)+len(r.UnreadableLocal)+len(r.UnreadableRemote) == 0
}

// hider is a side whose ignore rules decide for both (Dir).
type hider interface {
	Hider() func(p string, isDir bool) bool
}

// Syncer synchronises Local and Remote. When Local is a Dir, its ignore
// rules decide for both sides. Base is what both had after the
// last round (empty at first: the first round unites both sides, and a
// file both have with different content is a conflict).
type Syncer struct {
	Local, Remote Tree
	Base          map[string]Entry
	// Now names conflict copies; time.Now when nil.
	Now func() time.Time

	mu   sync.Mutex         // one round at a time; guards what follows
	said [2]map[string]bool // the unreadable paths reported, local and remote
}

// ErrEmptied is Sync's error when one side lost every file since the
// last round: that is not carried to the other.
var ErrEmptied = errors.New("one side was emptied")

// Sync runs one round: it scans both sides, refuses to carry a side
// emptied whole, reconciles every path either side or the base has (in
// order, leaving alone what a side could not read), and then removes the
// directories the other side removed and writes what takes their place.
func (s *Syncer) Sync(ctx context.Context) (Report, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var rep Report
	ls, rs, err := s.scan(ctx)
	if err != nil {
		return rep, err
	}
	local, remote := ls.Entries, rs.Entries
	if err := s.checkEmptied(local, remote); err != nil {
		return rep, err
	}
	// A path one side could not read would look deleted there: it is
	// left alone on both sides, its base kept, until it can be read.
	unknown := map[string]bool{}
	for _, u := range slices.Concat(ls.Unreadable, rs.Unreadable) {
		unknown[u.Path] = true
	}
	rep.UnreadableLocal = s.firstSaid(0, ls.Unreadable)
	rep.UnreadableRemote = s.firstSaid(1, rs.Unreadable)
	rd := &round{local: local, remote: remote, rep: &rep, settled: map[string]bool{}}
	for _, p := range allPaths(local, remote, s.Base) {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		if covered(unknown, p) || rd.under(p) || rd.settled[p] {
			continue
		}
		if err := s.reconcile(ctx, rd, p, get(local, p), get(remote, p), get(s.Base, p)); err != nil && rd.fail(ctx, p, err) {
			return rep, rd.first
		}
	}
	rd.finish(ctx)
	return rep, rd.first
}

// scan lists both sides. When Local is a Dir, this machine's rules decide
// for both: the workspace's copy may make something else of its own (the
// Pod's has no .git, so git's rules do not apply there). A path they hide
// is left alone on both sides, neither carried nor deleted as gone.
func (s *Syncer) scan(ctx context.Context) (ls, rs Listing, err error) {
	if ls, err = s.Local.Scan(ctx); err != nil {
		return ls, rs, fmt.Errorf("sync: scan the local files: %w", err)
	}
	if rs, err = s.Remote.Scan(ctx); err != nil {
		return ls, rs, fmt.Errorf("sync: scan the workspace's files: %w", err)
	}
	if ls.Entries == nil {
		ls.Entries = map[string]Entry{}
	}
	if rs.Entries == nil {
		rs.Entries = map[string]Entry{}
	}
	if s.Base == nil {
		s.Base = map[string]Entry{}
	}
	if h, ok := s.Local.(hider); ok {
		hides := h.Hider()
		for p, e := range rs.Entries {
			if _, ok := ls.Entries[p]; !ok && hides(p, e.dir()) {
				delete(rs.Entries, p)
			}
		}
		rs.Unreadable = slices.DeleteFunc(rs.Unreadable, func(u Unreadable) bool { return hides(u.Path, u.Dir) })
	}
	return ls, rs, nil
}

// checkEmptied refuses a round where one side was emptied whole (the
// project directory removed or replaced under the session, a volume that
// came back empty): it would have everything deleted on the other, so
// nothing is, as unison asks first.
func (s *Syncer) checkEmptied(local, remote map[string]Entry) error {
	if len(s.Base) > 0 && (len(local) == 0) != (len(remote) == 0) {
		where, other := "here", "in the workspace"
		if len(remote) == 0 {
			where, other = "in the workspace", "here"
		}
		return fmt.Errorf("sync: %w: the project's files %s are all gone (%d were there at the last round); nothing is deleted %s. If the directory was removed or replaced, cove stop, then cove up again brings both sides together",
			ErrEmptied, where, len(s.Base), other)
	}
	return nil
}

// allPaths are the paths of the maps, sorted: a directory before what it
// holds.
func allPaths(ms ...map[string]Entry) []string {
	paths := map[string]bool{}
	for _, m := range ms {
		for p := range m {
			paths[p] = true
		}
	}
	return slices.Sorted(func(yield func(string) bool) {
		for p := range paths {
			if !yield(p) {
				return
			}
		}
	})
}

// fail records that p failed, and says whether the round must end. A path
// that fails is said, and the others go on: one file the other side
// cannot write does not hold the project back. A broken stream ends the
// round: every call after it would fail too.
func (rd *round) fail(ctx context.Context, p string, err error) bool {
	err = fmt.Errorf("sync %s: %w", p, err)
	if rd.first == nil {
		rd.first = err
	}
	return errors.Is(err, ErrAway) || ctx.Err() != nil
}

// finish removes the directories the other side removed, deepest first,
// now that what they held is gone; then writes what takes their place.
func (rd *round) finish(ctx context.Context) {
	for i := len(rd.rmdirs) - 1; i >= 0; i-- {
		d := rd.rmdirs[i]
		if err := d.side.Remove(ctx, d.path); err != nil && rd.fail(ctx, d.path, err) {
			return
		}
	}
	for _, l := range rd.late {
		if err := l.do(); err != nil && rd.fail(ctx, l.path, err) {
			return
		}
	}
}

// covered says whether p is in set or under a path in it.
func covered(set map[string]bool, p string) bool {
	if len(set) == 0 {
		return false
	}
	for ; p != "." && p != "/" && p != ""; p = path.Dir(p) {
		if set[p] {
			return true
		}
	}
	return false
}

// firstSaid is which of the unreadable paths us, on the side side (0
// local, 1 remote), no round has reported since they became so; it
// forgets those that can be read again, so that a path that becomes
// unreadable once more is said once more.
func (s *Syncer) firstSaid(side int, us []Unreadable) []Unreadable {
	var out []Unreadable
	now := make(map[string]bool, len(us))
	for _, u := range us {
		if !s.said[side][u.Path] && !now[u.Path] {
			out = append(out, u)
		}
		now[u.Path] = true
	}
	s.said[side] = now
	return out
}

// round is one Sync's scans and what it does last.
type round struct {
	local, remote map[string]Entry
	rep           *Report
	rmdirs        []pathOn // directories to remove, once emptied
	late          []lateWrite
	clashes       []string // a directory on one side, a file on the other, unresolved
	// settled are paths this round wrote on both sides (conflict
	// copies), which its scans do not describe any more.
	settled map[string]bool
	first   error // the first path's error; the round went on past it unless fail said stop
}

type pathOn struct {
	path string
	side Tree
}

type lateWrite struct {
	path string
	do   func() error
}

// under says whether p is under a clash left unresolved: its side has a
// file where its parent would be.
func (rd *round) under(p string) bool {
	for _, c := range rd.clashes {
		if strings.HasPrefix(p, c+"/") {
			return true
		}
	}
	return false
}

func get(m map[string]Entry, p string) *Entry {
	if e, ok := m[p]; ok {
		return &e
	}
	return nil
}

// reconcile brings one path to agreement.
func (s *Syncer) reconcile(ctx context.Context, rd *round, p string, l, r, base *Entry) error {
	rep := rd.rep
	toLocal := func(e *Entry) error { return s.carry(ctx, rd, p, e, s.Remote, s.Local, rd.local, &rep.ToLocal) }
	toRemote := func(e *Entry) error { return s.carry(ctx, rd, p, e, s.Local, s.Remote, rd.remote, &rep.ToRemote) }
	switch {
	case same(l, r):
		s.agree(p, l)
		return nil
	case same(l, base):
		// Only the remote side changed.
		return toLocal(r)
	case same(r, base):
		return toRemote(l)
	}
	// Both changed, differently.
	switch {
	case l != nil && r != nil && l.dir() && r.dir():
		// Modes only: a directory has no versions to keep; this
		// machine's wins.
		return toRemote(l)
	case l == nil:
		// Deleted here, changed there: the change wins.
		if !r.dir() {
			rep.Conflicts = append(rep.Conflicts, Conflict{Path: p})
		}
		return toLocal(r)
	case r == nil:
		if !l.dir() {
			rep.Conflicts = append(rep.Conflicts, Conflict{Path: p})
		}
		return toRemote(l)
	case l.dir() || r.dir():
		return s.clash(ctx, rd, p, l, r)
	}
	if tooLarge(l) || tooLarge(r) {
		rep.TooLarge = append(rep.TooLarge, p)
		return nil
	}
	// Both have it: the local version stays at p on both sides, the
	// remote one is kept beside it on both.
	theirs, err := s.Remote.Read(ctx, p)
	if err != nil {
		return err
	}
	if err := check(r, theirs); err != nil {
		return err
	}
	kept := s.keptName(rd, p, r)
	if err := s.Local.Write(ctx, kept, *r, theirs); err != nil {
		return err
	}
	if err := s.Remote.Write(ctx, kept, *r, theirs); err != nil {
		return err
	}
	ours, err := s.Local.Read(ctx, p)
	if err != nil {
		return err
	}
	if err := s.Remote.Write(ctx, p, *l, ours); err != nil {
		return err
	}
	s.agree(p, l)
	s.agree(kept, r)
	rd.settled[kept] = true
	rep.Conflicts = append(rep.Conflicts, Conflict{Path: p, Kept: kept})
	return nil
}

// clash settles a directory made on one side where the other made a file
// (or symlink): the directory stays at p, the file is kept beside it on
// both sides, and what the directory holds follows in this round.
func (s *Syncer) clash(ctx context.Context, rd *round, p string, l, r *Entry) error {
	fileSide, file, dir := s.Local, l, r
	if l.dir() {
		fileSide, file, dir = s.Remote, r, l
	}
	if tooLarge(file) {
		rd.rep.TooLarge = append(rd.rep.TooLarge, p)
		rd.clashes = append(rd.clashes, p)
		return nil
	}
	data, err := fileSide.Read(ctx, p)
	if err == nil {
		err = check(file, data)
	}
	if err != nil {
		rd.clashes = append(rd.clashes, p) // the next round tries again
		return err
	}
	kept := s.keptName(rd, p, file)
	for _, t := range []Tree{s.Local, s.Remote} {
		if err := t.Write(ctx, kept, *file, data); err != nil {
			rd.clashes = append(rd.clashes, p)
			return err
		}
	}
	s.agree(kept, file)
	rd.settled[kept] = true
	if err := fileSide.Write(ctx, p, *dir, nil); err != nil {
		rd.clashes = append(rd.clashes, p)
		return err
	}
	s.agree(p, dir)
	rd.rep.Conflicts = append(rd.rep.Conflicts, Conflict{Path: p, Kept: kept, Dir: true})
	return nil
}

// carry makes to's p what from has (e), or removes it when e is nil. has
// is what to had at the scan.
func (s *Syncer) carry(ctx context.Context, rd *round, p string, e *Entry, from, to Tree, has map[string]Entry, done *[]string) error {
	there, isThere := has[p]
	if e == nil {
		if isThere && there.dir() {
			// Once what it holds is gone; its base stays until a scan
			// finds it gone on both sides (it stays if it holds what the
			// sync does not carry).
			rd.rmdirs = append(rd.rmdirs, pathOn{p, to})
			return nil
		}
		if err := to.Remove(ctx, p); err != nil {
			return err
		}
		rd.rep.Removed = append(rd.rep.Removed, p)
		s.agree(p, nil)
		return nil
	}
	if e.dir() {
		if err := to.Write(ctx, p, *e, nil); err != nil {
			return err
		}
		*done = append(*done, p)
		s.agree(p, e)
		return nil
	}
	if tooLarge(e) {
		rd.rep.TooLarge = append(rd.rep.TooLarge, p)
		return nil
	}
	data, err := from.Read(ctx, p)
	if err != nil {
		return err
	}
	if err := check(e, data); err != nil {
		// It changed since the scan: the next round carries it.
		return nil
	}
	write := func() error {
		if err := to.Write(ctx, p, *e, data); err != nil {
			return err
		}
		*done = append(*done, p)
		s.agree(p, e)
		return nil
	}
	if isThere && there.dir() {
		// A file where a directory was: once the directory is emptied.
		rd.late = append(rd.late, lateWrite{p, write})
		return nil
	}
	return write()
}

func (s *Syncer) agree(p string, e *Entry) {
	if e == nil {
		delete(s.Base, p)
	} else {
		s.Base[p] = *e
	}
}

func tooLarge(e *Entry) bool { return !e.symlink() && !e.dir() && e.Size > MaxFileSize }

// check says whether data is what e describes: a side answers Read with
// what it has now, which may have changed since it was scanned.
func check(e *Entry, data []byte) error {
	if e.symlink() {
		if string(data) != e.Sum {
			return fmt.Errorf("the link changed during the round")
		}
		return nil
	}
	if int64(len(data)) != e.Size || Sum(data) != e.Sum {
		return fmt.Errorf("the file changed during the round")
	}
	return nil
}

// keptName is where the remote version r of p is kept: where a round cut
// half way already put it (a copy of it here, in the base on neither
// side yet), or a new conflictName, so that a conflict settled over a
// broken connection leaves one copy, not one per attempt.
func (s *Syncer) keptName(rd *round, p string, r *Entry) string {
	dir, name := path.Split(p)
	prefix := dir + strings.TrimPrefix(name, ".") + ".conflict-"
	for q, e := range rd.local {
		if _, inBase := s.Base[q]; strings.HasPrefix(q, prefix) && !strings.Contains(q[len(prefix):], "/") && !inBase && same(&e, r) {
			return q
		}
	}
	return s.conflictName(p)
}

// conflictName is where the remote version of p is kept: beside it, named
// so a person sees at once what it is (main.c.conflict-20261201-142530).
func (s *Syncer) conflictName(p string) string {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	stamp := now().UTC().Format("20060102-150405")
	dir, name := path.Split(p)
	return dir + strings.TrimPrefix(name, ".") + ".conflict-" + stamp
}

// Run syncs a round every interval until ctx ends, and once more as it
// ends (a stop flushes), reporting each round that changed something,
// found a path newly unreadable or failed, and the first good one after a
// failure (an empty Report, no
// error: the failure is over); a failed round is tried again at the next
// tick.
func (s *Syncer) Run(ctx context.Context, interval time.Duration, report func(Report, error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	failed := false
	for {
		rep, err := s.Sync(ctx)
		if err != nil && ctx.Err() == nil || !rep.Empty() || err == nil && failed {
			report(rep, err)
		}
		failed = err != nil
		select {
		case <-ctx.Done():
			// The last round, on a context of its own: ctx is over.
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			rep, err := s.Sync(fctx)
			cancel()
			if err != nil || !rep.Empty() {
				report(rep, err)
			}
			return
		case <-t.C:
		}
	}
}
