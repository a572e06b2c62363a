package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cove-sh/cove/internal/atomicfile"
	"github.com/cove-sh/cove/internal/userns"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"
)

// Store is the on-disk image cache: compressed blobs by digest, flattened
// root filesystems by manifest digest, and the names that point at them.
//
//	DIR/blobs/sha256/HEX         verified compressed layer blobs
//	DIR/blobs/tmp/               downloads in flight
//	DIR/images/HEX/rootfs        a flattened image, never changed once there
//	DIR/images/HEX/image.json    what we know of it (Image)
//	DIR/images/HEX/config.json   the image's config blob
//	DIR/images/.tmp-HEX-*        flattening in progress (removed if abandoned)
//	DIR/chains/NAME/             the rootfs after some of an image's layers (snapshot.go)
//	DIR/refs.json                name → manifest digest
//	DIR/uses/                    what containers use which image (Use)
//	DIR/locks/                   flock files
//
// The directory is 0700: a rootfs may hold setuid binaries
// (CVE-2021-41091). A Store holds no open files and is safe for concurrent
// use by many processes; the lock files order them.
type Store struct {
	dir     string
	mirrors Mirrors // SetMirrors
}

// Image is a flattened image in a Store.
type Image struct {
	Digest v1.Hash   `json:"digest"` // manifest digest
	Config v1.Hash   `json:"config"`
	Layers []v1.Hash `json:"layers"` // compressed blob digests, base first
	// Sizes are the layers' compressed sizes, as the manifest gave them
	// (for a build on this image to name them; empty in images stored
	// before cove kept them).
	Sizes    []int64   `json:"sizes,omitempty"`
	DiffIDs  []v1.Hash `json:"diff_ids"`
	Platform string    `json:"platform,omitempty"`
	Created  time.Time `json:"created"` // from the image config
	Pulled   time.Time `json:"pulled"`
	Size     int64     `json:"size"`           // bytes of file data in the rootfs
	Base     string    `json:"base,omitempty"` // digest of the stored image it was copied from, sharing its files
	// BaseChain is the chain ID of the snapshot it was copied from instead
	// (an image sharing only its first layers with a stored one).
	BaseChain string `json:"base_chain,omitempty"`
	Stats     Stats  `json:"stats"`
	// Owners says how the files got their owners (userns.IDMap.String):
	// "root" as the image says, "subids …" mapped through that user's
	// subordinate ids, "user" all the user's; "" in images stored before
	// cove said (see OwnersMode).
	Owners string `json:"owners,omitempty"`

	// RootFS is the flattened root filesystem's path. Treat it as read-only.
	RootFS string `json:"-"`
}

// ErrNotFound is returned for an image the store does not have.
var ErrNotFound = errors.New("image not known")

// Open opens (creating if needed) the store in dir.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("image store %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("image store %s: %w", dir, err)
	}
	for _, sub := range []string{"blobs/sha256", "blobs/tmp", "images", "chains", "locks", "uses"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return nil, fmt.Errorf("image store %s: %w", dir, err)
		}
	}
	if err := unix.Access(dir, unix.W_OK); err != nil {
		return nil, fmt.Errorf("image store %s is not writable: %w", dir, err)
	}
	return &Store{dir: dir}, nil
}

// Dir returns the directory the store lives in.
func (s *Store) Dir() string { return s.dir }

func (s *Store) blobPath(h v1.Hash) string {
	return filepath.Join(s.dir, "blobs", h.Algorithm, h.Hex)
}

func (s *Store) imageDir(h v1.Hash) string {
	return filepath.Join(s.dir, "images", h.Hex)
}

// fileLock is a held flock on a file in the store's locks directory.
type fileLock struct{ f *os.File }

// Unlock releases the lock.
func (l *fileLock) Unlock() { l.f.Close() }

