package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/cove-sh/cove/internal/testimage"
	"github.com/cove-sh/cove/internal/testregistry"
	"github.com/cove-sh/cove/internal/userns"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"golang.org/x/sys/unix"
)

// registry is an in-process registry: the pull is the point, not the
// server (TestPullWithCredentials keeps the real one, for its login).
func registry(t *testing.T) string { return testregistry.InProcess(t) }

func push(t *testing.T, addr string, img v1.Image) string { return testregistry.Push(t, addr, img) }

func busybox(t *testing.T) v1.Image {
	t.Helper()
	img, err := testimage.Busybox()
	must(t, err)
	return img
}

func layered(t *testing.T) v1.Image {
	t.Helper()
	img, err := testimage.Layered()
	must(t, err)
	return img
}

func openStore(t *testing.T) *Store {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	// Rootless, what a pull made as the user's subordinate ids only the
	// user namespace helper removes; before the TempDir's own cleanup.
	t.Cleanup(func() { userns.RemoveAll(context.Background(), dir) })
	s, err := Open(dir)
	must(t, err)
	return s
}

type proxy = testregistry.Proxy

func newProxy(t *testing.T, upstream string) *proxy { return testregistry.NewProxy(t, upstream) }

// leftovers lists what a failed pull left in the store besides its skeleton.
func leftovers(t *testing.T, s *Store) []string {
	t.Helper()
	var out []string
	for _, d := range []string{"images", "chains", "blobs/sha256", "blobs/tmp"} {
		es, err := os.ReadDir(filepath.Join(s.dir, d))
		must(t, err)
		for _, e := range es {
			out = append(out, d+"/"+e.Name())
		}
	}
	return out
}

func TestPullLayeredFromRegistry(t *testing.T) {
	addr := registry(t)
	img := layered(t)
	ref := push(t, addr, img)
	s := openStore(t)
	var extracted atomic.Int64
	got, err := Pull(context.Background(), s, ref, WithProgress(func(p Progress) {
		if p.Phase == PhaseExtracted {
			extracted.Add(1)
		}
	}))
	must(t, err)
	want, _ := img.Digest()
	if got.Digest != want {
		t.Fatalf("digest %s, want %s", got.Digest, want)
	}
	if extracted.Load() != 3 {
		t.Fatalf("%d layers reported extracted, want 3", extracted.Load())
	}
	r := got.RootFS
	checks := map[string]string{"srv/data/old": "new\n", "srv/data/link": "new\n", "srv/cfg/c": "c\n", "usr/lib64/ld.so": "loader\n"}
	for p, body := range checks {
		if b := readFile(t, filepath.Join(r, p)); b != body {
			t.Errorf("%s = %q, want %q", p, b, body)
		}
	}
	for _, gone := range []string{"srv/remove-me", "srv/cfg/a", "srv/cfg/b", "bin/false"} {
		if _, err := os.Lstat(filepath.Join(r, gone)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s should be whited out", gone)
		}
	}
	if l, _ := os.Readlink(filepath.Join(r, "lib64")); l != "/usr/lib64" {
		t.Errorf("lib64 -> %q", l)
	}
	out, err := exec.Command(filepath.Join(r, "bin/busybox"), "echo", "runs").Output()
	if err != nil || string(out) != "runs\n" {
		t.Errorf("the extracted busybox does not run: %q %v", out, err)
	}
	// The store has it under the canonical name and by digest.
	for _, n := range []string{ref, want.String(), want.Hex[:12]} {
		if g, err := s.Get(n); err != nil || g.Digest != want {
			t.Errorf("Get(%q) = %v, %v", n, g, err)
		}
	}
	fi, err := os.Stat(s.dir)
	must(t, err)
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("store mode %v, want 0700", fi.Mode().Perm())
	}
}

