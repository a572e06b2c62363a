package image

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cove-sh/cove/internal/testimage"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"
)

func withSnapshotMin(n int64) Option {
	return func(o *options) error { o.snapshotMin = n; return nil }
}

func siblings(t *testing.T) (a, b v1.Image) {
	t.Helper()
	a, b, err := testimage.Siblings()
	must(t, err)
	return a, b
}

// describeWithDirTimes is describeTree with each directory's mtime, which
// a snapshot must carry as the layers gave it.
func describeWithDirTimes(t *testing.T, root string) map[string]string {
	t.Helper()
	out := describeTree(t, root)
	for p, d := range out {
		if strings.HasPrefix(d, "d") {
			fi, err := os.Lstat(filepath.Join(root, p))
			must(t, err)
			out[p] = d + " " + fi.ModTime().UTC().String()
		}
	}
	return out
}

func sameTree(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	for _, p := range slices.Sorted(maps.Keys(want)) {
		if got[p] != want[p] {
			t.Errorf("%s: %s is %q, want %q", what, p, got[p], want[p])
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("%s: %s should not be there (%q)", what, p, got[p])
		}
	}
}

func inode(t *testing.T, p string) uint64 {
	t.Helper()
	var st unix.Stat_t
	must(t, unix.Lstat(p, &st))
	return st.Ino
}

// chains lists the snapshots in the store, by their layer count.
func chains(t *testing.T, s *Store) []int {
	t.Helper()
	var out []int
	for _, sn := range s.snapshots() {
		out = append(out, len(sn.DiffIDs))
	}
	slices.Sort(out)
	return out
}

// A sibling (an image sharing only its first layers with a stored one)
// fetches and applies only its own layers, starting from the snapshot the
// first pull kept; it comes out as a pull into an empty store makes it,
// the stored image is not changed by it, removing either leaves the other
// whole, and the snapshots go with the last image above them.
func TestPullSiblingFetchesOnlyItsOwnLayers(t *testing.T) {
	ctx := context.Background()
	addr := registry(t)
	a, b := siblings(t)
	refA, refB := push(t, addr, a), push(t, addr, b)
	p := newProxy(t, addr)
	s := openStore(t)

	imgA, err := Pull(ctx, s, p.Ref(refA))
	must(t, err)
	treeA := describeWithDirTimes(t, imgA.RootFS)
	// Snapshots change nothing of the image itself.
	plain, err := Pull(ctx, openStore(t), refA, withSnapshotMin(1<<62))
	must(t, err)
	sameTree(t, "a, pulled keeping snapshots", treeA, describeWithDirTimes(t, plain.RootFS))
	if got := chains(t, s); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("snapshots of %v layers kept, want of 1 and of 2", got)
	}

	before := p.Blobs.Load()
	imgB, err := Pull(ctx, s, p.Ref(refB))
	must(t, err)
	if n := p.Blobs.Load() - before; n != 2 {
		t.Fatalf("the sibling fetched %d blobs, want its config and its own layer only", n)
	}
	if want := chainIDs(imgB.DiffIDs)[1].String(); imgB.BaseChain != want || imgB.Base != "" {
		t.Errorf("b's base: image %q, chain %q; want the chain %s", imgB.Base, imgB.BaseChain, want)
	}
	treeB := describeWithDirTimes(t, imgB.RootFS)
	fresh, err := Pull(ctx, openStore(t), refB)
	must(t, err)
	sameTree(t, "b from a snapshot", treeB, describeWithDirTimes(t, fresh.RootFS))
	for f, body := range map[string]string{"srv/edit": "b\n", "srv/edit-link": "v1\n", "srv/gone": "x\n", "srv/opq/new": "new\n", "srv/b-only": "b\n"} {
		if got := readFile(t, filepath.Join(imgB.RootFS, f)); got != body {
			t.Errorf("b: %s = %q, want %q", f, got, body)
		}
	}
	for _, f := range []string{"srv/a-only", "srv/ro/keep", "srv/opq/old"} {
		if _, err := os.Lstat(filepath.Join(imgB.RootFS, f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("b: %s should not be there: %v", f, err)
		}
	}
	// The shared layers are stored once: b's files are a's.
	for _, f := range []string{"bin/busybox", "srv/noise", "srv/owned"} {
		if inode(t, filepath.Join(imgA.RootFS, f)) != inode(t, filepath.Join(imgB.RootFS, f)) {
			t.Errorf("%s is stored twice", f)
		}
	}
	// b's layer edited and removed files a has from the shared layer (and
	// a's had edited and removed others): a is as it was.
	sameTree(t, "a after b's pull", describeWithDirTimes(t, imgA.RootFS), treeA)

	_, err = s.Remove(ctx, p.Ref(refA))
	must(t, err)
	sameTree(t, "b after a's removal", describeWithDirTimes(t, imgB.RootFS), treeB)
	if got := chains(t, s); !slices.Equal(got, []int{1, 2}) {
		t.Errorf("after a's removal, snapshots of %v layers, want those below b (1, 2)", got)
	}
	// a again: it starts from the snapshot too, and is a again.
	before = p.Blobs.Load()
	imgA, err = Pull(ctx, s, p.Ref(refA))
	must(t, err)
	if n := p.Blobs.Load() - before; n != 2 {
		t.Errorf("a, pulled again beside b, fetched %d blobs, want 2", n)
	}
	sameTree(t, "a pulled again", describeWithDirTimes(t, imgA.RootFS), treeA)

	for _, r := range []string{refA, refB} {
		_, err := s.Remove(ctx, p.Ref(r))
		must(t, err)
	}
	if got := chains(t, s); len(got) != 0 {
		t.Errorf("with no image left, snapshots of %v layers are", got)
	}
	if l := leftovers(t, s); len(l) != 0 {
		t.Errorf("the store holds %v with no image left", l)
	}
}

