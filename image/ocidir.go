package image

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

const refNameAnnotation = "org.opencontainers.image.ref.name"

// ociImage picks one image out of an OCI image layout directory: the
// manifest whose ref.name annotation is tag, or the only one there is.
func ociImage(dir, tag string, platform v1.Platform) (v1.Image, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	var picked []v1.Descriptor
	var names []string
	for _, d := range im.Manifests {
		n := d.Annotations[refNameAnnotation]
		names = append(names, n)
		if tag == "" || n == tag || strings.HasSuffix(n, ":"+tag) {
			picked = append(picked, d)
		}
	}
	switch {
	case len(picked) == 0 && tag != "":
		return nil, fmt.Errorf("OCI layout %s has no image tagged %q (it has %q)", dir, tag, names)
	case len(picked) == 0:
		return nil, fmt.Errorf("OCI layout %s holds no image", dir)
	case len(picked) > 1:
		return nil, fmt.Errorf("OCI layout %s holds %d images; name one as oci:%s:TAG (tags: %q)", dir, len(picked), dir, names)
	}
	return imageFromDescriptor(idx, picked[0], platform)
}

// imageFromDescriptor returns the image d names, descending through nested
// indexes to the one for the platform.
func imageFromDescriptor(idx v1.ImageIndex, d v1.Descriptor, platform v1.Platform) (v1.Image, error) {
	if !d.MediaType.IsIndex() {
		return idx.Image(d.Digest)
	}
	child, err := idx.ImageIndex(d.Digest)
	if err != nil {
		return nil, err
	}
	cm, err := child.IndexManifest()
	if err != nil {
		return nil, err
	}
	var have []string
	for _, c := range cm.Manifests {
		p := v1.Platform{OS: "linux", Architecture: "amd64"}
		if c.Platform != nil {
			p = *c.Platform
		}
		have = append(have, p.String())
		if p.OS == platform.OS && p.Architecture == platform.Architecture &&
			(platform.Variant == "" || p.Variant == platform.Variant) {
			return imageFromDescriptor(child, c, platform)
		}
	}
	return nil, fmt.Errorf("no image for %s in the index (it has %s); choose one with --platform", platform, strings.Join(have, ", "))
}

// Compiled on first use: {32,128} makes a large program, and every cove
// process (a container's init too) would pay for it at start.
var blobName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^blobs/[a-z0-9]+/[a-f0-9]{32,128}$`) })

// ociArchiveImage unpacks the layout files of an oci-archive (a tar of an
// OCI layout) into a private temporary directory and reads it as one.
// Only the layout's own files are taken, as plain files: nothing in the
// archive can place anything else anywhere.
func ociArchiveImage(ctx context.Context, file, tag string, o *options) (v1.Image, func(), error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, nil, fmt.Errorf("oci-archive: %w", err)
	}
	defer f.Close()
	tmp, err := os.MkdirTemp(o.tmpDir, "oci-archive-")
	if err != nil {
		return nil, nil, fmt.Errorf("oci-archive: %w", err)
	}
	cleanup := func() { os.RemoveAll(tmp) }
	if err := os.MkdirAll(filepath.Join(tmp, "blobs"), 0o700); err != nil {
		cleanup()
		return nil, nil, err
	}
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			cleanup()
			return nil, nil, fmt.Errorf("oci-archive %s: %w", file, err)
		}
		if ctx.Err() != nil {
			cleanup()
			return nil, nil, ctx.Err()
		}
		n := strings.TrimPrefix(filepath.Clean("/"+hdr.Name), "/")
		if hdr.Typeflag != tar.TypeReg || !(n == "index.json" || n == "oci-layout" || blobName().MatchString(n)) {
			continue
		}
		dst := filepath.Join(tmp, n)
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			cleanup()
			return nil, nil, err
		}
		out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			cleanup()
			return nil, nil, err
		}
		_, err = io.Copy(out, tr)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			cleanup()
			return nil, nil, fmt.Errorf("oci-archive %s: %w", file, err)
		}
	}
	img, err := ociImage(tmp, tag, o.platform)
	if err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("oci-archive %s: %w", file, err)
	}
	return img, cleanup, nil
}
