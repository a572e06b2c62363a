package build

import (
	"archive/tar"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestWriteLayerFromOverlayUpper makes changes through a real overlayfs
// mount and checks that the upper directory becomes an OCI layer with OCI
// whiteouts: a deleted file is .wh.NAME, a directory removed and made again
// is opaque (.wh..wh..opq), and overlay's xattrs are not carried.
func TestWriteLayerFromOverlayUpper(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount overlayfs")
	}
	dir := t.TempDir()
	lower, upper, work, merged := filepath.Join(dir, "lower"), filepath.Join(dir, "upper"), filepath.Join(dir, "work"), filepath.Join(dir, "merged")
	for _, d := range []string{lower + "/etc", lower + "/srv/old", upper, work, merged} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(lower+"/etc/gone", []byte("x"), 0o644)
	os.WriteFile(lower+"/etc/kept", []byte("x"), 0o644)
	os.WriteFile(lower+"/srv/old/a", []byte("a"), 0o644)
	if err := unix.Mount("overlay", merged, "overlay", 0, "lowerdir="+lower+",upperdir="+upper+",workdir="+work); err != nil {
		t.Skipf("overlayfs: %v", err)
	}
	os.Remove(merged + "/etc/gone")
	os.RemoveAll(merged + "/srv/old")
	os.MkdirAll(merged+"/srv/old", 0o750)
	os.WriteFile(merged+"/srv/old/new", []byte("new\n"), 0o600)
	os.Link(merged+"/srv/old/new", merged+"/srv/old/hard")
	os.Symlink("../etc/kept", merged+"/srv/link")
	if err := unix.Unmount(merged, 0); err != nil {
		t.Fatal(err)
	}

	lf, err := writeLayer(upper, filepath.Join(dir, "layer.tar.gz"), idMap{identity: true, xattrUID: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(lf.Blob)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for k := range hdr.PAXRecords {
			if strings.Contains(k, "overlay") {
				t.Errorf("%s carries overlay's xattr %s", hdr.Name, k)
			}
		}
		e := string(hdr.Typeflag) + " " + hdr.Name
		switch hdr.Typeflag {
		case tar.TypeSymlink, tar.TypeLink:
			e += " -> " + hdr.Linkname
		case tar.TypeReg:
			e += " " + os.FileMode(hdr.Mode).String()
		}
		got = append(got, e)
	}
	want := []string{
		"5 etc/",
		"0 etc/.wh.gone -rw-r--r--",
		"5 srv/",
		"5 srv/old/",
		"0 srv/old/.wh..wh..opq -rw-r--r--",
		"0 srv/old/hard -rw-------",
		"1 srv/old/new -> srv/old/hard",
		"2 srv/link -> ../etc/kept",
	}
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("layer entries:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if lf.Digest == lf.DiffID || lf.Size == 0 {
		t.Errorf("digests: %+v", lf)
	}
	// The same tree gives the same layer.
	again, err := writeLayer(upper, filepath.Join(dir, "again.tar.gz"), idMap{identity: true, xattrUID: -1}, nil)
	if err != nil || again.DiffID != lf.DiffID || again.Digest != lf.Digest {
		t.Errorf("a second layer from the same tree differs: %+v vs %+v (%v)", again, lf, err)
	}
}
