package image

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"
)

// ent is one hand-built tar entry.
type ent struct {
	name string
	typ  byte
	body string
	link string
	mode int64
	uid  int
	gid  int
	size int64 // declared size when body is not all the data (0: len(body))
	pax  map[string]string
	mtim time.Time
	dev  [2]int64
}

func file(name, body string) ent { return ent{name: name, typ: tar.TypeReg, body: body, mode: 0o644} }
func dir(name string) ent        { return ent{name: name, typ: tar.TypeDir, mode: 0o755} }
func symlink(name, target string) ent {
	return ent{name: name, typ: tar.TypeSymlink, link: target, mode: 0o777}
}
func hardlink(name, target string) ent {
	return ent{name: name, typ: tar.TypeLink, link: target, mode: 0o644}
}

// tarLayer writes ents as an uncompressed layer.
func tarLayer(t testing.TB, ents ...ent) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		hdr := &tar.Header{
			Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: e.mode,
			Uid: e.uid, Gid: e.gid, ModTime: e.mtim, PAXRecords: e.pax,
			Devmajor: e.dev[0], Devminor: e.dev[1], Format: tar.FormatPAX,
		}
		if e.mtim.IsZero() {
			hdr.ModTime = time.Unix(1700000000, 0)
		}
		if e.typ == tar.TypeReg {
			hdr.Size = int64(len(e.body))
			if e.size != 0 {
				hdr.Size = e.size
			}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatalf("header %s: %v", e.name, err)
		}
		if e.typ == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
			if e.size > int64(len(e.body)) {
				if _, err := tw.Write(make([]byte, e.size-int64(len(e.body)))); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// sandbox is a temp dir holding the rootfs and, beside it, canaries that
// no layer may touch.
type sandbox struct {
	base, root string
	before     map[string]string
	stats      Stats // of the last apply
	noOpenat2  bool  // resolve through pathrs-lite, as on kernels without openat2
}

func newSandbox(t testing.TB) *sandbox {
	t.Helper()
	base := t.TempDir()
	sb := &sandbox{base: base, root: filepath.Join(base, "rootfs")}
	must(t, os.Mkdir(sb.root, 0o755))
	// Images hold read-only directories; unprivileged, only our RemoveAll
	// can delete them (t.TempDir's cleanup runs after this one).
	t.Cleanup(func() { RemoveAll(sb.root) })
	must(t, os.WriteFile(filepath.Join(base, "victim"), []byte("canary"), 0o644))
	must(t, os.Mkdir(filepath.Join(base, "victimdir"), 0o755))
	must(t, os.WriteFile(filepath.Join(base, "victimdir", "canary"), []byte("canary"), 0o600))
	sb.before = snapshotOutside(t, base)
	return sb
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// snapshotOutside describes everything under base except the rootfs.
func snapshotOutside(t testing.TB, base string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.Walk(base, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(base, p)
		if rel == "rootfs" {
			return filepath.SkipDir
		}
		var st unix.Stat_t
		unix.Lstat(p, &st)
		desc := info.Mode().String() + " " + string(rune('0'+st.Nlink))
		if info.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			desc += " " + string(b)
		}
		out[rel] = desc
		return nil
	})
	return out
}

func (sb *sandbox) checkCanaries(t testing.TB) {
	t.Helper()
	after := snapshotOutside(t, sb.base)
	if len(after) != len(sb.before) {
		t.Errorf("files outside the root changed: before %v, after %v", keys(sb.before), keys(after))
	}
	for k, v := range sb.before {
		if after[k] != v {
			t.Errorf("outside the root, %s changed: %q -> %q", k, v, after[k])
		}
	}
}

func keys(m map[string]string) []string {
	var k []string
	for x := range m {
		k = append(k, x)
	}
	sort.Strings(k)
	return k
}

func (sb *sandbox) apply(t testing.TB, maxSize int64, layers ...[]byte) error {
	t.Helper()
	ext, err := newExtractor(sb.root, maxSize)
	must(t, err)
	ext.noOpenat2 = sb.noOpenat2
	defer ext.Close()
	defer func() { sb.stats = ext.stats }()
	for _, l := range layers {
		if err := ext.applyLayer(bytes.NewReader(l)); err != nil {
			return err
		}
	}
	return ext.finish()
}