// tryExclusive turns a shared lock into an exclusive one if no one else
// holds it, without waiting.
func (l *fileLock) tryExclusive() bool {
	return unix.Flock(int(l.f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil
}

// lock takes an exclusive flock on a named lock file, waiting until it is
// free or ctx is done.
func (s *Store) lock(ctx context.Context, name string) (*fileLock, error) {
	return s.lockMode(ctx, name, unix.LOCK_EX, true)
}

// sharedLock is lock for many holders at once: pulls share the "pulls"
// lock, and Prune takes it alone so that it never deletes what a pull is
// about to use or has not named yet.
func (s *Store) sharedLock(ctx context.Context, name string) (*fileLock, error) {
	return s.lockMode(ctx, name, unix.LOCK_SH, true)
}

func (s *Store) tryLock(name string) (*fileLock, bool) {
	l, err := s.lockMode(context.Background(), name, unix.LOCK_EX, false)
	return l, err == nil
}

func (s *Store) lockMode(ctx context.Context, name string, how int, wait bool) (*fileLock, error) {
	f, err := os.OpenFile(filepath.Join(s.dir, "locks", name+".lock"), os.O_CREATE|os.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	for {
		err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB)
		if err == nil {
			return &fileLock{f}, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) || !wait {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// byDigest returns the flattened image with manifest digest h.
func (s *Store) byDigest(h v1.Hash) (*Image, error) {
	dir := s.imageDir(h)
	b, err := os.ReadFile(filepath.Join(dir, "image.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", h, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	var img Image
	if err := json.Unmarshal(b, &img); err != nil {
		return nil, fmt.Errorf("%s: broken image record: %w", dir, err)
	}
	img.RootFS = filepath.Join(dir, "rootfs")
	return &img, nil
}

// Get returns the image that name (a reference as given to Pull, a full
// manifest digest, or an unambiguous prefix of its hex) stands for.
func (s *Store) Get(name string) (*Image, error) {
	refs, err := s.refs()
	if err != nil {
		return nil, err
	}
	if src, err := ParseReference(name); err == nil {
		if d, ok := refs[src.String()]; ok {
			h, err := v1.NewHash(d)
			if err != nil {
				return nil, err
			}
			return s.byDigest(h)
		}
	}
	hexPart := strings.TrimPrefix(name, "sha256:")
	if len(hexPart) >= 4 && strings.Trim(hexPart, "0123456789abcdef") == "" {
		entries, err := os.ReadDir(filepath.Join(s.dir, "images"))
		if err != nil {
			return nil, err
		}
		var found []string
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), hexPart) {
				found = append(found, e.Name())
			}
		}
		if len(found) > 1 {
			return nil, fmt.Errorf("%q matches %d images: give more of the digest", name, len(found))
		}
		if len(found) == 1 {
			return s.byDigest(v1.Hash{Algorithm: "sha256", Hex: found[0]})
		}
	}
	return nil, fmt.Errorf("%s: %w (pull it first with: cove pull %s)", name, ErrNotFound, name)
}

// ConfigFile returns the image's config (Env, Cmd, WorkingDir, User…).
func (s *Store) ConfigFile(img *Image) (*v1.ConfigFile, error) {
	f, err := os.Open(filepath.Join(s.imageDir(img.Digest), "config.json"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return v1.ParseConfigFile(f)
}

// Entry is one name in the store and the image it points at.
type Entry struct {
	Ref   string // "" for an image no name points at
	Image *Image
}

// List returns every named image, and images with no name, sorted by name.
func (s *Store) List() ([]Entry, error) {
	refs, err := s.refs()
	if err != nil {
		return nil, err
	}
	named := map[string]bool{}
	var out []Entry
	for ref, d := range refs {
		h, err := v1.NewHash(d)
		if err != nil {
			continue
		}
		img, err := s.byDigest(h)
		if err != nil {
			continue
		}
		named[h.Hex] = true
		out = append(out, Entry{Ref: ref, Image: img})
	}
	dirs, err := os.ReadDir(filepath.Join(s.dir, "images"))
	if err != nil {
		return nil, err
	}
	for _, d := range dirs {
		if strings.HasPrefix(d.Name(), ".") || named[d.Name()] {
			continue
		}
		if img, err := s.byDigest(v1.Hash{Algorithm: "sha256", Hex: d.Name()}); err == nil {
			out = append(out, Entry{Image: img})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Ref != out[j].Ref {
			return out[i].Ref < out[j].Ref
		}
		return out[i].Image.Digest.Hex < out[j].Image.Digest.Hex
	})
	return out, nil
}

// refs reads the name index. A missing index is an empty one.
func (s *Store) refs() (map[string]string, error) {
	b, err := os.ReadFile(filepath.Join(s.dir, "refs.json"))
	if errors.Is(err, os.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, err
	}
	refs := map[string]string{}
	if err := json.Unmarshal(b, &refs); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(s.dir, "refs.json"), err)
	}
	return refs, nil
}

// updateRefs changes the name index under its lock and replaces it
// atomically.
func (s *Store) updateRefs(ctx context.Context, change func(map[string]string)) error {
	l, err := s.lock(ctx, "refs")
	if err != nil {
		return err
	}
	defer l.Unlock()
	refs, err := s.refs()
	if err != nil {
		return err
	}
	change(refs)
	b, err := json.MarshalIndent(refs, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(s.dir, "refs.json"), b)
}

// Remove drops the name ref (or, for a digest, every name of that image)
// and then the flattened image if nothing else holds it: no other name
// points at it and no container uses it (Use). A name is a reference
// like any other, as containerd counts them: removing one never takes
// what another still holds. Blobs stay until Prune.
func (s *Store) Remove(ctx context.Context, ref string) (*Image, error) {
	img, err := s.Get(ref)
	if err != nil {
		return nil, err
	}
	key := ""
	if src, err := ParseReference(ref); err == nil {
		key = src.String()
	}
	digest := img.Digest.String()
	err = s.updateRefs(ctx, func(refs map[string]string) {
		if d, named := refs[key]; named && d == digest {
			delete(refs, key) // this name only
			return
		}
		for r, d := range refs { // a digest: every name of it
			if d == digest {
				delete(refs, r)
			}
		}
	})
	if err != nil {
		return nil, err
	}
	_, err = s.collect(ctx, img.Digest)
	return img, err
}

// collect deletes the image h if nothing references it: no name, no
// live use. It holds the pulls lock alone (as Prune does), so that no
// pull names the image between the look and the removal, and the image's
// lock, so that no Use starts meanwhile. It says whether it deleted.
func (s *Store) collect(ctx context.Context, h v1.Hash) (bool, error) {
	pulls, err := s.lock(ctx, "pulls")
	if err != nil {
		return false, err
	}
	defer pulls.Unlock()
	removed, err := s.collectLocked(ctx, h)
	if err == nil && removed {
		// Snapshots only it had below its layers go with it.
		_, err = s.dropSnapshots(ctx)
	}
	return removed, err
}

func (s *Store) collectLocked(ctx context.Context, h v1.Hash) (bool, error) {
	l, err := s.lock(ctx, "image-"+h.Hex)
	if err != nil {
		return false, err
	}
	defer l.Unlock()
	refs, err := s.refs()
	if err != nil {
		return false, err
	}
	for _, d := range refs {
		if d == h.String() {
			return false, nil
		}
	}
	used, err := s.used()
	if err != nil {
		return false, err
	}
	if used[h.Hex] {
		return false, nil
	}
	return true, s.removeImageLocked(ctx, h)
}

// use is a record in DIR/uses: the image a holder uses, and the holder's
// path, which exists as long as the use lasts (a container's state
// directory). A record whose holder is gone (the container removed by a
// cove that crashed before it said so) holds nothing.
type use struct {
	Digest string `json:"digest"`
	Holder string `json:"holder"`
}

func (s *Store) usePath(holder string) string {
	sum := sha256.Sum256([]byte(holder))
	return filepath.Join(s.dir, "uses", hex.EncodeToString(sum[:16]))
}

// Use records that holder (the absolute path of what uses the image, e.g.
// a container's state directory, existing as long as the use lasts) uses
// the image h, replacing what holder used before. Until Release, or until
// holder's path is gone, neither Remove nor Prune deletes the image; its
// names may go. It returns ErrNotFound if the image is gone already (pull
// it again).
func (s *Store) Use(ctx context.Context, h v1.Hash, holder string) error {
	if !filepath.IsAbs(holder) {
		return fmt.Errorf("image use by %q: the holder must be an absolute path", holder)
	}
	l, err := s.lock(ctx, "image-"+h.Hex)
	if err != nil {
		return err
	}
	defer l.Unlock()
	if _, err := s.byDigest(h); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(s.dir, "uses"), 0o700); err != nil {
		return fmt.Errorf("image store %s: %w", s.dir, err)
	}
	b, err := json.Marshal(use{Digest: h.String(), Holder: holder})
	if err != nil {
		return err
	}
	// Under the uses lock: a record is never written while used drops
	// it as dead (its holder made again meanwhile).
	ul, err := s.lock(ctx, "uses")
	if err != nil {
		return err
	}
	defer ul.Unlock()
	if outlivesReboot(holder) {
		return atomicfile.WriteFile(s.usePath(holder), b)
	}
	// Its holder is gone after a restart, and its record with it: no
	// sync (two of them on every start otherwise). A crash may leave
	// the record empty; used takes such a one for dead.
	return atomicfile.WriteVolatile(s.usePath(holder), b)
}

// outlivesReboot says whether holder could still be there after the
// machine restarts: not a process's descriptor under /proc (a launch's pin
// on its image), not a directory on a file system in memory (a
// container's state directory under /run). When in doubt, yes.
func outlivesReboot(holder string) bool {
	if strings.HasPrefix(holder, "/proc/") {
		return false // statfs would follow the descriptor to its file
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(holder, &fs); err != nil {
		return true
	}
	switch fs.Type {
	case unix.PROC_SUPER_MAGIC, unix.TMPFS_MAGIC, unix.RAMFS_MAGIC:
		return false
	}
	return true
}

// torn says whether a use record is one a crash cut short: written without
// a sync (outlivesReboot) and found empty or zeroed after the restart. A
// synced record is whole; a record is renamed into place only once written.
func torn(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// Release ends holder's use (Use); the image stays until Prune, or until
// a Remove of its last name, finds nothing else holding it.
func (s *Store) Release(holder string) error {
	if err := os.Remove(s.usePath(holder)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("image store %s: release %s: %w", s.dir, holder, err)
	}
	return nil
}

// used returns the hex digests of the images live uses hold; records
// whose holder is gone are dropped.
func (s *Store) used() (map[string]bool, error) {
	dir := filepath.Join(s.dir, "uses")
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]bool{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	var dead []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue // being written
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if errors.Is(err, os.ErrNotExist) {
			continue // released meanwhile
		}
		if err != nil {
			return nil, err
		}
		if torn(b) {
			dead = append(dead, e.Name()) // its holder went with the crash
			continue
		}
		var u use
		if err := json.Unmarshal(b, &u); err != nil {
			return nil, fmt.Errorf("%s: broken use record: %w", filepath.Join(dir, e.Name()), err)
		}
		if _, err := os.Lstat(u.Holder); errors.Is(err, os.ErrNotExist) {
			dead = append(dead, e.Name())
			continue
		}
		h, err := v1.NewHash(u.Digest)
		if err != nil {
			return nil, fmt.Errorf("%s: broken use record: %w", filepath.Join(dir, e.Name()), err)
		}
		out[h.Hex] = true
	}
	if len(dead) > 0 {
		s.dropDead(dir, dead)
	}
	return out, nil
}

// dropDead removes the use records names whose holders are gone, under
// the uses lock and looking again: a holder made anew since (a container
// of the same name) has written its record over the dead one.
func (s *Store) dropDead(dir string, names []string) {
	ul, err := s.lock(context.Background(), "uses")
	if err != nil {
		return
	}
	defer ul.Unlock()
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			continue
		}
		if torn(b) {
			os.Remove(filepath.Join(dir, n))
			continue
		}
		var u use
		if json.Unmarshal(b, &u) != nil {
			continue
		}
		if _, err := os.Lstat(u.Holder); errors.Is(err, os.ErrNotExist) {
			os.Remove(filepath.Join(dir, n))
		}
	}
}

// InUse says whether a live use (Use) holds the image h.
func (s *Store) InUse(h v1.Hash) (bool, error) {
	used, err := s.used()
	return used[h.Hex], err
}

// removeImage renames the image out of view first, so that no reader sees
// a half-deleted rootfs under its final name.
// The caller holds the image's lock.
func (s *Store) removeImageLocked(ctx context.Context, h v1.Hash) error {
	trash := filepath.Join(s.dir, "images", ".tmp-"+h.Hex+"-rm")
	if err := os.Rename(s.imageDir(h), trash); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	return userns.RemoveAll(ctx, trash)
}

// PruneReport says what Prune removed.
type PruneReport struct {
	Images int // flattened images no name pointed at and nothing used
	// Snapshots are snapshots of layers no stored image has (snapshot.go).
	Snapshots int
	Blobs     int   // blobs no image used
	Bytes     int64 // bytes of blobs and temporary files freed
}

// Prune removes images no name points at and no container uses, and the blobs and temporary
// files that failed or overlapping pulls left behind. It waits for pulls in progress: they hold the
// "pulls" lock shared until their image is named, and Prune takes it alone.
func (s *Store) Prune(ctx context.Context) (PruneReport, error) {
	var rep PruneReport
	pulls, err := s.lock(ctx, "pulls")
	if err != nil {
		return rep, err
	}
	defer pulls.Unlock()
	refs, err := s.refs()
	if err != nil {
		return rep, err
	}
	named := map[string]bool{}
	for _, d := range refs {
		named[strings.TrimPrefix(d, "sha256:")] = true
	}
	imagesDir := filepath.Join(s.dir, "images")
	dirs, err := os.ReadDir(imagesDir)
	if err != nil {
		return rep, err
	}
	for _, d := range dirs {
		name := d.Name()
		if rest, ok := strings.CutPrefix(name, ".tmp-"); ok {
			// Left by a killed pull, or an rmi in progress (which holds
			// the image's lock).
			hexPart, _, _ := strings.Cut(rest, "-")
			if l, ok := s.tryLock("image-" + hexPart); ok {
				err := userns.RemoveAll(ctx, filepath.Join(imagesDir, name))
				l.Unlock()
				if err != nil {
					return rep, err
				}
			}
			continue
		}
		if !named[name] {
			removed, err := s.collectLocked(ctx, v1.Hash{Algorithm: "sha256", Hex: name})
			if err != nil {
				return rep, err
			}
			if removed {
				rep.Images++
			}
		}
	}
	n, err := s.dropSnapshots(ctx)
	rep.Snapshots = n
	if err != nil {
		return rep, err
	}
	// A stored image needs no blobs: its layers are in its rootfs. The
	// blobs left are from pulls that failed or overlapped with others.
	blobDir := filepath.Join(s.dir, "blobs", "sha256")
	blobs, err := os.ReadDir(blobDir)
	if err != nil {
		return rep, err
	}
	for _, b := range blobs {
		if info, err := b.Info(); err == nil {
			rep.Bytes += info.Size()
		}
		if err := os.Remove(filepath.Join(blobDir, b.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			return rep, err
		}
		rep.Blobs++
	}
	tmpDir := filepath.Join(s.dir, "blobs", "tmp")
	tmps, _ := os.ReadDir(tmpDir)
	for _, t := range tmps {
		if info, err := t.Info(); err == nil {
			rep.Bytes += info.Size()
		}
		os.RemoveAll(filepath.Join(tmpDir, t.Name()))
	}
	return rep, nil
}
