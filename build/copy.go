package build

import (
	"bufio"
	"bytes"
	"compress/bzip2"
	"context"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/cove-sh/cove/image"
	"github.com/cove-sh/cove/internal/userns"
	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
	"golang.org/x/sys/unix"
)

// ErrOutsideContext is returned for a COPY or ADD source that leads out of
// the build context: a path with .. or a symlink pointing outside.
var ErrOutsideContext = errors.New("leads out of the build context")

// source is a tree COPY reads from: the build context (with its
// .dockerignore) or a stage's files staged in a directory.
type source struct {
	name   string // "the build context", "stage NAME"
	root   *os.Root
	ignore *patternmatcher.PatternMatcher // nil: nothing ignored
}

// openContext opens the context directory dir with its .dockerignore, or
// (ignore not nil) the ignore file ignore instead, which it closes.
func openContext(dir string, ignore *os.File) (*source, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		if ignore != nil {
			ignore.Close()
		}
		return nil, fmt.Errorf("build context: %w", err)
	}
	src := &source{name: "the build context", root: root}
	f := ignore
	if f == nil {
		f, err = openRegular(root, ".dockerignore", maxDockerignore)
	}
	if errors.Is(err, os.ErrNotExist) {
		return src, nil
	}
	if err != nil {
		root.Close()
		return nil, fmt.Errorf(".dockerignore: %w", err)
	}
	defer f.Close()
	patterns, err := ignorefile.ReadAll(io.LimitReader(f, maxDockerignore))
	if err == nil {
		src.ignore, err = patternmatcher.New(patterns)
	}
	if err != nil {
		root.Close()
		return nil, fmt.Errorf(".dockerignore: %w", err)
	}
	return src, nil
}

func (s *source) ignored(rel string) bool {
	if s.ignore == nil || rel == "." {
		return false
	}
	m, err := s.ignore.MatchesOrParentMatches(filepath.ToSlash(rel))
	return err == nil && m
}

// copySpec is one COPY's destination and ownership.
type copySpec struct {
	dest     string // absolute, in the image
	destDir  bool   // dest names a directory (trailing slash, or several sources)
	uid, gid int
	mode     os.FileMode // 0: keep
	// parents (COPY --parents) keeps each source's path below the
	// context (or below a /./ in its pattern) under dest.
	parents bool
	// exclude (--exclude) leaves out what matches, by its path in the
	// context or below the source directory named.
	exclude *patternmatcher.PatternMatcher
	top     string // the source entry being copied, for exclude
}

// excluded says whether --exclude leaves out rel (a context path).
func (s copySpec) excluded(rel string) bool {
	if s.exclude == nil {
		return false
	}
	if m, _ := s.exclude.MatchesOrParentMatches(rel); m {
		return true
	}
	if s.top != "" && s.top != "." && strings.HasPrefix(rel, s.top+"/") {
		m, _ := s.exclude.MatchesOrParentMatches(strings.TrimPrefix(rel, s.top+"/"))
		return m
	}
	return false
}