func readFile(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("read %s: %v", p, err)
	}
	return string(b)
}

func TestExtractHostile(t *testing.T) {
	type check func(t *testing.T, sb *sandbox, err error)
	wantErr := func(target error) check {
		return func(t *testing.T, sb *sandbox, err error) {
			if err == nil {
				t.Fatal("extraction succeeded, want an error")
			}
			if target != nil && !errors.Is(err, target) {
				t.Fatalf("error %v, want %v", err, target)
			}
		}
	}
	// stays asserts rel exists inside the root with the body.
	stays := func(rel, body string) check {
		return func(t *testing.T, sb *sandbox, err error) {
			if err != nil {
				t.Fatalf("extraction failed: %v", err)
			}
			if got := readFile(t, filepath.Join(sb.root, rel)); got != body {
				t.Fatalf("%s = %q, want %q", rel, got, body)
			}
		}
	}
	// insideOrFails accepts an error, or rel inside the root with the body.
	insideOrFails := func(rel, body string) check {
		return func(t *testing.T, sb *sandbox, err error) {
			if err == nil {
				stays(rel, body)(t, sb, err)
			}
		}
	}
	cases := []struct {
		name   string
		layers func(sb *sandbox) [][]byte
		check  check
	}{
		{"dotdot entry", func(sb *sandbox) [][]byte {
			return [][]byte{tarLayer(t, file("../victim", "pwned"))}
		}, wantErr(ErrUnsafeEntry)},
		{"dotdot in the middle", func(sb *sandbox) [][]byte {
			return [][]byte{tarLayer(t, file("a/../../victim", "pwned"))}
		}, wantErr(ErrUnsafeEntry)},
		{"absolute entry lands inside", func(sb *sandbox) [][]byte {
			return [][]byte{tarLayer(t, file(filepath.Join(sb.base, "victim"), "inside"))}
		}, func(t *testing.T, sb *sandbox, err error) {
			stays(filepath.Join(strings.TrimPrefix(sb.base, "/"), "victim"), "inside")(t, sb, err)
		}},
		{"root entry is a symlink", func(sb *sandbox) [][]byte {
			return [][]byte{tarLayer(t, symlink("./", sb.base)), tarLayer(t, file("victim", "pwned"))}
		}, wantErr(ErrUnsafeEntry)},
		{"write through symlink to a host dir", func(sb *sandbox) [][]byte {
			return [][]byte{tarLayer(t, symlink("etc", filepath.Join(sb.base, "victimdir")), file("etc/canary", "pwned"))}
		}, func(t *testing.T, sb *sandbox, err error) {
			insideOrFails(filepath.Join(strings.TrimPrefix(sb.base, "/"), "victimdir", "canary"), "pwned")(t, sb, err)
		}},
		{"write through symlink to an existing in-root dir", func(sb *sandbox) [][]byte {
			return [][]byte{tarLayer(t, dir("usr"), dir("usr/lib64"), symlink("lib64", "/usr/lib64"), file("lib64/ld.so", "ld"))}
		}, stays("usr/lib64/ld.so", "ld")},
		{"write through symlink to /etc", func(sb *sandbox) [][]byte {
			return [][]byte{tarLayer(t, symlink("etc", "/etc"), dir("real"), file("etc/cove-test-canary", "x"))}
		}, func(t *testing.T, sb *sandbox, err error) {
			insideOrFails("etc/cove-test-canary", "x")(t, sb, err)
			if _, err := os.Lstat("/etc/cove-test-canary"); err == nil {
				os.Remove("/etc/cove-test-canary")
				t.Fatal("wrote /etc/cove-test-canary on the host")
			}
		}},
		{"write through ../.. symlink", func(sb *sandbox) [][]byte {
			return [][]byte{tarLayer(t, symlink("up", "../../.."), file("up/victim", "inside"))}
		}, stays("victim", "inside")},
		{"dir replaced by symlink to / mid-layer", func(sb *sandbox) [][]byte {
			return [][]byte{tarLayer(t, dir("d"), file("d/a", "a"), symlink("d", "/"), file("d/victim", "inside"))}
		}, stays("victim", "inside")},
		{"dir replaced by symlink to a host dir mid-layer", func(sb *sandbox) [][]byte {
			return [][]byte{tarLayer(t, dir("d"), file("d/a", "a"), symlink("d", sb.base), file("d/victim", "inside"))}
		}, func(t *testing.T, sb *sandbox, err error) {
			insideOrFails(filepath.Join(strings.TrimPrefix(sb.base, "/"), "victim"), "inside")(t, sb, err)
		}},
		{"symlink loop", func(sb *sandbox) [][]byte {
			return [][]byte{tarLayer(t, symlink("a", "b"), symlink("b", "a"), file("a/x", "x"))}
		}, wantErr(unix.ELOOP)},
		{"hardlink to ../victim", func(sb *sandbox) [][]byte {
			return [][]byte{tarLayer(t, hardlink("h", "../victim"))}
		}, wantErr(ErrUnsafeEntry)},
		{"hardlink to absolute host path", func(sb *sandbox) [][]byte {
			return [][]byte{tarLayer(t, hardlink("h", filepath.Join(sb.base, "victim")))}
		}, wantErr(unix.ENOENT)},
		{"hardlink to symlink to host file, then chmod", func(sb *sandbox) [][]byte {
			h := hardlink("h", "s")
			h.mode = 0o777
			return [][]byte{tarLayer(t, symlink("s", filepath.Join(sb.base, "victim")), h, ent{name: "h", typ: tar.TypeLink, link: "s", mode: 0o4777})}
		}, func(t *testing.T, sb *sandbox, err error) {
			if err != nil {
				t.Fatal(err)
			}
			fi, err := os.Lstat(filepath.Join(sb.root, "h"))
			must(t, err)
			if fi.Mode()&os.ModeSymlink == 0 {
				t.Fatalf("h is %v, want the symlink itself linked", fi.Mode())
			}
		}},
		{"whiteout .wh.", func(sb *sandbox) [][]byte { return [][]byte{tarLayer(t, file(".wh.", ""))} }, wantErr(ErrUnsafeEntry)},
		{"whiteout .wh..", func(sb *sandbox) [][]byte { return [][]byte{tarLayer(t, file("a/.wh..", ""))} }, wantErr(ErrUnsafeEntry)},
		{"whiteout .wh...", func(sb *sandbox) [][]byte { return [][]byte{tarLayer(t, file(".wh...", ""))} }, wantErr(ErrUnsafeEntry)},
		{"whiteout of a symlink to a host dir", func(sb *sandbox) [][]byte {
			return [][]byte{
				tarLayer(t, symlink("link", filepath.Join(sb.base, "victimdir"))),
				tarLayer(t, file(".wh.link", "")),
			}
		}, func(t *testing.T, sb *sandbox, err error) {
			if err != nil {
				t.Fatal(err)
			}
			if _, err := os.Lstat(filepath.Join(sb.root, "link")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("link still there: %v", err)
			}
		}},
		{"whiteout through a symlinked parent", func(sb *sandbox) [][]byte {
			return [][]byte{
				tarLayer(t, symlink("p", filepath.Join(sb.base, "victimdir"))),
				tarLayer(t, file("p/.wh.canary", "")),
			}
		}, func(t *testing.T, sb *sandbox, err error) {
			if err != nil {
				t.Fatal(err)
			}
		}},
		{"opaque dir under a symlink to the host", func(sb *sandbox) [][]byte {
			return [][]byte{
				tarLayer(t, symlink("p", sb.base)),
				tarLayer(t, file("p/.wh..wh..opq", "")),
			}
		}, func(t *testing.T, sb *sandbox, err error) {
			if err != nil {
				t.Fatal(err)
			}
		}},
		{"file turned into a directory", func(sb *sandbox) [][]byte {
			return [][]byte{tarLayer(t, file("x", "file")), tarLayer(t, dir("x"), file("x/y", "y"))}
		}, stays("x/y", "y")},
		{"directory turned into a file", func(sb *sandbox) [][]byte {
			return [][]byte{tarLayer(t, dir("x"), file("x/y", "y")), tarLayer(t, file("x", "file"))}
		}, stays("x", "file")},
		{"huge entry beyond the cap", func(sb *sandbox) [][]byte {
			return [][]byte{tarLayer(t, ent{name: "big", typ: tar.TypeReg, size: 2 << 20, mode: 0o644})}
		}, func(t *testing.T, sb *sandbox, err error) {
			wantErr(ErrTooLarge)(t, sb, err)
			if _, err := os.Lstat(filepath.Join(sb.root, "big")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("big was created: %v", err)
			}
		}},
		{"device numbers out of range", func(sb *sandbox) [][]byte {
			return [][]byte{tarLayer(t, ent{name: "dev", typ: tar.TypeChar, mode: 0o600, dev: [2]int64{1 << 20, 1}})}
		}, func(t *testing.T, sb *sandbox, err error) {
			if os.Geteuid() == 0 {
				wantErr(ErrUnsafeEntry)(t, sb, err)
			}
		}},
	}
	for _, fallback := range []bool{false, true} {
		for _, tc := range cases {
			name := tc.name
			if fallback {
				name += " (pathrs-lite)"
			}
			t.Run(name, func(t *testing.T) {
				sb := newSandbox(t)
				sb.noOpenat2 = fallback
				err := sb.apply(t, 1<<20, tc.layers(sb)...)
				tc.check(t, sb, err)
				sb.checkCanaries(t)
			})
		}
	}
}

