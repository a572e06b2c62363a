package image

import (
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// dockerArchiveImage reads what `docker save` and `podman save` write. With
// several images in the file, ref names the one to take.
func dockerArchiveImage(file, ref string) (v1.Image, error) {
	var tag *name.Tag
	if ref != "" {
		t, err := name.NewTag(ref)
		if err != nil {
			return nil, fmt.Errorf("docker-archive %s: %w", file, err)
		}
		tag = &t
	}
	img, err := tarball.ImageFromPath(file, tag)
	if err != nil {
		return nil, fmt.Errorf("docker-archive %s: %w", file, err)
	}
	return img, nil
}