// copyInto copies the sources matching patterns from src into layer (the
// new layer's directory), as they will land in the image, and returns a
// hash of what it wrote: names, modes, owners, link targets and contents,
// not times, so that a touched but unchanged file still hits the cache.
// Everything is written through an os.Root on layer: a symlink the copy
// itself put there is never written through to the host.
//
// With layer "", nothing is written: the hash alone is computed (to look
// the step up in the cache before copying anything).
func copyInto(src *source, patterns []string, spec copySpec, layer string, h hash.Hash) error {
	var dst *os.Root
	if layer != "" {
		var err error
		if dst, err = os.OpenRoot(layer); err != nil {
			return err
		}
		defer dst.Close()
	}
	type match struct{ rel, pivot string }
	var matches []match
	for _, p := range patterns {
		// As the reference says, a leading slash and ../ are removed: the
		// path is the context's (or the stage's) own, cleaned from its root.
		clean := path.Clean("/" + p)[1:]
		if clean == "" {
			clean = "."
		}
		// --parents keeps the path below a /./ in the pattern, else all.
		pivot := "."
		if before, _, ok := strings.Cut("/"+strings.TrimPrefix(p, "./"), "/./"); ok && spec.parents {
			pivot = inRoot(before)
		}
		if strings.ContainsAny(clean, "*?[") {
			found, err := glob(src, clean, spec.parents)
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			n := 0
			for _, f := range found {
				if !src.ignored(f) {
					n++
					if !spec.excluded(f) {
						matches = append(matches, match{f, pivot})
					}
				}
			}
			if n == 0 {
				return fmt.Errorf("%s: nothing in %s matches", p, src.name)
			}
			continue
		}
		if src.ignored(clean) {
			return fmt.Errorf("%s: excluded by .dockerignore", p)
		}
		if !spec.excluded(clean) {
			matches = append(matches, match{clean, pivot})
		}
	}
	destDir := spec.destDir || len(matches) > 1 || spec.parents
	for _, mt := range matches {
		m := mt.rel
		fi, err := src.root.Stat(m) // a named source's symlinks are followed, inside the root only
		if err != nil {
			if strings.Contains(err.Error(), "escapes") {
				return fmt.Errorf("%s: a symlink that %w (copy its target into the context instead)", m, ErrOutsideContext)
			}
			if errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("%s: not found in %s", m, src.name)
			}
			return fmt.Errorf("%s: %w", m, err)
		}
		target := spec.dest
		switch {
		case spec.parents:
			rel, err := filepath.Rel(mt.pivot, m)
			if err != nil || !filepath.IsLocal(rel) && rel != "." {
				return fmt.Errorf("%s: not below %s", m, mt.pivot)
			}
			target = path.Join(spec.dest, rel)
		case !fi.IsDir() && destDir:
			target = path.Join(spec.dest, path.Base(m))
		}
		es := spec
		es.top = m
		if err := copyEntry(src, m, target, fi, true, es, dst, h); err != nil {
			return err
		}
	}
	return nil
}

// glob finds what a source pattern names in src: as filepath.Match, or
// with --parents as BuildKit matches there (its include patterns), where
// ** matches any number of directories, none too.
func glob(src *source, pattern string, parents bool) ([]string, error) {
	if !parents || !strings.Contains(pattern, "**") {
		return fs.Glob(src.root.FS(), pattern)
	}
	pm, err := patternmatcher.New([]string{pattern})
	if err != nil {
		return nil, err
	}
	var found []string
	err = fs.WalkDir(src.root.FS(), treePrefix(pattern), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // what cannot be read matches nothing, as with fs.Glob
		}
		if m, _ := pm.MatchesOrParentMatches(p); m && p != "." {
			found = append(found, p)
			if d.IsDir() {
				return fs.SkipDir // copied whole
			}
		}
		return nil
	})
	return found, err
}

// addArchive unpacks the source p into dest in the layer if it is a local
// tar archive (by its content) and says whether it was one. The archive's
// bytes go into the cache key.
func addArchive(ctx context.Context, src *source, p string, spec copySpec, layer string, h hash.Hash) (bool, error) {
	rel := inRoot(p)
	if strings.ContainsAny(rel, "*?[") || src.ignored(rel) {
		return false, nil
	}
	f, err := openRegular(src.root, rel, -1)
	if err != nil {
		return false, nil
	}
	defer f.Close()
	bz, err := archiveKind(f, p)
	if err != nil || bz == "" {
		return false, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return false, err
	}
	var r io.Reader = io.TeeReader(f, h)
	if bz == "bzip2" {
		r = bzip2.NewReader(r) // image.Unpack reads the plain tar inside
	}
	dst, err := os.OpenRoot(layer)
	if err != nil {
		return false, err
	}
	defer dst.Close()
	target := inRoot(spec.dest)
	if err := dst.MkdirAll(target, 0o755); err != nil {
		return false, fmt.Errorf("%s: %w", spec.dest, err)
	}
	fmt.Fprintf(h, "add-archive\x00%s\x00%s\x00", rel, spec.dest)
	if _, err := image.UnpackOwned(ctx, r, filepath.Join(layer, target), 0); err != nil {
		return false, fmt.Errorf("%s: %w", p, err)
	}
	return true, nil
}

