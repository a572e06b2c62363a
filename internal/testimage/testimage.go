// Package testimage builds small, real OCI images for tests: Debian's
// busybox-static binary with its applet links, and layered images that
// exercise whiteouts, opaque directories, hardlinks and symlinks.
package testimage

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/compression"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// BusyboxPath is where Debian's busybox-static package puts the binary.
const BusyboxPath = "/bin/busybox"

// Entry is one file in a hand-built layer.
type Entry struct {
	Name     string
	Type     byte // tar.TypeReg, TypeDir, TypeSymlink, TypeLink, …
	Body     []byte
	Link     string
	Mode     int64
	UID, GID int
	// Major and Minor are a device node's numbers (tar.TypeChar,
	// tar.TypeBlock).
	Major, Minor int64
	// Xattrs are the entry's extended attributes (PAX SCHILY.xattr.).
	Xattrs map[string]string
}

// Layer builds a gzip-compressed layer holding entries, in that order.
func Layer(entries ...Entry) (v1.Layer, error) {
	return layer(nil, entries)
}

// ZstdLayer is Layer compressed with zstd.
func ZstdLayer(entries ...Entry) (v1.Layer, error) {
	return layer([]tarball.LayerOption{tarball.WithCompression(compression.ZStd), tarball.WithMediaType(types.OCILayerZStd)}, entries)
}

func layer(opts []tarball.LayerOption, entries []Entry) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mtime := time.Unix(1700000000, 0)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.Name, Typeflag: e.Type, Linkname: e.Link, Mode: e.Mode,
			Uid: e.UID, Gid: e.GID, ModTime: mtime, Format: tar.FormatPAX, Devmajor: e.Major, Devminor: e.Minor}
		if e.Type == tar.TypeReg {
			hdr.Size = int64(len(e.Body))
		}
		for k, v := range e.Xattrs {
			if hdr.PAXRecords == nil {
				hdr.PAXRecords = map[string]string{}
			}
			hdr.PAXRecords["SCHILY.xattr."+k] = v
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.Body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, append([]tarball.LayerOption{tarball.WithMediaType(types.OCILayer)}, opts...)...)
}

// Dir, File, Symlink and Hardlink are Entry shorthands.
func Dir(name string, mode int64) Entry { return Entry{Name: name, Type: tar.TypeDir, Mode: mode} }

// File is a regular file entry.
func File(name, body string, mode int64) Entry {
	return Entry{Name: name, Type: tar.TypeReg, Body: []byte(body), Mode: mode}
}

// Symlink is a symlink entry, its target stored as given.
func Symlink(name, target string) Entry {
	return Entry{Name: name, Type: tar.TypeSymlink, Link: target, Mode: 0o777}
}

// Hardlink is a hardlink entry to target.
func Hardlink(name, target string) Entry {
	return Entry{Name: name, Type: tar.TypeLink, Link: target, Mode: 0o644}
}

// BusyboxLayer is /bin/busybox from the host plus a symlink for each applet.
func BusyboxLayer() (v1.Layer, error) {
	bin, err := os.ReadFile(BusyboxPath)
	if err != nil {
		return nil, fmt.Errorf("%w (apt-get install busybox-static)", err)
	}
	out, err := exec.Command(BusyboxPath, "--list-full").Output()
	if err != nil {
		return nil, fmt.Errorf("busybox --list-full: %w", err)
	}
	entries := []Entry{Dir("bin", 0o755), Dir("sbin", 0o755), Dir("usr", 0o755), Dir("usr/bin", 0o755),
		Dir("usr/sbin", 0o755), Dir("etc", 0o755), Dir("tmp", 0o1777), Dir("root", 0o700),
		{Name: "bin/busybox", Type: tar.TypeReg, Body: bin, Mode: 0o755},
		File("etc/passwd", "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n", 0o644),
		File("etc/group", "root:x:0:\nnobody:x:65534:\n", 0o644),
	}
	for _, p := range strings.Fields(string(out)) {
		if p == "bin/busybox" {
			continue
		}
		entries = append(entries, Symlink(p, "/bin/busybox"))
	}
	return Layer(entries...)
}