// TestPullMatchesCraneExport compares the flattened tree with what
// go-containerregistry's own flattener produces for the same image.
func TestPullMatchesCraneExport(t *testing.T) {
	addr := registry(t)
	crane, err := exec.LookPath("crane")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("crane not on PATH: scripts/test.sh installs it")
		}
		t.Skip("crane not installed: go install github.com/google/go-containerregistry/cmd/crane@v0.22.1")
	}
	if os.Geteuid() != 0 {
		t.Skip("comparing owners needs root")
	}
	ref := push(t, addr, layered(t))
	s := openStore(t)
	img, err := Pull(context.Background(), s, ref)
	must(t, err)

	dir := t.TempDir()
	cmd := exec.Command("sh", "-c", `"$0" export "$1" - | tar -x -p --same-owner --xattrs -C "$2"`, crane, ref, dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("crane export: %v\n%s", err, out)
	}
	want := describeTree(t, dir)
	got := describeTree(t, img.RootFS)
	if len(got) != len(want) {
		t.Errorf("cove has %d paths, crane export %d", len(got), len(want))
	}
	for p, w := range want {
		if g, ok := got[p]; !ok {
			t.Errorf("%s: missing (crane: %s)", p, w)
		} else if g != w {
			t.Errorf("%s: cove %s, crane %s", p, g, w)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("%s: only in cove's tree", p)
		}
	}
}

// describeTree maps each path below root to its type, mode, owner, link
// target and content hash.
func describeTree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		var st unix.Stat_t
		must(t, unix.Lstat(p, &st))
		d := fmt.Sprintf("%v %d:%d", fi.Mode(), st.Uid, st.Gid)
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			d += " -> " + l
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			d += fmt.Sprintf(" %x", sha256.Sum256(b))
		}
		out[rel] = d
		return nil
	})
	must(t, err)
	return out
}

// pushBaseAndDerived pushes busybox (A) and an image built FROM it with
// one more layer holding /hello (B).
func pushBaseAndDerived(t *testing.T, addr string) (refA, refB string) {
	base := busybox(t)
	extra, err := testimage.Layer(testimage.File("hello", "world\n", 0o644))
	must(t, err)
	derived, err := mutate.AppendLayers(base, extra)
	must(t, err)
	return push(t, addr, base), push(t, addr, derived)
}

func TestPullSharedBaseFetchesOnlyNewLayers(t *testing.T) {
	addr := registry(t)
	refA, refB := pushBaseAndDerived(t, addr)
	p := newProxy(t, addr)
	s := openStore(t)
	if _, err := Pull(context.Background(), s, p.Ref(refA)); err != nil {
		t.Fatal(err)
	}
	afterA := p.Blobs.Load()
	img, err := Pull(context.Background(), s, p.Ref(refB))
	must(t, err)
	if n := p.Blobs.Load() - afterA; n != 2 {
		t.Fatalf("second image fetched %d blobs, want only its config and its new layer", n)
	}
	if b := readFile(t, filepath.Join(img.RootFS, "hello")); b != "world\n" {
		t.Fatalf("hello = %q", b)
	}
	// B starts as a copy of A that shares its files, and the blobs are
	// gone once their content is in a rootfs: each layer is stored once.
	a, err := s.Get(p.Ref(refA))
	must(t, err)
	var sa, sb unix.Stat_t
	must(t, unix.Stat(filepath.Join(a.RootFS, "bin/busybox"), &sa))
	must(t, unix.Stat(filepath.Join(img.RootFS, "bin/busybox"), &sb))
	if sa.Ino != sb.Ino {
		t.Errorf("bin/busybox is stored twice (inodes %d and %d)", sa.Ino, sb.Ino)
	}
	if img.Base != a.Digest.String() {
		t.Errorf("B's base is %s, want A %s", img.Base, a.Digest)
	}
	if l := leftovers(t, s); len(l) != 2 {
		t.Errorf("the store holds %v, want just the two images", l)
	}
	// Pulling a known name again with the default policy asks nobody.
	before := p.Blobs.Load()
	p.SetStatus(http.StatusInternalServerError)
	if _, err := Pull(context.Background(), s, p.Ref(refB)); err != nil {
		t.Fatalf("pull of a stored image contacted the registry: %v", err)
	}
	if p.Blobs.Load() != before {
		t.Fatal("pull of a stored image fetched blobs")
	}
}

func TestPullConcurrentDoesTheWorkOnce(t *testing.T) {
	addr := registry(t)
	ref := push(t, addr, layered(t))
	s := openStore(t)
	var extracting atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = Pull(context.Background(), s, ref, WithProgress(func(p Progress) {
				if p.Phase == PhaseExtracting {
					extracting.Add(1)
				}
			}))
		}()
	}
	wg.Wait()
	for _, err := range errs {
		must(t, err)
	}
	if n := extracting.Load(); n != 3 {
		t.Fatalf("%d layer extractions for 4 concurrent pulls of a 3-layer image, want 3", n)
	}
}