// xzMagic starts an xz stream.
var xzMagic = []byte{0xfd, '7', 'z', 'X', 'Z', 0}

// archiveKind says how ADD unpacks the local file f (named p): "tar" for
// a tar archive, plain, gzip or zstd (image.Unpack reads those), "bzip2"
// for a bzip2-compressed tar, "" for a file to copy as it is, as BuildKit
// copies what is no archive. An xz archive, which the reference unpacks
// too and cove cannot, is refused when its name says it is a tar.
func archiveKind(f *os.File, p string) (string, error) {
	br := bufio.NewReaderSize(f, 1024)
	magic, _ := br.Peek(len(xzMagic))
	switch {
	case bytes.HasPrefix(magic, xzMagic):
		if name := strings.ToLower(p); strings.HasSuffix(name, ".tar.xz") || strings.HasSuffix(name, ".txz") {
			return "", fmt.Errorf("%s: ADD of an xz-compressed archive is not supported (cove build unpacks tar, gzip, bzip2 and zstd ones): compress it with gzip, or COPY it and unpack it in a RUN", p)
		}
		return "", nil
	case bytes.HasPrefix(magic, []byte("BZh")):
		if image.IsArchive(bzip2.NewReader(br)) {
			return "bzip2", nil
		}
		return "", nil
	case image.IsArchive(br):
		return "tar", nil
	}
	return "", nil
}

// writeHeredocs writes COPY's heredoc sources (COPY <<EOF /path) as files:
// at dest, or in it when dest is a directory.
func writeHeredocs(docs []instructions.SourceContent, spec copySpec, several bool, layer string, h hash.Hash) error {
	if len(docs) == 0 {
		return nil
	}
	dst, err := os.OpenRoot(layer)
	if err != nil {
		return err
	}
	defer dst.Close()
	for _, d := range docs {
		target := spec.dest
		if spec.destDir || several {
			target = path.Join(spec.dest, d.Path)
		}
		out := inRoot(target)
		fmt.Fprintf(h, "heredoc\x00%s\x00%s\x00", target, d.Data)
		if err := dst.MkdirAll(path.Dir(out), 0o755); err != nil {
			return fmt.Errorf("%s: %w", target, err)
		}
		if err := removeNonDir(dst, out); err != nil {
			return err
		}
		perm := spec.mode
		if perm == 0 {
			perm = 0o644
		}
		if err := dst.WriteFile(out, []byte(d.Data), 0o600); err != nil {
			return fmt.Errorf("%s: %w", target, err)
		}
		if err := lchown(dst, out, spec); err != nil {
			return err
		}
		if err := dst.Chmod(out, perm); err != nil {
			return err
		}
	}
	return nil
}

// inRoot is an image path as a name relative to a root.
func inRoot(p string) string {
	rel := strings.TrimPrefix(path.Clean("/"+p), "/")
	if rel == "" {
		return "."
	}
	return rel
}

// copyEntry copies one source entry (and a directory's contents) to target
// in dst. Entries below a named source are not followed: symlinks are
// copied as written.
func copyEntry(src *source, rel, target string, fi fs.FileInfo, top bool, spec copySpec, dst *os.Root, h hash.Hash) error {
	if !top && (src.ignored(rel) || spec.excluded(rel)) && (!fi.IsDir() || !keptBelow(src, rel, spec)) {
		return nil
	}
	out := inRoot(target)
	dry := dst == nil // hash only
	if !dry {
		if err := dst.MkdirAll(path.Dir(out), 0o755); err != nil {
			return fmt.Errorf("%s: %w", target, err)
		}
	}
	mode := fi.Mode()
	perm := mode.Perm() | mode&(os.ModeSetuid|os.ModeSetgid|os.ModeSticky)
	if spec.mode != 0 {
		perm = spec.mode
	}
	fmt.Fprintf(h, "%s\x00%v\x00%o\x00%d:%d\x00", target, mode.Type(), perm, spec.uid, spec.gid)
	var err error
	switch {
	case mode.IsDir():
		err = copyDir(src, rel, target, top, spec, dst, h)
	case mode&os.ModeSymlink != 0:
		return copySymlink(src, rel, target, spec, dst, h)
	case mode.IsRegular():
		err = copyRegular(src, rel, target, dst, h)
	default:
		return nil // sockets, devices, pipes: not copied
	}
	if err != nil || dry {
		return err
	}
	if err := lchown(dst, out, spec); err != nil {
		return err
	}
	if err := dst.Chmod(out, perm); err != nil { // after chown, which clears setuid
		return err
	}
	return dst.Chtimes(out, fi.ModTime(), fi.ModTime())
}