// A pull killed (here: failed) after it kept a snapshot leaves none
// behind: snapshots go into the store with their image only.
func TestPullFailedAfterASnapshotLeavesNone(t *testing.T) {
	ctx := context.Background()
	addr := registry(t)
	a, _ := siblings(t)
	ref := push(t, addr, a)
	layers, err := a.Layers()
	must(t, err)
	last, err := layers[2].Digest()
	must(t, err)
	p := newProxy(t, addr)
	s := openStore(t)
	p.SetBreakBlob(func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.HasSuffix(r.URL.Path, last.String()) {
			return false
		}
		// Hold the last layer until the snapshot of the first two is made.
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if m, _ := filepath.Glob(filepath.Join(s.dir, "images", ".tmp-*", "chains", "*", "rootfs", "srv", "noise")); len(m) > 0 {
				break
			}
		}
		http.Error(w, "gone", http.StatusNotFound)
		return true
	})
	if _, err := Pull(ctx, s, p.Ref(ref)); err == nil {
		t.Fatal("the pull succeeded without its last layer")
	}
	var left []string
	for _, l := range leftovers(t, s) {
		if !strings.HasPrefix(l, "blobs/sha256/") { // kept to resume
			left = append(left, l)
		}
	}
	if len(left) != 0 {
		t.Fatalf("the failed pull left %v", left)
	}
	p.SetBreakBlob(nil)
	img, err := Pull(ctx, s, p.Ref(ref))
	must(t, err)
	if got := readFile(t, filepath.Join(img.RootFS, "srv/edit")); got != "a\n" {
		t.Errorf("srv/edit = %q", got)
	}
	if got := chains(t, s); !slices.Equal(got, []int{1, 2}) {
		t.Errorf("snapshots of %v layers, want 1 and 2", got)
	}
}

// Siblings pulled at once both come out whole, each snapshot is kept once.
func TestPullSiblingsConcurrently(t *testing.T) {
	ctx := context.Background()
	addr := registry(t)
	a, b := siblings(t)
	refs := []string{push(t, addr, a), push(t, addr, b)}
	want := map[string]map[string]string{}
	for _, r := range refs {
		img, err := Pull(ctx, openStore(t), r)
		must(t, err)
		want[r] = describeWithDirTimes(t, img.RootFS)
	}
	s := openStore(t)
	for round := range 3 {
		var wg sync.WaitGroup
		imgs := make([]*Image, len(refs))
		errs := make([]error, len(refs))
		for i, r := range refs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				imgs[i], errs[i] = Pull(ctx, s, r)
			}()
		}
		wg.Wait()
		for i, r := range refs {
			must(t, errs[i])
			sameTree(t, fmt.Sprintf("round %d, %s", round, r), describeWithDirTimes(t, imgs[i].RootFS), want[r])
		}
		if got := chains(t, s); !slices.Equal(got, []int{1, 2}) {
			t.Fatalf("round %d: snapshots of %v layers, want one of 1 and one of 2", round, got)
		}
		if l, _ := filepath.Glob(filepath.Join(s.dir, "images", ".tmp-*")); len(l) != 0 {
			t.Fatalf("round %d: left %v", round, l)
		}
		for _, r := range refs {
			_, err := s.Remove(ctx, r)
			must(t, err)
		}
		if got := chains(t, s); len(got) != 0 {
			t.Fatalf("round %d: snapshots of %v layers with no image", round, got)
		}
	}
}

func TestPlanSnapshots(t *testing.T) {
	const mb = 1 << 20
	cases := []struct {
		sizes []int64
		first int
		want  []bool
	}{
		// The bench image: minbase, compilers, git + curl.
		{[]int64{49 * mb, 76 * mb, 37 * mb}, 0, []bool{true, true, false}},
		// Starting from a base of the first two.
		{[]int64{49 * mb, 76 * mb, 37 * mb}, 2, []bool{false, false, false}},
		// Small layers are not worth a copy; nor is a small one on a big one.
		{[]int64{mb / 2, mb / 4, 10 * mb}, 0, []bool{false, false, false}},
		{[]int64{40 * mb, 2 * mb, 5 * mb, 8 * mb, 30 * mb}, 0, []bool{true, false, false, true, false}},
	}
	for _, c := range cases {
		if got := planSnapshots(c.sizes, c.first, mb); !slices.Equal(got, c.want) {
			t.Errorf("planSnapshots(%v, %d) = %v, want %v", c.sizes, c.first, got, c.want)
		}
	}
	// Many equal layers: few snapshots, each a quarter more than the last.
	sizes := make([]int64, 40)
	for i := range sizes {
		sizes[i] = 10 * mb
	}
	n := 0
	for _, at := range planSnapshots(sizes, 0, mb) {
		if at {
			n++
		}
	}
	if n > 12 {
		t.Errorf("%d snapshots of a 40-layer image", n)
	}
}