func TestExtractSemantics(t *testing.T) {
	sb := newSandbox(t)
	suid := file("bin/su", "su")
	suid.mode = 0o4755
	sticky := dir("tmp")
	sticky.mode = 0o1777
	owned := file("home/u/f", "f")
	owned.uid, owned.gid = 1234, 5678
	xattr := file("x", "x")
	xattr.pax = map[string]string{"SCHILY.xattr.user.cove": "yes", "SCHILY.xattr.trusted.evil": "no"}
	old := dir("old")
	old.mtim = time.Unix(1000000000, 0)
	ro := dir("ro")
	ro.mode = 0o555
	l1 := tarLayer(t,
		dir("usr"), dir("usr/lib64"), symlink("lib64", "/usr/lib64"), symlink("rel", "../../x"),
		suid, sticky, owned, xattr, old, file("old/f", "f"), ro, file("ro/f", "in read-only dir"),
		dir("d"), file("d/a", "a"), file("d/b", "b"), dir("e"), file("e/a", "a"),
		file("keep", "keep"), hardlink("keeplink", "keep"), file("gone", "gone"),
		ent{name: "fifo", typ: tar.TypeFifo, mode: 0o640},
		ent{name: "null", typ: tar.TypeChar, mode: 0o666, dev: [2]int64{1, 3}},
	)
	l2 := tarLayer(t,
		file("d/c", "c"), file("d/.wh..wh..opq", ""), // opaque applies regardless of order
		file("e/.wh.a", ""), file("e/a2", "a2"),
		file(".wh.keep", ""), file(".wh.gone", ""),
		file("same", "same"), file(".wh.same", ""), // a whiteout never hides its own layer
	)
	if err := sb.apply(t, DefaultMaxSize, l1, l2); err != nil {
		t.Fatal(err)
	}
	sb.checkCanaries(t)
	r := sb.root
	if got, _ := os.Readlink(filepath.Join(r, "lib64")); got != "/usr/lib64" {
		t.Errorf("lib64 -> %q", got)
	}
	if got, _ := os.Readlink(filepath.Join(r, "rel")); got != "../../x" {
		t.Errorf("rel -> %q", got)
	}
	names := func(d string) string {
		es, _ := os.ReadDir(filepath.Join(r, d))
		var n []string
		for _, e := range es {
			n = append(n, e.Name())
		}
		return strings.Join(n, ",")
	}
	if got := names("d"); got != "c" {
		t.Errorf("opaque d holds %s, want c", got)
	}
	if got := names("e"); got != "a2" {
		t.Errorf("e holds %s, want a2", got)
	}
	if got := readFile(t, filepath.Join(r, "keeplink")); got != "keep" {
		t.Errorf("hardlink to a whited-out file: %q", got)
	}
	for _, gone := range []string{"keep", "gone"} {
		if _, err := os.Lstat(filepath.Join(r, gone)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s survived its whiteout", gone)
		}
	}
	if got := readFile(t, filepath.Join(r, "same")); got != "same" {
		t.Errorf("same-layer whiteout removed a file")
	}
	if got := readFile(t, filepath.Join(r, "ro/f")); got != "in read-only dir" {
		t.Errorf("ro/f = %q", got)
	}
	mode := func(p string) os.FileMode {
		fi, err := os.Lstat(filepath.Join(r, p))
		must(t, err)
		return fi.Mode()
	}
	if m := mode("bin/su"); m&os.ModeSetuid == 0 || m.Perm() != 0o755 {
		t.Errorf("bin/su mode %v, want setuid 0755", m)
	}
	if m := mode("tmp"); m&os.ModeSticky == 0 || m.Perm() != 0o777 {
		t.Errorf("tmp mode %v, want sticky 0777", m)
	}
	if m := mode("ro"); m.Perm() != 0o555 {
		t.Errorf("ro mode %v, want 0555", m)
	}
	if m := mode("fifo"); m&os.ModeNamedPipe == 0 || m.Perm() != 0o640 {
		t.Errorf("fifo mode %v", m)
	}
	fi, _ := os.Lstat(filepath.Join(r, "old"))
	if !fi.ModTime().Equal(time.Unix(1000000000, 0)) {
		t.Errorf("old mtime %v, want 2001-09-09", fi.ModTime())
	}
	fi, _ = os.Lstat(filepath.Join(r, "old/f"))
	if !fi.ModTime().Equal(time.Unix(1700000000, 0)) {
		t.Errorf("old/f mtime %v", fi.ModTime())
	}
	buf := make([]byte, 16)
	if n, err := unix.Getxattr(filepath.Join(r, "x"), "user.cove", buf); err != nil || string(buf[:n]) != "yes" {
		t.Errorf("user.cove xattr: %q %v", buf[:n], err)
	}
	if _, err := unix.Getxattr(filepath.Join(r, "x"), "trusted.evil", buf); err == nil {
		t.Errorf("trusted.evil xattr was set")
	}
	var st unix.Stat_t
	must(t, unix.Lstat(filepath.Join(r, "home/u/f"), &st))
	if os.Geteuid() != 0 {
		// Unprivileged: what we cannot own stays ours and is counted.
		if int(st.Uid) != os.Geteuid() {
			t.Errorf("home/u/f owned by %d, want us (%d)", st.Uid, os.Geteuid())
		}
		if sb.stats.DroppedOwner == 0 || sb.stats.SkippedDev != 1 {
			t.Errorf("stats %+v: want dropped owners counted and the one device skipped", sb.stats)
		}
		if _, err := os.Lstat(filepath.Join(r, "null")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a device node was created unprivileged: %v", err)
		}
	} else {
		if st.Uid != 1234 || st.Gid != 5678 {
			t.Errorf("owner %d:%d, want 1234:5678", st.Uid, st.Gid)
		}
		must(t, unix.Lstat(filepath.Join(r, "null"), &st))
		if st.Mode&unix.S_IFMT != unix.S_IFCHR || unix.Major(st.Rdev) != 1 || unix.Minor(st.Rdev) != 3 {
			t.Errorf("null is not char 1:3: mode %o rdev %d", st.Mode, st.Rdev)
		}
	}
}

