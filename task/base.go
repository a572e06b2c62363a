package task

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/cove-sh/cove/container"
	"github.com/cove-sh/cove/image"
	"github.com/cove-sh/cove/workspace"
	"golang.org/x/sys/unix"
)

// Where the tasks' file system shares extents (XFS, btrfs: FICLONE), a
// task's tree gets its base's files here, before its workspace starts: a
// clone of a checkout of the base kept once per base commit beside the
// project's tasks (.base/COMMIT), so that no file's data is written again
// and a task takes no space for a file until it changes it; git then
// only sets the task's branch and index on them. The kept checkout is
// made here from a tar of the commit the project's workspace writes (git
// archive, the project's export attributes set aside, so that it holds
// what a checkout holds), extracted as an image layer is (every entry
// resolved inside, no link followed, only directories, files and
// symlinks kept); it is never bound into any workspace, and goes with the
// last task on its commit. Elsewhere (ext4) a kept checkout would only be
// copied again for every task, and writing the files here is slower than
// git checkout in the task's workspace: that checks them out, before its
// lifecycle commands run (workspace.Spec.Prepare), unless the workspace
// needs them to start (its image built from the project, an
// initializeCommand): then its tree gets the tar itself, here.

// ErrNoBase says a task's files are better checked out in its workspace
// (Populate) than written here: nothing is gained here, or the base
// cannot be had as a tar.
var ErrNoBase = errors.New("no shared checkout of the base")