// Image stacks layers into an image for linux/arch with a shell as command.
func Image(arch string, layers ...v1.Layer) (v1.Image, error) {
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layers...)
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", arch
	cfg.Created = v1.Time{Time: time.Unix(1700000000, 0).UTC()}
	cfg.Config.Cmd = []string{"/bin/sh"}
	cfg.Config.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	return mutate.ConfigFile(img, cfg)
}

// Busybox is a one-layer busybox image for amd64.
func Busybox() (v1.Image, error) {
	l, err := BusyboxLayer()
	if err != nil {
		return nil, err
	}
	return Image("amd64", l)
}

// Layered is busybox plus two layers that exercise the OCI layer rules:
// whiteouts, an opaque directory, a hardlink, setuid and sticky modes,
// ownership, and symlinks absolute and relative.
func Layered() (v1.Image, error) {
	base, err := BusyboxLayer()
	if err != nil {
		return nil, err
	}
	owned := File("srv/data/owned", "owned by 1000:1000\n", 0o640)
	owned.UID, owned.GID = 1000, 1000
	l2, err := Layer(
		Dir("srv", 0o755), Dir("srv/data", 0o755), owned,
		File("srv/data/old", "old\n", 0o644), Dir("srv/cfg", 0o755), File("srv/cfg/a", "a\n", 0o644),
		File("srv/cfg/b", "b\n", 0o644), File("srv/remove-me", "x\n", 0o644),
		File("usr/bin/suid-tool", "#!/bin/sh\n", 0o4755), Dir("srv/sticky", 0o1777),
		Dir("usr/lib64", 0o755), File("usr/lib64/ld.so", "loader\n", 0o755),
		Symlink("lib64", "/usr/lib64"), Symlink("srv/up", "../bin/busybox"),
	)
	if err != nil {
		return nil, err
	}
	l3, err := Layer(
		File("srv/.wh.remove-me", "", 0o644),
		Dir("srv/cfg", 0o755), File("srv/cfg/.wh..wh..opq", "", 0o644), File("srv/cfg/c", "c\n", 0o644),
		File("srv/data/old", "new\n", 0o600), Hardlink("srv/data/link", "srv/data/old"),
		File("bin/.wh.false", "", 0o644),
	)
	if err != nil {
		return nil, err
	}
	return Image("amd64", base, l2, l3)
}

// Siblings are two images sharing their first two layers (busybox, then
// 2 MiB of incompressible data and a few files, so that each weighs
// enough for cove to keep a snapshot of it) and differing in their third:
// a's edits and removes files of the second layer, b's edits others,
// empties a directory (opaque) and removes a file from a 0555 one.
func Siblings() (a, b v1.Image, err error) {
	base, err := BusyboxLayer()
	if err != nil {
		return nil, nil, err
	}
	noise := make([]byte, 2<<20)
	rand.NewChaCha8([32]byte{7}).Read(noise)
	owned := File("srv/owned", "owned by 1000:1000\n", 0o640)
	owned.UID, owned.GID = 1000, 1000
	shared, err := Layer(
		Dir("srv", 0o755), Dir("srv/ro", 0o555), File("srv/ro/keep", "keep\n", 0o644),
		File("srv/noise", string(noise), 0o644), File("srv/edit", "v1\n", 0o644),
		Hardlink("srv/edit-link", "srv/edit"), File("srv/gone", "x\n", 0o644), owned,
		Dir("srv/opq", 0o755), File("srv/opq/old", "old\n", 0o644),
	)
	if err != nil {
		return nil, nil, err
	}
	la, err := Layer(
		File("srv/edit", "a\n", 0o600), File("srv/.wh.gone", "", 0o644), File("srv/a-only", "a\n", 0o644),
	)
	if err != nil {
		return nil, nil, err
	}
	lb, err := Layer(
		File("srv/edit", "b\n", 0o644), File("srv/ro/.wh.keep", "", 0o644),
		Dir("srv/opq", 0o755), File("srv/opq/.wh..wh..opq", "", 0o644), File("srv/opq/new", "new\n", 0o644),
		File("srv/b-only", "b\n", 0o644),
	)
	if err != nil {
		return nil, nil, err
	}
	if a, err = Image("amd64", base, shared, la); err != nil {
		return nil, nil, err
	}
	b, err = Image("amd64", base, shared, lb)
	return a, b, err
}