func TestExtractSparseStaysSparse(t *testing.T) {
	sb := newSandbox(t)
	const size = 8 << 20
	l := tarLayer(t, ent{name: "zeros", typ: tar.TypeReg, body: "head", size: size, mode: 0o644})
	must(t, sb.apply(t, DefaultMaxSize, l))
	var st unix.Stat_t
	must(t, unix.Stat(filepath.Join(sb.root, "zeros"), &st))
	if st.Size != size {
		t.Fatalf("size %d, want %d", st.Size, size)
	}
	if used := st.Blocks * 512; used > 1<<20 {
		t.Fatalf("an 8 MiB file of zeroes takes %d bytes on disk", used)
	}
	b := readFile(t, filepath.Join(sb.root, "zeros"))
	if !strings.HasPrefix(b, "head") || strings.Trim(b[4:], "\x00") != "" {
		t.Fatal("content changed")
	}
}

func TestApplyCompressedChecksDiffID(t *testing.T) {
	l := tarLayer(t, file("a", "a"))
	sum := sha256.Sum256(l)
	good := v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}
	bad := v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("0", 64)}

	sb := newSandbox(t)
	ext, err := newExtractor(sb.root, 0)
	must(t, err)
	defer ext.Close()
	must(t, ext.applyCompressed(context.Background(), bytes.NewReader(l), good))

	// Trailing bytes after the tar end are part of the DiffID.
	err = ext.applyCompressed(context.Background(), bytes.NewReader(append(l, "junk"...)), good)
	var de *DigestError
	if !errors.As(err, &de) || de.Want != good {
		t.Fatalf("with trailing junk: %v, want a DigestError", err)
	}
	err = ext.applyCompressed(context.Background(), bytes.NewReader(l), bad)
	if !errors.As(err, &de) || de.Got != good {
		t.Fatalf("wrong diffID: %v, want a DigestError naming %s", err, good)
	}
}

