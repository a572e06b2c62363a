package image

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
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