// copyDir makes the directory target (dst nil: hashes only) with the
// source's xattrs, and copies what the source directory rel holds into it.
func copyDir(src *source, rel, target string, top bool, spec copySpec, dst *os.Root, h hash.Hash) error {
	out := inRoot(target)
	if dst != nil {
		if cur, err := dst.Lstat(out); err == nil && !cur.IsDir() {
			if err := dst.Remove(out); err != nil {
				return err
			}
		}
		if err := dst.MkdirAll(out, 0o755); err != nil {
			return fmt.Errorf("%s: %w", target, err)
		}
	}
	// A directory source's contents are copied, not the directory: its
	// target (dest) keeps what the stage has, or is made anew
	// (keepParents), without the source's xattrs.
	if !top {
		if err := copyDirXattrs(src.root, rel, dst, out, h); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
	}
	names, err := sortedNames(src.root.Open(rel))
	if err != nil {
		return err
	}
	for _, n := range names {
		crel := path.Join(rel, n)
		cfi, err := src.root.Lstat(crel)
		if err != nil {
			return err
		}
		if err := copyEntry(src, crel, path.Join(target, n), cfi, false, spec, dst, h); err != nil {
			return err
		}
	}
	return nil
}

// copySymlink copies the symlink rel as written (dst nil: hashes only).
func copySymlink(src *source, rel, target string, spec copySpec, dst *os.Root, h hash.Hash) error {
	link, err := src.root.Readlink(rel)
	if err != nil {
		return err
	}
	io.WriteString(h, link)
	if dst == nil {
		return nil
	}
	out := inRoot(target)
	if err := removeNonDir(dst, out); err != nil {
		return err
	}
	if err := dst.Symlink(link, out); err != nil {
		return fmt.Errorf("%s: %w", target, err)
	}
	return lchown(dst, out, spec)
}