// TestCloneLeavesTheBaseAlone applies layers on a clone of a flattened
// tree: the base must keep every file, mode and time, whatever the new
// layer replaces, removes or writes into.
func TestCloneLeavesTheBaseAlone(t *testing.T) {
	base := newSandbox(t)
	ro := dir("ro")
	ro.mode = 0o555
	old := dir("old")
	old.mtim = time.Unix(1000000000, 0)
	must(t, base.apply(t, DefaultMaxSize, tarLayer(t,
		file("x", "base x"), file("y", "base y"), hardlink("xl", "x"),
		ro, file("ro/f", "base ro/f"), old, file("old/f", "f"),
	)))
	before := describeTree(t, base.root)

	derived := newSandbox(t)
	ext, err := newExtractor(derived.root, 0)
	must(t, err)
	defer ext.Close()
	must(t, ext.cloneInto(base.root))
	must(t, ext.applyLayer(bytes.NewReader(tarLayer(t,
		file("x", "derived x"), file(".wh.y", ""), file("ro/g", "new in ro"), file("ro/f", "derived ro/f"),
	))))
	must(t, ext.finish())

	if after := describeTree(t, base.root); len(after) != len(before) {
		t.Fatalf("the base changed: %v -> %v", before, after)
	} else {
		for p, d := range before {
			if after[p] != d {
				t.Errorf("base %s changed: %s -> %s", p, d, after[p])
			}
		}
	}
	r := derived.root
	for p, want := range map[string]string{"x": "derived x", "xl": "base x", "ro/g": "new in ro", "ro/f": "derived ro/f", "old/f": "f"} {
		if got := readFile(t, filepath.Join(r, p)); got != want {
			t.Errorf("derived %s = %q, want %q", p, got, want)
		}
	}
	if _, err := os.Lstat(filepath.Join(r, "y")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("y survived its whiteout in the derived tree")
	}
	fi, err := os.Stat(filepath.Join(r, "ro"))
	must(t, err)
	if fi.Mode().Perm() != 0o555 {
		t.Errorf("derived ro mode %v, want 0555", fi.Mode().Perm())
	}
	fi, err = os.Stat(filepath.Join(r, "old"))
	must(t, err)
	if !fi.ModTime().Equal(time.Unix(1000000000, 0)) {
		t.Errorf("derived old mtime %v", fi.ModTime())
	}
}
