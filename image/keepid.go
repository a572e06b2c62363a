package image

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/cove-sh/cove/internal/fdtree"
	"github.com/cove-sh/cove/internal/userns"
	"golang.org/x/sys/unix"
)

// A rootless container with keep-id (a workspace's non-root user U) maps
// the user to U and root to the first subordinate id, the others around
// it (container.Spec.KeepID). A rootfs whose owners were kept through the
// usual mapping (0 the user, N the range's N) would show there with root's
// files as U's and U's files as U-1's. So, as podman does for keep-id, such
// a container gets a copy of the rootfs with its owners moved for that
// mapping, made once per image and (U, G) beside the image's rootfs:
//
//	DIR/images/HEX/keep-id-U-G    the copy
//	DIR/images/HEX/.tmp-keep-id-* a copy in progress

// KeepIDTask is the helper's task name for that copy: CopyKeepID.
const KeepIDTask = "keep-id-copy"

// OwnersAt returns how the stored rootfs at rootfs got its owners
// (Image.OwnersMode), from the image's record beside it; "" when rootfs
// is not a stored image's.
func OwnersAt(rootfs string) string {
	b, err := os.ReadFile(filepath.Join(filepath.Dir(rootfs), "image.json"))
	if err != nil {
		return ""
	}
	var img Image
	if json.Unmarshal(b, &img) != nil {
		return ""
	}
	return img.OwnersMode()
}

// KeepIDRootFS returns the root filesystem a rootless keep-id container
// of img, whose user is uid:gid inside, runs on: img's own when its files
// are all the user's anyway (stored without subordinate ids), else the
// copy described above, made now if it is not there yet.
func (s *Store) KeepIDRootFS(ctx context.Context, img *Image, uid, gid int) (string, error) {
	m := userns.Current()
	if !m.Helps() || !strings.HasPrefix(img.OwnersMode(), "subids ") {
		return img.RootFS, nil
	}
	if uid <= 0 || gid <= 0 || uid >= m.UIDSub.Count || gid >= m.GIDSub.Count {
		return "", fmt.Errorf("keep-id %d:%d: outside your subordinate range (%d ids)", uid, gid, min(m.UIDSub.Count, m.GIDSub.Count))
	}
	dir := filepath.Dir(img.RootFS)
	final := filepath.Join(dir, fmt.Sprintf("keep-id-%d-%d", uid, gid))
	if _, err := os.Lstat(final); err == nil {
		return final, nil
	}
	l, err := s.lock(ctx, "image-"+img.Digest.Hex)
	if err != nil {
		return "", err
	}
	defer l.Unlock()
	if _, err := os.Lstat(final); err == nil {
		return final, nil
	}
	stale, _ := filepath.Glob(filepath.Join(dir, ".tmp-keep-id-*"))
	for _, d := range stale {
		if err := userns.RemoveAll(ctx, d); err != nil {
			return "", err
		}
	}
	tmp, err := os.MkdirTemp(dir, ".tmp-keep-id-")
	if err != nil {
		return "", explainDiskError(err, s.dir)
	}
	if _, err := userns.Run(ctx, m, KeepIDTask, img.RootFS, tmp, strconv.Itoa(uid), strconv.Itoa(gid)); err != nil {
		userns.RemoveAll(ctx, tmp)
		return "", fmt.Errorf("copy the image for keep-id %d:%d: %w", uid, gid, explainDiskError(err, s.dir))
	}
	if err := os.Rename(tmp, final); err != nil {
		userns.RemoveAll(ctx, tmp)
		return "", err
	}
	return final, nil
}

// keepIDOwner is where an owner id of the usual mapping goes in the
// keep-id copy, as both are seen in the helper's namespace (the usual
// mapping): the namespace's id that keep-id shows as id inside.
func keepIDOwner(id, keep int) int {
	switch {
	case id == keep:
		return 0
	case id < keep:
		return id + 1
	}
	return id
}

// CopyKeepID is the helper's task (KeepIDTask): args are the rootfs, the
// new directory (empty) and the keep-id uid and gid. Files are copied
// (their owners differ, so they cannot be links to the rootfs's), links
// within the tree stay links, and modes, times and xattrs are kept.
func CopyKeepID(args []string, _ io.Reader, _ io.Writer) error {
	if len(args) != 4 {
		return fmt.Errorf("%s: want SRC DST UID GID, got %q", KeepIDTask, args)
	}
	src, dst := args[0], args[1]
	uid, err1 := strconv.Atoi(args[2])
	gid, err2 := strconv.Atoi(args[3])
	if err1 != nil || err2 != nil {
		return fmt.Errorf("%s: bad ids %q", KeepIDTask, args[2:])
	}
	links := map[[2]uint64]string{}
	type dirTimes struct {
		path string
		ts   []unix.Timespec
	}
	var dirs []dirTimes
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		ts := []unix.Timespec{st.Atim, st.Mtim}
		owner := func() error {
			return unix.Lchown(out, keepIDOwner(int(st.Uid), uid), keepIDOwner(int(st.Gid), gid))
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			if rel != "." {
				if err := unix.Mkdir(out, 0o700); err != nil {
					return err
				}
			}
			if err := owner(); err != nil {
				return err
			}
			if err := unix.Chmod(out, st.Mode&0o7777); err != nil {
				return err
			}
			dirs = append(dirs, dirTimes{out, ts})
			return copyXattrsAt(p, out)
		case unix.S_IFREG:
			key := [2]uint64{st.Dev, st.Ino}
			if first, ok := links[key]; ok && st.Nlink > 1 {
				return unix.Link(first, out)
			}
			links[key] = out
			if err := copyFile(p, out); err != nil {
				return err
			}
		case unix.S_IFLNK:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if err := unix.Symlink(target, out); err != nil {
				return err
			}
			if err := owner(); err != nil {
				return err
			}
			return unix.UtimesNanoAt(unix.AT_FDCWD, out, ts, unix.AT_SYMLINK_NOFOLLOW)
		case unix.S_IFIFO:
			if err := unix.Mkfifo(out, 0o600); err != nil {
				return err
			}
		default:
			return nil // devices: a rootless store has none
		}
		if err := owner(); err != nil {
			return err
		}
		// chmod after chown (which clears setuid); out is ours, just made,
		// not a symlink.
		if err := unix.Chmod(out, st.Mode&0o7777); err != nil {
			return err
		}
		if err := copyXattrsAt(p, out); err != nil {
			return err
		}
		return unix.UtimesNanoAt(unix.AT_FDCWD, out, ts, unix.AT_SYMLINK_NOFOLLOW)
	})
	if err != nil {
		return err
	}
	// Children change their directory's times: set them last, deepest first.
	for _, d := range slices.Backward(dirs) {
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, d.path, d.ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
	}
	return nil
}

// copyFile copies a regular file's bytes: a reflink where the file system
// has them, else copy_file_range (through io.Copy).
func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	if unix.IoctlFileClone(int(out.Fd()), int(in.Fd())) != nil {
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
	}
	return out.Close()
}

func copyXattrsAt(from, to string) error {
	src, err := unix.Open(from, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil
		}
		return err
	}
	defer unix.Close(src)
	dst, err := unix.Open(to, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer unix.Close(dst)
	return fdtree.CopyXattrs(src, dst)
}