// copyRegular copies the regular file rel, its content and xattrs, to
// target (dst nil: hashes them only).
func copyRegular(src *source, rel, target string, dst *os.Root, h hash.Hash) error {
	in, err := openRegular(src.root, rel, -1)
	if err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	defer in.Close()
	if dst == nil {
		if err := copyXattrs(in, nil, h); err != nil {
			return err
		}
		if _, err := io.Copy(h, in); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		return nil
	}
	out := inRoot(target)
	if err := removeNonDir(dst, out); err != nil {
		return err
	}
	f, err := dst.OpenFile(out, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("%s: %w", target, err)
	}
	if err = copyXattrs(in, f, h); err == nil {
		_, err = io.Copy(io.MultiWriter(f, h), in)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	return nil
}

// keptBelow says whether the directory rel, which .dockerignore or
// --exclude leaves out, holds something an exception (a !pattern) brings
// back: BuildKit walks into such a directory, and makes it for what it
// copies from below.
func keptBelow(src *source, rel string, spec copySpec) bool {
	if (src.ignore == nil || !src.ignore.Exclusions()) && (spec.exclude == nil || !spec.exclude.Exclusions()) {
		return false
	}
	found := false
	fs.WalkDir(src.root.FS(), rel, func(p string, d fs.DirEntry, err error) error {
		if err == nil && p != rel && !src.ignored(p) && !spec.excluded(p) {
			found = true
			return fs.SkipAll
		}
		return nil
	})
	return found
}

// removeNonDir clears the way for a file or symlink: what an earlier
// source put there goes, unless it is a directory.
func removeNonDir(dst *os.Root, name string) error {
	fi, err := dst.Lstat(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return fmt.Errorf("%s: a directory is in the way of a file", name)
	}
	return dst.Remove(name)
}

func lchown(dst *os.Root, name string, spec copySpec) error {
	if os.Geteuid() == 0 {
		return dst.Lchown(name, spec.uid, spec.gid)
	}
	if spec.uid == 0 && spec.gid == 0 {
		return nil // our own ids are root's in the layer (idMap)
	}
	// Unprivileged, we cannot give a file another owner: the owner the
	// layer must record goes in an xattr beside it (not on a symlink,
	// which cannot carry one: it stays root's).
	if fi, err := dst.Lstat(name); err != nil || fi.Mode()&os.ModeSymlink != 0 {
		return err
	}
	f, err := dst.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	return setOwnerXattr(f, spec.uid, spec.gid)
}

// ownerXattr holds the owner a rootless COPY gave a file, which the layer
// records in place of the file's own (see lchown, layerWriter.entry).
const ownerXattr = "user.cove.owner"

func setOwnerXattr(f *os.File, uid, gid int) error {
	if err := unix.Fsetxattr(int(f.Fd()), ownerXattr, []byte(fmt.Sprintf("%d:%d", uid, gid)), 0); err != nil {
		return fmt.Errorf("record the owner of %s: %w (the file system needs user xattrs for a rootless COPY --chown)", f.Name(), err)
	}
	return nil
}

// ownerFromXattr reads the owner a rootless COPY recorded on full.
func ownerFromXattr(full string) (uid, gid int, ok bool) {
	buf := make([]byte, 32)
	n, err := unix.Lgetxattr(full, ownerXattr, buf)
	if err != nil {
		return 0, 0, false
	}
	u, g, found := strings.Cut(string(buf[:n]), ":")
	uid, err1 := strconv.Atoi(u)
	gid, err2 := strconv.Atoi(g)
	return uid, gid, found && err1 == nil && err2 == nil
}

// parseChown reads --chown: numeric ids, or names looked up in the stage's
// /etc/passwd and /etc/group (read through lookup).
func parseChown(s string, lookup func(string) []byte) (uid, gid int, err error) {
	if s == "" {
		return 0, 0, nil
	}
	u, g, hasGroup := strings.Cut(s, ":")
	uid, ugid, err := resolveID(u, lookup("/etc/passwd"))
	if err != nil {
		return 0, 0, fmt.Errorf("--chown=%s: user %w", s, err)
	}
	gid = ugid
	if !hasGroup {
		if _, convErr := strconv.Atoi(u); convErr == nil {
			gid = uid
		}
		return uid, gid, nil
	}
	gid, _, err = resolveID(g, lookup("/etc/group"))
	if err != nil {
		return 0, 0, fmt.Errorf("--chown=%s: group %w", s, err)
	}
	return uid, gid, nil
}

// resolveID returns a number as is, or a name's id (and, from passwd, its
// primary group) from an /etc/passwd or /etc/group file.
func resolveID(name string, file []byte) (id, group int, err error) {
	if n, err := strconv.Atoi(name); err == nil && n >= 0 {
		return n, n, nil
	}
	for _, line := range strings.Split(string(file), "\n") {
		f := strings.Split(line, ":")
		if len(f) >= 3 && f[0] == name {
			id, err := strconv.Atoi(f[2])
			if err != nil {
				break
			}
			group = id
			if len(f) >= 4 {
				if g, err := strconv.Atoi(f[3]); err == nil {
					group = g
				}
			}
			return id, group, nil
		}
	}
	return 0, 0, fmt.Errorf("%q is not in the image: give a number or add it first", name)
}

func parseChmod(s string) (os.FileMode, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(s, 8, 32)
	if err != nil || n > 0o7777 {
		return 0, fmt.Errorf("--chmod=%s: give an octal mode such as 0755", s)
	}
	m := os.FileMode(n & 0o777)
	if n&0o4000 != 0 {
		m |= os.ModeSetuid
	}
	if n&0o2000 != 0 {
		m |= os.ModeSetgid
	}
	if n&0o1000 != 0 {
		m |= os.ModeSticky
	}
	return m, nil
}

// stageTree merges what a stage holds under each of paths (its base
// rootfs, then each of its layers with their whiteouts and opaque
// directories applied) into dir, for COPY --from. The stage's files come
// from images and are hostile: both sides are read and written through
// os.Root, so no symlink among them leads anywhere else.
//
// As root the files keep their owners. Rootless with subordinate ids the
// stage's files are its users' and may be closed to the user (a 0700
// home), so the merge runs in the user namespace helper, where they are
// all readable, and the tree it makes is the user's (as a rootless merge
// here makes it).
func stageTree(ctx context.Context, lowers, paths []string, dir string) error {
	if m := userns.Current(); m.Helps() {
		args := append([]string{dir, strconv.Itoa(len(lowers))}, lowers...)
		_, err := userns.Run(ctx, m, StageTask, append(args, paths...)...)
		return err
	}
	return mergeTree(lowers, paths, dir, os.Geteuid() == 0)
}

// StageTask is the helper's task name for stageTree: Stage.
const StageTask = "stage"

// Stage is the helper's task (StageTask): args are the tree's directory,
// the number of lowers, the lowers and the paths.
func Stage(args []string, _ io.Reader, _ io.Writer) error {
	if len(args) < 2 {
		return fmt.Errorf("%s: want DIR N LOWERS… PATHS…, got %q", StageTask, args)
	}
	n, err := strconv.Atoi(args[1])
	if err != nil || n < 0 || 2+n > len(args) {
		return fmt.Errorf("%s: bad arguments %q", StageTask, args)
	}
	return mergeTree(args[2:2+n], args[2+n:], args[0], false)
}

// mergeTree is stageTree in this process; keepOwners gives the files
// their owners in the stage (root only).
func mergeTree(lowers, paths []string, dir string, keepOwners bool) error {
	dst, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer dst.Close()
	for i := len(lowers) - 1; i >= 0; i-- {
		lr, err := os.OpenRoot(lowers[i])
		if err != nil {
			return fmt.Errorf("stage files: %w", err)
		}
		for _, p := range paths {
			err = mergeLayer(lr, dst, p, keepOwners)
			if err != nil {
				break
			}
		}
		lr.Close()
		if err != nil {
			return fmt.Errorf("stage files: %w", err)
		}
	}
	return nil
}

// resolveInStage resolves the symlinks in rel as the stage's own processes
// would see them (an absolute target from the stage's root, .. never above
// it), looking each component up in the topmost layer that has it. What it
// returns is a path inside the stage with no symlink in it.
func resolveInStage(lowers []string, rel string) (string, error) {
	var done []string
	todo := strings.Split(inRoot(rel), "/")
	for hops := 0; len(todo) > 0; {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case ".", "":
			continue
		case "..":
			if len(done) > 0 {
				done = done[:len(done)-1]
			}
			continue
		}
		cur := path.Join(append(append([]string{}, done...), c)...)
		link, isLink := topLink(lowers, cur)
		if !isLink {
			done = append(done, c)
			continue
		}
		if hops++; hops > 40 {
			return "", fmt.Errorf("%s: too many levels of symlinks", rel)
		}
		if path.IsAbs(link) {
			done = nil
		}
		todo = append(strings.Split(link, "/"), todo...)
	}
	if len(done) == 0 {
		return ".", nil
	}
	return path.Join(done...), nil
}

