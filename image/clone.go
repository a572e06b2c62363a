package image

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"

	"github.com/cove-sh/cove/internal/fdtree"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"
)

// base is a stored tree a new image can start from as a copy: an image's
// rootfs or a snapshot's (snapshot.go).
type base struct {
	rootfs  string
	diffIDs []v1.Hash
	owners  string // as Image.OwnersMode
	size    int64
	image   v1.Hash // the image's manifest digest; zero for a snapshot
	chain   v1.Hash // the snapshot's chain ID; zero for an image
}

// baseFor returns the stored image or snapshot whose layers (by DiffID)
// are the longest prefix of diffIDs, so that a new image built FROM it, or
// sharing its first layers, needs only the layers past it fetched and
// applied. A copy shares its files, so a tree whose files got their owners
// the same way (owners, an Image.OwnersMode) is wanted; with anyOwners (an
// image cove built, whose base layers are no longer stored anywhere else)
// another will do.
func (s *Store) baseFor(diffIDs []v1.Hash, owners string, anyOwners bool) *base {
	var cands []*base
	dirs, _ := os.ReadDir(filepath.Join(s.dir, "images"))
	for _, d := range dirs {
		img, err := s.byDigest(v1.Hash{Algorithm: "sha256", Hex: d.Name()})
		if err != nil {
			continue
		}
		cands = append(cands, &base{rootfs: img.RootFS, diffIDs: img.DiffIDs, owners: img.OwnersMode(), size: img.Size, image: img.Digest})
	}
	for name, sn := range s.snapshots() {
		cands = append(cands, &base{rootfs: filepath.Join(s.chainDir(name), "rootfs"), diffIDs: sn.DiffIDs, owners: sn.Owners, size: sn.Size, chain: sn.ChainID})
	}
	var best, other *base
	for _, c := range cands {
		if len(c.diffIDs) == 0 || !isPrefix(c.diffIDs, diffIDs) {
			continue
		}
		if c.owners != owners {
			if other == nil || len(c.diffIDs) > len(other.diffIDs) {
				other = c
			}
			continue
		}
		if best == nil || len(c.diffIDs) > len(best.diffIDs) {
			best = c
		}
	}
	if best == nil && anyOwners {
		return other
	}
	return best
}

// cloneInto makes the extractor's root a copy of the tree at src that
// shares its files: directories are made anew, everything else is
// hardlinked. That is safe because a stored rootfs is never written to and
// the extractor never changes an inode it did not create: it replaces
// files, it does not write into them. Directory modes and times are put
// back by finish, after the new layers are in.
func (e *extractor) cloneInto(src string) error {
	sfd, err := unix.Open(src, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("base image: %w", err)
	}
	defer unix.Close(sfd)
	dfd, err := unix.Openat(e.rootFd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	if err := e.linkTree(sfd, dfd, "", true, e.cloneStep); err != nil {
		return fmt.Errorf("copy base image: %w", err)
	}
	return nil
}

// dirStep finishes a directory a linked copy made (csfd the source's,
// cdfd the copy's, already owned and with their xattrs): it goes on
// into its children, through linkTree, and sets what the copy needs.
type dirStep func(csfd, cdfd int, crel string, st *unix.Stat_t) error

// linkTree copies the tree under sfd into dfd: directories made anew
// (owner and xattrs copied, then step), everything else hardlinked. With
// writable, a directory gets its mode, kept writable (|0700) for the
// layers to come, before its xattrs (an ACL among them then has the last
// word, as when it was extracted).
func (e *extractor) linkTree(sfd, dfd int, rel string, writable bool, step dirStep) error {
	names, err := fdtree.DirNames(sfd)
	if err != nil {
		return err
	}
	for _, n := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(sfd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
		crel := path.Join(rel, n)
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			if err := unix.Linkat(sfd, n, dfd, n, 0); err != nil {
				return fmt.Errorf("link %s: %w", crel, err)
			}
			continue
		}
		if err := unix.Mkdirat(dfd, n, 0o700); err != nil {
			return fmt.Errorf("mkdir %s: %w", crel, err)
		}
		if err := e.linkSubdir(sfd, dfd, n, crel, &st, writable, step); err != nil {
			return err
		}
	}
	return nil
}

func (e *extractor) linkSubdir(sfd, dfd int, n, crel string, st *unix.Stat_t, writable bool, step dirStep) error {
	csfd, err := unix.Openat(sfd, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(csfd)
	cdfd, err := unix.Openat(dfd, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(cdfd)
	if e.euid == 0 {
		if err := unix.Fchown(cdfd, int(st.Uid), int(st.Gid)); err != nil && !errors.Is(err, unix.EINVAL) {
			return err
		}
	}
	if writable {
		if err := unix.Fchmod(cdfd, st.Mode&0o7777|0o700); err != nil {
			return err
		}
	}
	if err := fdtree.CopyXattrs(csfd, cdfd); err != nil {
		return fmt.Errorf("xattrs of %s: %w", crel, err)
	}
	return step(csfd, cdfd, crel, st)
}

// cloneStep records a cloned directory's own metadata, which finish puts
// back once the layers to come are in.
func (e *extractor) cloneStep(csfd, cdfd int, crel string, st *unix.Stat_t) error {
	e.dirMeta[crel] = dirMeta{
		mode:  st.Mode & 0o7777,
		atime: timespecTime(st.Atim),
		mtime: timespecTime(st.Mtim),
	}
	return e.linkTree(csfd, cdfd, crel, true, e.cloneStep)
}

// snapshot makes dst (a new directory) a copy of the extractor's root as
// it stands between two layers, sharing its files as cloneInto does:
// directories are made anew, everything else is hardlinked. The copy gets
// the directory modes and times the layers so far gave (the root's own are
// still the writable ones finish has not put back yet). Sharing is safe for
// the reason cloneInto gives: the extractor replaces files, never writes
// into them, so the layers it applies after this never reach the copy.
func (e *extractor) snapshot(dst string) error {
	if err := os.Mkdir(dst, 0o755); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	sfd, err := unix.Openat(e.rootFd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(sfd)
	dfd, err := unix.Open(dst, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	defer unix.Close(dfd)
	if err := e.linkTree(sfd, dfd, "", false, e.snapshotStep); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	return nil
}

// snapshotStep copies one directory's children first: its final mode
// (perhaps 0555) and times go on last, once nothing more is written in it.
func (e *extractor) snapshotStep(csfd, cdfd int, crel string, st *unix.Stat_t) error {
	if err := e.linkTree(csfd, cdfd, crel, false, e.snapshotStep); err != nil {
		return err
	}
	m, ok := e.dirMeta[crel]
	if !ok { // made as a parent of an entry, with no entry of its own
		m = dirMeta{mode: st.Mode & 0o7777, atime: timespecTime(st.Atim), mtime: timespecTime(st.Mtim)}
	}
	if err := unix.Fchmod(cdfd, m.mode); err != nil {
		return fmt.Errorf("chmod %s: %w", crel, err)
	}
	ts := []unix.Timespec{toTimespec(m.atime), toTimespec(m.mtime)}
	if err := unix.UtimesNanoAt(cdfd, "", ts, unix.AT_EMPTY_PATH); err != nil {
		return fmt.Errorf("set times %s: %w", crel, err)
	}
	return nil
}