func TestPullBrokenRegistry(t *testing.T) {
	addr := registry(t)
	ref := push(t, addr, busybox(t))
	cases := []struct {
		name    string
		setup   func(p *proxy)
		wantMsg string
		wantErr any
	}{
		{"corrupted blob", func(p *proxy) {
			p.BreakBlob = func(w http.ResponseWriter, r *http.Request) bool {
				b, _ := p.Upstream(r)
				if len(b) > 4096 { // a layer, not the config
					b[len(b)/2] ^= 0xff
				}
				w.Write(b)
				return true
			}
		}, "digest mismatch", &DigestError{}},
		{"connection dropped half-way", func(p *proxy) {
			p.BreakBlob = func(w http.ResponseWriter, r *http.Request) bool {
				b, _ := p.Upstream(r)
				if len(b) <= 4096 {
					w.Write(b)
					return true
				}
				w.Header().Set("Content-Length", fmt.Sprint(len(b)))
				w.WriteHeader(http.StatusOK)
				w.Write(b[:len(b)/2])
				http.NewResponseController(w).Flush()
				if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
					conn.Close()
				}
				return true
			}
		}, "unexpected EOF", nil},
		{"401", func(p *proxy) { p.Status = http.StatusUnauthorized }, "credentials", nil},
		{"404", func(p *proxy) { p.Status = http.StatusNotFound }, "no such image", nil},
		{"500", func(p *proxy) { p.Status = http.StatusInternalServerError }, "retry later", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newProxy(t, addr)
			tc.setup(p)
			s := openStore(t)
			_, err := Pull(context.Background(), s, p.Ref(ref))
			if err == nil {
				t.Fatal("pull succeeded")
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not say %q", err, tc.wantMsg)
			}
			if de, ok := tc.wantErr.(*DigestError); ok && !errors.As(err, &de) {
				t.Errorf("error %v is not a DigestError", err)
			}
			if l := leftovers(t, s); len(l) != 0 {
				t.Errorf("a failed pull left %v", l)
			}
			if _, err := s.Get(p.Ref(ref)); !errors.Is(err, ErrNotFound) {
				t.Errorf("the store knows the image after a failed pull: %v", err)
			}
		})
	}
}

func TestPullRetriesADroppedConnection(t *testing.T) {
	addr := registry(t)
	ref := push(t, addr, busybox(t))
	p := newProxy(t, addr)
	var dropped atomic.Bool
	p.BreakBlob = func(w http.ResponseWriter, r *http.Request) bool {
		if dropped.Swap(true) {
			return false
		}
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
		return true
	}
	s := openStore(t)
	img, err := Pull(context.Background(), s, p.Ref(ref))
	must(t, err)
	if _, err := os.Stat(filepath.Join(img.RootFS, "bin/busybox")); err != nil {
		t.Fatal(err)
	}
	if !dropped.Load() {
		t.Fatal("the proxy never dropped a connection")
	}
}

func TestPullLocalTransports(t *testing.T) {
	img := layered(t)
	want, _ := img.Digest()
	dir := t.TempDir()

	ociDir := filepath.Join(dir, "oci")
	lp, err := layout.Write(ociDir, empty.Index)
	must(t, err)
	must(t, lp.AppendImage(img, layout.WithAnnotations(map[string]string{refNameAnnotation: "v1"})))
	must(t, lp.AppendImage(busybox(t), layout.WithAnnotations(map[string]string{refNameAnnotation: "bb"})))

	ociArchive := filepath.Join(dir, "image.oci.tar")
	must(t, exec.Command("tar", "-C", ociDir, "-cf", ociArchive, ".").Run())

	dockerArchive := filepath.Join(dir, "image.docker.tar")
	tag, _ := name.NewTag("example.com/layered:v1")
	must(t, tarball.WriteToFile(dockerArchive, tag, img))

	s := openStore(t)
	for _, ref := range []string{"oci:" + ociDir + ":v1", "oci-archive:" + ociArchive + ":v1", "docker-archive:" + dockerArchive} {
		t.Run(strings.SplitN(ref, ":", 2)[0], func(t *testing.T) {
			got, err := Pull(context.Background(), s, ref)
			must(t, err)
			if strings.HasPrefix(ref, "oci") && got.Digest != want {
				t.Errorf("digest %s, want %s", got.Digest, want)
			}
			if b := readFile(t, filepath.Join(got.RootFS, "srv/data/link")); b != "new\n" {
				t.Errorf("srv/data/link = %q", b)
			}
		})
	}
	if _, err := Pull(context.Background(), s, "oci:"+ociDir); err == nil || !strings.Contains(err.Error(), "name one") {
		t.Errorf("an untagged pull from a layout with two images: %v", err)
	}
	if _, err := Pull(context.Background(), s, "oci:"+ociDir+":nope"); err == nil || !strings.Contains(err.Error(), "no image tagged") {
		t.Errorf("pull of a missing tag: %v", err)
	}
}