// topLink says whether the topmost layer with name (no symlinks in its
// directories) has a symlink there, and its target.
func topLink(lowers []string, name string) (string, bool) {
	for _, l := range lowers {
		r, err := os.OpenRoot(l) // a layer's own symlinks never lead out of it
		if err != nil {
			continue
		}
		fi, err := r.Lstat(name)
		if err != nil {
			r.Close()
			continue
		}
		var target string
		if fi.Mode()&os.ModeSymlink != 0 {
			target, err = r.Readlink(name)
		}
		r.Close()
		return target, fi.Mode()&os.ModeSymlink != 0 && err == nil
	}
	return "", false
}

// treePrefix is the directory a COPY source reads below: the pattern up to
// its first component with a glob character.
func treePrefix(pattern string) string {
	var keep []string
	for _, c := range strings.Split(inRoot(pattern), "/") {
		if strings.ContainsAny(c, "*?[") {
			break
		}
		keep = append(keep, c)
	}
	if len(keep) == 0 {
		return "."
	}
	return path.Join(keep...)
}

// mergeLayer applies what one layer has at rel (and below) onto dst.
func mergeLayer(lr, dst *os.Root, rel string, keepOwners bool) error {
	// A whiteout or an opaque directory above rel hides what lower layers
	// had there.
	if rel != "." {
		parts := strings.Split(rel, "/")
		for i := range parts {
			q := path.Join(parts[:i+1]...)
			fi, err := lr.Lstat(q)
			if err != nil {
				return nil // this layer has nothing at rel
			}
			if rootWhiteout(lr, q, fi) {
				return dst.RemoveAll(q)
			}
			if fi.IsDir() && rootOpaque(lr, q) {
				if err := dst.RemoveAll(q); err != nil {
					return err
				}
			}
		}
	}
	return mergeEntry(lr, dst, rel, keepOwners)
}

