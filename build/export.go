package build

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cove-sh/cove/image"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/match"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Export is one place a build's image goes besides the store
// (cove build --output, --push).
type Export struct {
	// Type is "oci" (an OCI image layout directory at Dest, made or
	// added to), "oci-archive" (that layout as a tar file at Dest),
	// "docker-archive" (a file docker load and podman load take) or
	// "registry" (pushed to the reference Dest).
	Type string
	Dest string
}

// ParseExport reads --output as buildx takes it: type=oci,dest=DIR;
// type=oci-archive,dest=FILE (or type=oci,dest=FILE.tar);
// type=docker,dest=FILE; type=registry,name=REF.
func ParseExport(s string) (Export, error) {
	var e Export
	for _, f := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return e, fmt.Errorf("--output %q: %q is not KEY=VALUE (give type=oci,dest=DIR)", s, f)
		}
		switch k {
		case "type":
			e.Type = v
		case "dest", "name":
			e.Dest = v
		default:
			return e, fmt.Errorf("--output %q: unknown key %q (give type= and dest=)", s, k)
		}
	}
	switch e.Type {
	case "oci":
		if strings.HasSuffix(e.Dest, ".tar") {
			e.Type = "oci-archive"
		}
	case "oci-archive", "registry":
	case "docker", "docker-archive":
		e.Type = "docker-archive"
	case "":
		return e, fmt.Errorf("--output %q: no type= (give type=oci,dest=DIR)", s)
	default:
		return e, fmt.Errorf("--output type=%s is not supported: give oci, oci-archive, docker or registry", e.Type)
	}
	if e.Dest == "" {
		return e, fmt.Errorf("--output %q: no dest= (the directory, file or registry reference to write)", s)
	}
	return e, nil
}

// exportImage is the built image with every layer's blob readable: this
// build's from the step cache, the base image's from where FROM took it
// (the store keeps only its files), pinned to the digest it was built on.
func (b *builder) exportImage(ctx context.Context, st *stage) (v1.Image, func(), error) {
	var baseLayers []v1.Layer
	cleanup := func() {}
	if st.base != nil {
		ref := st.baseRef
		src, err := image.ParseReference(ref)
		if err != nil {
			return nil, nil, err
		}
		if src.Transport == image.TransportRegistry {
			ref = src.Ref.Context().Digest(st.base.Digest.String()).String()
		}
		base, done, err := image.OpenImage(ctx, ref, b.opts.Pull...)
		if err != nil {
			return nil, nil, fmt.Errorf("the base image's layers: %w", err)
		}
		cleanup = done
		if d, err := base.Digest(); err != nil || d != st.base.Digest {
			done()
			return nil, nil, fmt.Errorf("the base image %s is now %s, not the %s this build used: pull it again (cove pull --pull always) and rebuild", st.baseRef, d, st.base.Digest)
		}
		ls, err := base.Layers()
		if err != nil {
			done()
			return nil, nil, err
		}
		for _, l := range ls {
			mt, err := l.MediaType()
			if err != nil {
				done()
				return nil, nil, err
			}
			if mt != types.DockerLayer && mt != types.OCILayer {
				done()
				return nil, nil, fmt.Errorf("the base image has a %s layer: only gzip'd layers can be exported yet", mt)
			}
			baseLayers = append(baseLayers, ociLayer{l})
		}
	}
	img, err := b.assemble(st, baseLayers)
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	return img, cleanup, nil
}

// ociLayer is a base layer as the built image's manifest lists it: gzip'd
// tar, with OCI's media type whatever the base image's manifest said.
type ociLayer struct{ v1.Layer }

func (ociLayer) MediaType() (types.MediaType, error) { return types.OCILayer, nil }

// export writes img where e says.
func (b *builder) export(ctx context.Context, img v1.Image, e Export) error {
	tag := b.opts.Tag
	switch e.Type {
	case "registry":
		return image.Push(ctx, img, e.Dest, b.opts.Pull...)
	case "docker-archive":
		src, err := image.ParseReference(tag)
		if err != nil {
			return err
		}
		return atomicFile(e.Dest, func(f *os.File) error {
			return tarball.Write(src.Ref, img, f)
		})
	case "oci":
		return writeLayout(e.Dest, img, tag)
	case "oci-archive":
		dir, err := os.MkdirTemp(b.tmp, "oci-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		if err := writeLayout(dir, img, tag); err != nil {
			return err
		}
		return atomicFile(e.Dest, func(f *os.File) error { return tarDir(dir, f) })
	}
	return fmt.Errorf("unknown output type %q", e.Type)
}

// refName is what an OCI layout calls the image: its tag, as skopeo and
// cove pull oci:DIR:TAG read it.
func refName(tag string) string {
	if src, err := image.ParseReference(tag); err == nil && src.Ref != nil {
		return src.Ref.Identifier()
	}
	return tag
}

// writeLayout adds img to the OCI layout at dir (made if missing),
// replacing an image of the same ref name there.
func writeLayout(dir string, img v1.Image, tag string) error {
	p, err := layout.FromPath(dir)
	if err != nil {
		if entries, rerr := os.ReadDir(dir); rerr == nil && len(entries) > 0 {
			return fmt.Errorf("%s is neither empty nor an OCI layout: give a new directory", dir)
		}
		if p, err = layout.Write(dir, empty.Index); err != nil {
			return err
		}
	}
	const refAnnotation = "org.opencontainers.image.ref.name"
	name := refName(tag)
	return p.ReplaceImage(img, match.Annotation(refAnnotation, name), layout.WithAnnotations(map[string]string{refAnnotation: name}))
}

// atomicFile writes path through a temporary file renamed into place, so
// a failed export leaves no half file.
func atomicFile(path string, write func(*os.File) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".cove-export-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// tarDir writes dir's files (a layout: directories and regular files) as
// a tar, in name order.
func tarDir(dir string, w io.Writer) error {
	tw := tar.NewWriter(w)
	var walk func(rel string) error
	walk = func(rel string) error {
		names, err := sortedNames(os.Open(filepath.Join(dir, rel)))
		if err != nil {
			return err
		}
		for _, n := range names {
			r := filepath.Join(rel, n)
			fi, err := os.Lstat(filepath.Join(dir, r))
			if err != nil {
				return err
			}
			hdr, err := tar.FileInfoHeader(fi, "")
			if err != nil {
				return err
			}
			hdr.Name = filepath.ToSlash(r)
			if fi.IsDir() {
				hdr.Name += "/"
			}
			hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			switch {
			case fi.IsDir():
				if err := walk(r); err != nil {
					return err
				}
			case fi.Mode().IsRegular():
				f, err := os.Open(filepath.Join(dir, r))
				if err != nil {
					return err
				}
				_, err = io.Copy(tw, f)
				f.Close()
				if err != nil {
					return err
				}
			default:
				return errors.New("unexpected file in an OCI layout: " + r)
			}
		}
		return nil
	}
	if err := walk(""); err != nil {
		return err
	}
	return tw.Close()
}