func TestPullPicksPlatformFromIndex(t *testing.T) {
	addr := registry(t)
	amd, err := testimage.Busybox()
	must(t, err)
	l, err := testimage.Layer(testimage.File("arch", "arm64\n", 0o644))
	must(t, err)
	arm, err := testimage.Image("arm64", l)
	must(t, err)
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: amd, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
		mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}}},
	)
	ref := fmt.Sprintf("%s/test/index-%d:latest", addr, os.Getpid())
	r, _ := name.ParseReference(ref)
	must(t, remote.WriteIndex(r, idx))

	s := openStore(t)
	got, err := Pull(context.Background(), s, ref, WithPlatform(v1.Platform{OS: "linux", Architecture: "arm64"}))
	must(t, err)
	if want, _ := arm.Digest(); got.Digest != want {
		t.Fatalf("arm64 pull got %s, want %s", got.Digest, want)
	}
	_, err = Pull(context.Background(), s, ref, WithPlatform(v1.Platform{OS: "linux", Architecture: "s390x"}), WithPolicy(PullAlways))
	if err == nil || !strings.Contains(err.Error(), "s390x") {
		t.Fatalf("pull for a platform the index lacks: %v", err)
	}
}

func TestPullFullDisk(t *testing.T) {
	addr := registry(t)
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	ref := push(t, addr, busybox(t))
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	s, err := Open(filepath.Join(dir, "store"))
	must(t, err)
	_, err = Pull(context.Background(), s, ref)
	if err == nil || !strings.Contains(err.Error(), "is full") {
		t.Fatalf("pull onto a full disk: %v", err)
	}
	if l := leftovers(t, s); len(l) != 0 {
		t.Errorf("a failed pull left %v", l)
	}
}

func TestPullSizeCap(t *testing.T) {
	addr := registry(t)
	ref := push(t, addr, busybox(t))
	s := openStore(t)
	_, err := Pull(context.Background(), s, ref, WithMaxSize(1<<20))
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("pull of a 2 MB image with a 1 MiB cap: %v", err)
	}
	if l := leftovers(t, s); len(l) != 1 || !strings.HasPrefix(l[0], "blobs/sha256/") {
		t.Errorf("after the capped pull the store holds %v, want just the verified blob", l)
	}
}

// TestRemoveAndPrune checks that rmi and prune drop exactly what nothing
// uses any more.
func TestRemoveAndPrune(t *testing.T) {
	addr := registry(t)
	refA, refB := pushBaseAndDerived(t, addr)
	s := openStore(t)
	ctx := context.Background()
	a, err := Pull(ctx, s, refA)
	must(t, err)
	b, err := Pull(ctx, s, refB)
	must(t, err)
	if _, err := s.Remove(ctx, refB); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(b.RootFS); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("rmi left the rootfs: %v", err)
	}
	// A blob left by a failed pull goes with prune; images need none.
	stray := filepath.Join(s.dir, "blobs", "sha256", zeros64)
	must(t, os.WriteFile(stray, []byte("stray"), 0o600))
	rep, err := s.Prune(ctx)
	must(t, err)
	if rep.Blobs != 1 || rep.Images != 0 {
		t.Fatalf("prune removed %d images and %d blobs, want the stray blob only", rep.Images, rep.Blobs)
	}
	if _, err := s.Get(refA); err != nil {
		t.Fatalf("prune broke A: %v", err)
	}
	if _, err := os.Stat(filepath.Join(a.RootFS, "bin/busybox")); err != nil {
		t.Fatal(err)
	}
	entries, err := s.List()
	must(t, err)
	if len(entries) != 1 || entries[0].Ref != mustSource(t, refA).String() {
		t.Fatalf("List = %+v", entries)
	}
}