func mergeEntry(lr, dst *os.Root, rel string, keepOwners bool) error {
	fi, err := lr.Lstat(rel)
	if err != nil {
		return nil
	}
	if rootWhiteout(lr, rel, fi) {
		return dst.RemoveAll(rel)
	}
	if rel != "." {
		if err := dst.MkdirAll(path.Dir(rel), 0o755); err != nil {
			return err
		}
		if cur, err := dst.Lstat(rel); err == nil && (!cur.IsDir() || !fi.IsDir()) {
			if err := dst.RemoveAll(rel); err != nil {
				return err
			}
		}
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	switch {
	case fi.IsDir():
		if err := dst.MkdirAll(rel, 0o755); err != nil {
			return err
		}
		if err := copyDirXattrs(lr, rel, dst, rel, nil); err != nil {
			return err
		}
		names, err := sortedNames(lr.Open(rel))
		if err != nil {
			return err
		}
		for _, n := range names {
			if err := mergeEntry(lr, dst, path.Join(rel, n), keepOwners); err != nil {
				return err
			}
		}
	case fi.Mode()&os.ModeSymlink != 0:
		link, err := lr.Readlink(rel)
		if err != nil {
			return err
		}
		if err := dst.Symlink(link, rel); err != nil {
			return err
		}
		if keepOwners && st != nil {
			return dst.Lchown(rel, int(st.Uid), int(st.Gid))
		}
		return nil
	case fi.Mode().IsRegular():
		in, err := lr.Open(rel)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := dst.OpenFile(rel, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		if err = copyXattrs(in, out, nil); err == nil {
			_, err = io.Copy(out, in)
		}
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	default:
		return nil // devices, sockets, pipes: not copied
	}
	if keepOwners && st != nil {
		if err := dst.Lchown(rel, int(st.Uid), int(st.Gid)); err != nil {
			return err
		}
	}
	if err := dst.Chmod(rel, fi.Mode()&(os.ModePerm|os.ModeSetuid|os.ModeSetgid|os.ModeSticky)); err != nil {
		return err
	}
	return dst.Chtimes(rel, fi.ModTime(), fi.ModTime())
}

func rootWhiteout(r *os.Root, name string, fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	if st.Mode&syscall.S_IFMT == syscall.S_IFCHR && st.Rdev == 0 {
		return true
	}
	if !fi.Mode().IsRegular() || fi.Size() != 0 {
		return false
	}
	return hasXattr(r, name, "trusted.overlay.whiteout", "user.overlay.whiteout")
}

func rootOpaque(r *os.Root, name string) bool {
	f, err := r.Open(name)
	if err != nil {
		return false
	}
	defer f.Close()
	for _, x := range []string{"trusted.overlay.opaque", "user.overlay.opaque"} {
		buf := make([]byte, 8)
		if n, err := unix.Fgetxattr(int(f.Fd()), x, buf); err == nil && n == 1 && buf[0] == 'y' {
			return true
		}
	}
	return false
}

func hasXattr(r *os.Root, name string, attrs ...string) bool {
	f, err := r.Open(name)
	if err != nil {
		return false
	}
	defer f.Close()
	for _, x := range attrs {
		if _, err := unix.Fgetxattr(int(f.Fd()), x, nil); err == nil {
			return true
		}
	}
	return false
}
