package image

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Transports, named as skopeo names them.
const (
	TransportRegistry      = "docker"
	TransportOCI           = "oci"
	TransportOCIArchive    = "oci-archive"
	TransportDockerArchive = "docker-archive"
)

// Source is a parsed image reference: a registry reference, or a local
// OCI layout, OCI archive or docker-archive file with an optional tag.
type Source struct {
	Transport string
	Ref       name.Reference // registry images
	Path      string         // local transports: absolute path
	Tag       string         // local transports: optional tag or reference
}

// IsLocal says whether ref names an image in a file or directory on this
// machine (oci:, oci-archive:, docker-archive:) rather than a registry's.
// What a project names (a devcontainer.json's image, its Dockerfile's
// FROM) may be only a registry's: the path could be one of the user's
// private images.
func IsLocal(ref string) bool {
	for _, t := range []string{TransportOCIArchive, TransportOCI, TransportDockerArchive} {
		if strings.HasPrefix(ref, t+":") {
			return true
		}
	}
	return false
}

// ParseReference parses REF as the command line takes it (README: Use): anything
// name.ParseReference takes (defaulting to docker.io/library), or
// oci:DIR[:TAG], oci-archive:FILE[:TAG], docker-archive:FILE[:REF].
func ParseReference(ref string) (Source, error) {
	for _, t := range []string{TransportOCIArchive, TransportOCI, TransportDockerArchive} {
		rest, ok := strings.CutPrefix(ref, t+":")
		if !ok {
			continue
		}
		p, tag := splitPathTag(rest)
		if p == "" {
			return Source{}, fmt.Errorf("%q: %s needs a path", ref, t)
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return Source{}, err
		}
		return Source{Transport: t, Path: abs, Tag: tag}, nil
	}
	ref = strings.TrimPrefix(ref, "docker://")
	r, err := name.ParseReference(ref)
	if err != nil {
		return Source{}, fmt.Errorf("parse reference %q: %w", ref, err)
	}
	return Source{Transport: TransportRegistry, Ref: r}, nil
}

// splitPathTag splits "PATH:TAG" at the last colon, unless what follows it
// looks like part of a path; "PATH:name:tag" keeps "name:tag" as the tag.
func splitPathTag(s string) (p, tag string) {
	i := strings.Index(s, ":")
	if i < 0 {
		return s, ""
	}
	if strings.Contains(s[i+1:], "/") && !strings.Contains(s[i+1:], ":") {
		return s, ""
	}
	return s[:i], s[i+1:]
}

// String returns the canonical name under which the store records the
// image: registry references fully qualified (docker.io/library/x:tag),
// local ones as TRANSPORT:ABSPATH[:TAG].
func (s Source) String() string {
	if s.Transport != TransportRegistry {
		if s.Tag == "" {
			return s.Transport + ":" + s.Path
		}
		return s.Transport + ":" + s.Path + ":" + s.Tag
	}
	repo := s.Ref.Context().RepositoryStr()
	reg := s.Ref.Context().RegistryStr()
	if reg == name.DefaultRegistry {
		reg = "docker.io"
	}
	sep := ":"
	if _, ok := s.Ref.(name.Digest); ok {
		sep = "@"
	}
	return reg + "/" + repo + sep + s.Ref.Identifier()
}

// image resolves the source to one image for the platform.
func (s Source) image(ctx context.Context, o *options) (v1.Image, func(), error) {
	switch s.Transport {
	case TransportRegistry:
		img, err := remoteImageMirrored(ctx, s.Ref, o)
		return img, func() {}, err
	case TransportOCI:
		img, err := ociImage(s.Path, s.Tag, o.platform)
		return img, func() {}, err
	case TransportOCIArchive:
		return ociArchiveImage(ctx, s.Path, s.Tag, o)
	case TransportDockerArchive:
		img, err := dockerArchiveImage(s.Path, s.Tag)
		return img, func() {}, err
	}
	return nil, nil, fmt.Errorf("unknown transport %q", s.Transport)
}