func mustSource(t *testing.T, ref string) Source {
	src, err := ParseReference(ref)
	must(t, err)
	return src
}

func TestParseReference(t *testing.T) {
	cases := map[string]string{
		"debian:bookworm":                     "docker.io/library/debian:bookworm",
		"debian":                              "docker.io/library/debian:latest",
		"127.0.0.1:5000/x:tag":                "127.0.0.1:5000/x:tag",
		"ghcr.io/a/b@sha256:" + zeros64:       "ghcr.io/a/b@sha256:" + zeros64,
		"oci:/srv/layout:v1":                  "oci:/srv/layout:v1",
		"oci:/srv/layout":                     "oci:/srv/layout",
		"oci-archive:/tmp/a.tar":              "oci-archive:/tmp/a.tar",
		"docker-archive:/tmp/a.tar:x/y:z":     "docker-archive:/tmp/a.tar:x/y:z",
		"docker://quay.io/podman/stable:v5.0": "quay.io/podman/stable:v5.0",
	}
	for in, want := range cases {
		src, err := ParseReference(in)
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if got := src.String(); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
	for _, bad := range []string{"UPPER/case", "oci:", "a b"} {
		if _, err := ParseReference(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

const zeros64 = "0000000000000000000000000000000000000000000000000000000000000000"

// TestPullWithCredentials pulls from a registry that wants a login, with
// the credentials in a Docker config as `docker login` writes it.
func TestPullWithCredentials(t *testing.T) {
	addr := testregistry.AuthAddr(t)
	ref := testregistry.Push(t, addr, busybox(t), remote.WithAuth(&authn.Basic{Username: testregistry.User, Password: testregistry.Password}))
	cfgDir := t.TempDir()
	t.Setenv("DOCKER_CONFIG", cfgDir)
	login := func(password string) {
		auth := base64.StdEncoding.EncodeToString([]byte(testregistry.User + ":" + password))
		cfg := fmt.Sprintf(`{"auths": {%q: {"auth": %q}}}`, addr, auth)
		must(t, os.WriteFile(filepath.Join(cfgDir, "config.json"), []byte(cfg), 0o600))
	}
	s := openStore(t)
	_, err := Pull(context.Background(), s, ref)
	if err == nil || !strings.Contains(err.Error(), "refused our credentials") {
		t.Fatalf("pull without a login: %v", err)
	}
	login("wrong")
	_, err = Pull(context.Background(), s, ref)
	if err == nil || !strings.Contains(err.Error(), "refused our credentials") {
		t.Fatalf("pull with a wrong password: %v", err)
	}
	if strings.Contains(err.Error(), "wrong") {
		t.Fatalf("the error shows the password: %v", err)
	}
	login(testregistry.Password)
	img, err := Pull(context.Background(), s, ref)
	must(t, err)
	if _, err := os.Stat(filepath.Join(img.RootFS, "bin/busybox")); err != nil {
		t.Fatal(err)
	}
}

func TestPullZstdLayer(t *testing.T) {
	addr := registry(t)
	zl, err := testimage.ZstdLayer(testimage.Dir("z", 0o755), testimage.File("z/hello", "zstd\n", 0o644))
	must(t, err)
	if mt, _ := zl.MediaType(); !strings.Contains(string(mt), "zstd") {
		t.Fatalf("layer media type %s", mt)
	}
	img, err := mutate.AppendLayers(busybox(t), zl)
	must(t, err)
	ref := push(t, addr, img)
	got, err := Pull(context.Background(), openStore(t), ref)
	must(t, err)
	if b := readFile(t, filepath.Join(got.RootFS, "z/hello")); b != "zstd\n" {
		t.Fatalf("z/hello = %q", b)
	}
	rc, err := zl.Compressed()
	must(t, err)
	defer rc.Close()
	magic := make([]byte, 4)
	if _, err := io.ReadFull(rc, magic); err != nil || !bytes.Equal(magic, zstdMagic) {
		t.Fatalf("the pushed layer is not zstd: % x", magic)
	}
}
