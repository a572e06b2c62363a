package image

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"
)

// checkStore asserts the store's invariants: every name points at an
// image that is there whole (its rootfs has its files), and every image a
// live use holds is there.
func checkStore(t *testing.T, s *Store, step string) {
	t.Helper()
	refs, err := s.refs()
	must(t, err)
	for r, d := range refs {
		h, err := v1.NewHash(d)
		must(t, err)
		img, err := s.byDigest(h)
		if err != nil {
			t.Fatalf("%s: the name %s points at %s, which is gone: %v", step, r, d, err)
		}
		if _, err := os.Stat(filepath.Join(img.RootFS, "bin/busybox")); err != nil {
			t.Fatalf("%s: the name %s: its rootfs lost its files: %v", step, r, err)
		}
	}
	used, err := s.used()
	must(t, err)
	for hexd := range used {
		img, err := s.byDigest(v1.Hash{Algorithm: "sha256", Hex: hexd})
		if err != nil {
			t.Fatalf("%s: an image in use is gone: %v", step, err)
		}
		if _, err := os.Stat(filepath.Join(img.RootFS, "bin/busybox")); err != nil {
			t.Fatalf("%s: an image in use lost its files: %v", step, err)
		}
	}
}

// A name is one reference among others: removing names, many at once,
// never removes an image another name or a container (running or
// stopped) still holds; once nothing holds it, it goes.
func TestRemoveKeepsWhatIsReferenced(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx := context.Background()
	img := busybox(t)
	const n = 16
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("tag%d:1", i))
	}
	for _, r := range names {
		_, err := s.Import(ctx, img, r)
		must(t, err)
	}
	digest, err := img.Digest()
	must(t, err)
	checkStore(t, s, "imported")

	// Removing one name leaves the others (the old code dropped them all).
	_, err = s.Remove(ctx, names[0])
	must(t, err)
	checkStore(t, s, "rmi of one name")
	for _, r := range names[1:] {
		if _, err := s.Get(r); err != nil {
			t.Fatalf("rmi %s took %s with it: %v", names[0], r, err)
		}
	}

	// A container uses the image (its state directory holds the use).
	holder := filepath.Join(t.TempDir(), "ctr")
	must(t, os.Mkdir(holder, 0o700))
	must(t, s.Use(ctx, digest, holder))

	// Every other name removed at once, from many goroutines.
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for _, r := range names[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Remove(ctx, r); err != nil {
				errs <- fmt.Errorf("rmi %s: %w", r, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	checkStore(t, s, "concurrent rmi")
	kept, err := s.byDigest(digest)
	if err != nil {
		t.Fatalf("the last rmi removed the image a container uses: %v", err)
	}
	if _, err := os.Stat(filepath.Join(kept.RootFS, "bin/busybox")); err != nil {
		t.Fatalf("the container's rootfs lost its files: %v", err)
	}
	if _, err := s.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	checkStore(t, s, "prune while in use")
	if _, err := s.byDigest(digest); err != nil {
		t.Fatalf("prune removed the image a container uses: %v", err)
	}
	// Pulling a name for it again while in use, then the use ends: the
	// name holds it.
	_, err = s.Import(ctx, img, "again:1")
	must(t, err)
	must(t, s.Release(holder))
	if _, err := s.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	checkStore(t, s, "released, named")
	_, err = s.Remove(ctx, "again:1")
	must(t, err)
	checkStore(t, s, "last name removed")
	if _, err := s.byDigest(digest); err == nil {
		t.Fatal("the image outlived its last name and its last use")
	}

	// A use whose holder is gone (a container removed by a cove that
	// crashed before releasing) holds nothing: prune takes the image.
	_, err = s.Import(ctx, img, "crash:1")
	must(t, err)
	must(t, s.Use(ctx, digest, holder))
	_, err = s.Remove(ctx, "crash:1")
	must(t, err)
	checkStore(t, s, "rmi under a use")
	if _, err := s.byDigest(digest); err != nil {
		t.Fatalf("rmi removed an image in use: %v", err)
	}
	must(t, os.Remove(holder))
	rep, err := s.Prune(ctx)
	must(t, err)
	if rep.Images != 1 {
		t.Fatalf("prune removed %d images, want the one its holder left", rep.Images)
	}
	if _, err := s.byDigest(digest); err == nil {
		t.Fatal("prune kept an image nothing references")
	}
	checkStore(t, s, "pruned")
	if err := s.Use(ctx, digest, holder); err == nil {
		t.Fatal("Use of a removed image succeeded")
	}
}

// A use whose holder cannot outlive a restart (a launch's pin, a
// container's state directory under /run) is written without a sync; a
// crash may leave its record empty or zeroed, which then holds nothing:
// prune goes on and takes the image, where a broken record of another
// kind still stops it.
func TestUseInMemoryAndTornRecords(t *testing.T) {
	t.Parallel()
	mem := t.TempDir()
	if os.Geteuid() == 0 {
		must(t, unix.Mount("tmpfs", mem, "tmpfs", 0, "size=1m"))
		t.Cleanup(func() { unix.Unmount(mem, unix.MNT_DETACH) })
	} else if mem = "/dev/shm"; !isTmpfs(mem) {
		t.Skip("no tmpfs to try (not root, and /dev/shm is not one)")
	}
	disk := t.TempDir()
	if isTmpfs(disk) {
		t.Skip("the test's temporary directory is in memory too (TMPDIR on a tmpfs)")
	}
	// A launch's pin: its descriptor, here of a file on the disk, which
	// statfs would follow.
	f, err := os.Create(filepath.Join(disk, "pinned"))
	must(t, err)
	defer f.Close()
	for _, c := range []struct {
		holder  string
		durable bool
	}{
		{fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), f.Fd()), false},
		{mem, false},
		{disk, true},
		{filepath.Join(disk, "not-yet"), true}, // when in doubt, synced
	} {
		if got := outlivesReboot(c.holder); got != c.durable {
			t.Errorf("outlivesReboot(%s) = %v, want %v", c.holder, got, c.durable)
		}
	}

	s := openStore(t)
	ctx := context.Background()
	_, err = s.Import(ctx, busybox(t), "torn:1")
	must(t, err)
	img, err := s.Get("torn:1")
	must(t, err)
	holder, err := os.MkdirTemp(mem, "ctr-")
	must(t, err)
	defer os.Remove(holder)
	must(t, s.Use(ctx, img.Digest, holder))
	_, err = s.Remove(ctx, "torn:1")
	must(t, err)
	if _, err := s.byDigest(img.Digest); err != nil {
		t.Fatalf("rmi removed an image a holder in memory uses: %v", err)
	}
	// The crash: the record cut short, its holder gone with /run.
	rec := s.usePath(holder)
	must(t, os.WriteFile(rec, nil, 0o600))
	must(t, os.WriteFile(filepath.Join(filepath.Dir(rec), "zeroed"), make([]byte, 90), 0o600))
	must(t, os.Remove(holder))
	rep, err := s.Prune(ctx)
	if err != nil {
		t.Fatalf("prune after a crash stopped at a torn use record: %v", err)
	}
	if rep.Images != 1 {
		t.Fatalf("prune removed %d images, want the one only torn records named", rep.Images)
	}
	left, err := os.ReadDir(filepath.Dir(rec))
	must(t, err)
	if len(left) != 0 {
		t.Fatalf("torn use records were kept: %v", left)
	}
	// A record that is neither whole nor torn is no crash's: an error that names it.
	must(t, os.WriteFile(rec, []byte(`{"digest":`), 0o600))
	_, err = s.Import(ctx, busybox(t), "torn:1")
	must(t, err)
	_, err = s.Remove(ctx, "torn:1")
	if err == nil || !strings.Contains(err.Error(), "broken use record") {
		t.Fatalf("rmi with a broken use record: %v, want an error naming it", err)
	}
}

func isTmpfs(dir string) bool {
	var fs unix.Statfs_t
	return unix.Statfs(dir, &fs) == nil && fs.Type == unix.TMPFS_MAGIC
}