// lockBases holds the project's bases while a base is made or removed:
// a base is removed only when no task's record names its commit, and a
// task's record is written before its base is looked for.
func (m *Manager) lockBases() (unlock func(), err error) {
	if err := os.MkdirAll(filepath.Join(m.dir(), ".base"), 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(m.dir(), ".base", "lock"), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	return func() { f.Close() }, nil
}

// CloneStats says what CopyBase wrote: files and their bytes; whether
// they are clones of the base's checkout kept here (Kept), and then how
// many regular files share their data with it (FICLONE) rather than copy
// it.
type CloneStats struct {
	Files, Shared int
	Bytes         int64
	Kept          bool
}

// CopyBase makes the task's tree hold the files of its base, as a
// checkout would (for Populate to set the branch and index on), before
// its workspace starts: cloned from the base's checkout kept here (made
// first if this is the first task on that commit) where files share
// their data; else, when the workspace needs them to start (early: see
// workspace.FilesBeforeStart), extracted from the project's archive of
// the commit. What the tree has already (its .devcontainer) is kept, or
// written again alike. An error wrapping ErrNoBase means the files are
// better checked out in the workspace: nothing is gained here, or the
// base cannot be had as a tar (the project's objects are not all there
// to read, a name a layer would take for a whiteout).
func (m *Manager) CopyBase(ctx context.Context, main workspace.Workspace, r Record, early bool) (CloneStats, error) {
	if !validCommit(r.Base) {
		return CloneStats{}, fmt.Errorf("%w: %q is not a commit's name", ErrNoBase, r.Base)
	}
	tree := m.Tree(r.Name)
	if !sharesExtents(filepath.Dir(tree)) {
		if !early {
			return CloneStats{}, fmt.Errorf("%w: files cannot share their data in %s", ErrNoBase, filepath.Dir(tree))
		}
		st, err := archiveInto(ctx, main, r.Base, tree)
		if err != nil {
			return CloneStats{}, fmt.Errorf("the base %s: %w", r.Base[:12], err)
		}
		return CloneStats{Files: st.Files, Bytes: st.Bytes}, nil
	}
	dir, err := m.base(ctx, main, r.Base)
	if err != nil {
		return CloneStats{}, err
	}
	st, err := cloneTree(dir, tree)
	st.Kept = true
	return st, err
}

// sharesExtents says whether files in dir can share their data (FICLONE
// between two files made there to find out).
func sharesExtents(dir string) bool {
	a, err := os.CreateTemp(dir, ".clone-probe-")
	if err != nil {
		return false
	}
	defer os.Remove(a.Name())
	defer a.Close()
	b, err := os.CreateTemp(dir, ".clone-probe-")
	if err != nil {
		return false
	}
	defer os.Remove(b.Name())
	defer b.Close()
	if _, err := a.Write([]byte{1}); err != nil {
		return false
	}
	return unix.IoctlFileClone(int(b.Fd()), int(a.Fd())) == nil
}

// base returns the checkout of commit kept here, made now from the
// project's workspace main if there is none.
func (m *Manager) base(ctx context.Context, main workspace.Workspace, commit string) (string, error) {
	if !validCommit(commit) {
		return "", fmt.Errorf("%w: %q is not a commit's name", ErrNoBase, commit)
	}
	unlock, err := m.lockBases()
	if err != nil {
		return "", err
	}
	defer unlock()
	dir := m.BaseDir(commit)
	if fi, err := os.Lstat(dir); err == nil && fi.IsDir() {
		return dir, nil
	}
	m.dropUnusedBases()
	tmp, err := os.MkdirTemp(filepath.Join(m.dir(), ".base"), commit[:12]+".new-")
	if err != nil {
		return "", err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	if _, err := archiveInto(ctx, main, commit, tmp); err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("the base %s: %w", commit[:12], err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	return dir, nil
}

// dropUnusedBases removes, with the bases locked, what a killed cove left
// half made (*.new-*) and the checkouts no task is on any more (a discard
// that failed after its record was gone), so that none is kept for ever.
func (m *Manager) dropUnusedBases() {
	ents, err := os.ReadDir(filepath.Join(m.dir(), ".base"))
	if err != nil {
		return
	}
	rs, err := m.List()
	if err != nil {
		return // a record cove cannot read may name any of them
	}
	used := map[string]bool{}
	for _, r := range rs {
		used[r.Base] = true
	}
	for _, e := range ents {
		if n := e.Name(); e.IsDir() && (strings.Contains(n, ".new-") || validCommit(n) && !used[n]) {
			os.RemoveAll(filepath.Join(m.dir(), ".base", n))
		}
	}
}

// releaseBase removes the checkout of commit once no task is on it.
func (m *Manager) releaseBase(commit string) error {
	if !validCommit(commit) {
		return nil
	}
	if _, err := os.Lstat(m.BaseDir(commit)); errors.Is(err, fs.ErrNotExist) {
		return nil // none kept (ext4): nothing to lock for
	}
	unlock, err := m.lockBases()
	if err != nil {
		return err
	}
	defer unlock()
	rs, err := m.List()
	if err != nil {
		return err
	}
	for _, r := range rs {
		if r.Base == commit {
			return nil
		}
	}
	return os.RemoveAll(m.BaseDir(commit))
}

func validCommit(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// archiveScript writes a tar of commit $1 as a checkout has it: git
// archive from a scratch repository that reads the project's objects
// (its alternates) and whose info/attributes, which come before the
// project's .gitattributes, take export-ignore and export-subst away.
// Modes as a checkout's under umask 022. Exit 5: the project's objects
// are not all where the scratch repository can read them.
const archiveScript = `set -e; g() { git -c safe.directory='*' "$@"; }
o=$(cd "$(g rev-parse --git-path objects)" && pwd) || exit 5
[ -z "$(g config extensions.partialClone || true)" ] || exit 5
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
git init -q --bare --template= $2 "$d"; mkdir -p "$d/objects/info" "$d/info"
echo "$o" > "$d/objects/info/alternates"
echo '* -export-ignore -export-subst' > "$d/info/attributes"
git --git-dir="$d" -c tar.umask=022 archive --format=tar "$1"`

// archiveInto extracts commit, as the project's workspace main archives
// it, into dir.
func archiveInto(ctx context.Context, main workspace.Workspace, commit, dir string) (image.Stats, error) {
	format := ""
	if len(commit) == 64 {
		format = "--object-format=sha256"
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return image.Stats{}, err
	}
	var st image.Stats
	unpacked := make(chan error, 1)
	go func() {
		var err error
		st, err = unpackCheckout(pr, dir)
		pr.Close() // a writer still writing meets a closed pipe and stops
		unpacked <- err
	}()
	null, err := os.Open(os.DevNull)
	if err != nil {
		pw.Close()
		<-unpacked
		return st, err
	}
	defer null.Close()
	var errb limitedBuffer
	code, err := main.Exec(ctx, container.ExecRequest{Args: []string{"sh", "-c", archiveScript, "sh", commit, format}, Cwd: "/workspace"},
		[3]*os.File{null, pw, errb.file()})
	pw.Close()
	errb.close()
	uerr := <-unpacked
	switch {
	case uerr != nil && (err != nil || code != 0):
		return st, uerr // what stopped the archive: its reader is gone
	case err != nil:
		return st, fmt.Errorf("git archive: %w", err)
	case code == 5:
		return st, fmt.Errorf("%w: the project's objects are not all in its repository (%s)", ErrNoBase, truncate(errb.String()))
	case code != 0:
		return st, fmt.Errorf("git archive exited %d: %s", code, truncate(errb.String()))
	}
	return st, uerr
}

// unpackCheckout extracts the tar r (git archive's) into dir, refusing
// what a checkout never has: only directories, regular files and
// symlinks pass, and no name a layer's extraction would take for a
// whiteout (such a project keeps its checkout in the workspace).
func unpackCheckout(r io.Reader, dir string) (image.Stats, error) {
	pr, pw := io.Pipe()
	checked := make(chan error, 1)
	go func() {
		err := checkCheckout(r, pw)
		pw.CloseWithError(err)
		checked <- err
	}()
	st, err := image.Unpack(pr, dir, 0)
	if err == nil {
		io.Copy(io.Discard, pr) // the end of the tar, which Unpack need not read
	}
	pr.CloseWithError(errors.New("unpack stopped"))
	if cerr := <-checked; cerr != nil {
		return st, cerr
	}
	return st, err
}

// checkCheckout copies the tar r to w, entry by entry, failing at the
// first entry a checkout does not have.
func checkCheckout(r io.Reader, w io.Writer) error {
	tr := tar.NewReader(r)
	tw := tar.NewWriter(w)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			// git archive pads its tar to a whole record after the end:
			// read, so that it does not die writing to a closed pipe.
			io.Copy(io.Discard, io.LimitReader(r, 1<<20))
			return tw.Close()
		}
		if err != nil {
			return fmt.Errorf("read the base's tar: %w", err)
		}
		switch hdr.Typeflag {
		case tar.TypeXGlobalHeader:
			continue // the commit's id
		case tar.TypeDir, tar.TypeReg, tar.TypeSymlink:
		default:
			return fmt.Errorf("%w: %q is a %q entry, which no checkout has", ErrNoBase, hdr.Name, hdr.Typeflag)
		}
		if strings.HasPrefix(path.Base(hdr.Name), ".wh.") {
			return fmt.Errorf("%w: %q would be taken for a whiteout", ErrNoBase, hdr.Name)
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return err
		}
	}
}

// cloneTree copies the tree src (a base, made here and written by no
// workspace) into dst, keeping what dst has already: directories made,
// each file's data shared with src's where the file system can
// (FICLONE), else copied in the kernel; modes and times kept. dst may
// have been a workspace's already (a task whose first start failed):
// nothing there is followed, a symlink where src has a directory is
// refused, and what exists is left as it is.
func cloneTree(src, dst string) (CloneStats, error) {
	var s CloneStats
	sfd, err := unix.Open(src, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return s, fmt.Errorf("copy the base: %w", err)
	}
	defer unix.Close(sfd)
	dfd, err := unix.Open(dst, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return s, fmt.Errorf("copy the base: %w", err)
	}
	defer unix.Close(dfd)
	if err := cloneDir(sfd, dfd, ".", &s); err != nil {
		return s, fmt.Errorf("copy the base: %w", err)
	}
	return s, nil
}

func cloneDir(sfd, dfd int, rel string, s *CloneStats) error {
	dup, err := unix.Dup(sfd)
	if err != nil {
		return err
	}
	d := os.NewFile(uintptr(dup), rel)
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	for _, n := range names {
		if err := cloneEntry(sfd, dfd, n, path.Join(rel, n), s); err != nil {
			return err
		}
	}
	return nil
}

func cloneEntry(sfd, dfd int, name, rel string, s *CloneStats) error {
	var st unix.Stat_t
	if err := unix.Fstatat(sfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	times := []unix.Timespec{st.Atim, st.Mtim}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		made := true
		if err := unix.Mkdirat(dfd, name, 0o700); errors.Is(err, unix.EEXIST) {
			made = false
		} else if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		csfd, err := unix.Openat(sfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		defer unix.Close(csfd)
		cdfd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("%s (in the task's tree, not a directory): %w", rel, err)
		}
		defer unix.Close(cdfd)
		if err := cloneDir(csfd, cdfd, rel, s); err != nil {
			return err
		}
		if !made {
			return nil
		}
		if err := unix.Fchmod(cdfd, st.Mode&0o7777); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		return unix.UtimesNanoAt(cdfd, "", times, unix.AT_EMPTY_PATH)
	case unix.S_IFREG:
		out, err := unix.Openat(dfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if errors.Is(err, unix.EEXIST) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		dst := os.NewFile(uintptr(out), rel)
		defer dst.Close()
		in, err := unix.Openat(sfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		src := os.NewFile(uintptr(in), rel)
		defer src.Close()
		if unix.IoctlFileClone(out, in) == nil {
			s.Shared++
		} else if _, err := io.Copy(dst, src); err != nil { // copy_file_range
			return fmt.Errorf("%s: %w", rel, err)
		}
		s.Files++
		s.Bytes += st.Size
		if err := unix.Fchmod(out, st.Mode&0o7777); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		return unix.UtimesNanoAt(out, "", times, unix.AT_EMPTY_PATH)
	case unix.S_IFLNK:
		buf := make([]byte, unix.PathMax)
		n, err := unix.Readlinkat(sfd, name, buf)
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		if err := unix.Symlinkat(string(buf[:n]), dfd, name); errors.Is(err, unix.EEXIST) {
			return nil
		} else if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		return unix.UtimesNanoAt(dfd, name, times, unix.AT_SYMLINK_NOFOLLOW)
	}
	return nil // a base holds nothing else
}

// BaseDir is where the checkout of the base commit is kept while a task
// is on it.
func (m *Manager) BaseDir(commit string) string {
	return filepath.Join(m.dir(), ".base", commit)
}
