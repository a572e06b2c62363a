package image

import (
	"context"
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// OpenImage resolves ref (as Pull takes it) to the image it names for the
// platform, without storing it: its layers are read lazily (from the
// registry, under ctx) when asked for. Call the returned function when
// done with the image.
func OpenImage(ctx context.Context, ref string, opts ...Option) (v1.Image, func(), error) {
	o, err := makeOptions(opts)
	if err != nil {
		return nil, nil, err
	}
	src, err := ParseReference(ref)
	if err != nil {
		return nil, nil, err
	}
	img, cleanup, err := src.image(ctx, o)
	if err != nil {
		return nil, nil, fmt.Errorf("open %s: %w", ref, err)
	}
	return img, cleanup, nil
}

// Push writes img to the registry reference ref, with the keychain and
// transport of opts (blobs the registry has are not sent again; ones in
// another repository of it are mounted).
func Push(ctx context.Context, img v1.Image, ref string, opts ...Option) error {
	o, err := makeOptions(opts)
	if err != nil {
		return err
	}
	src, err := ParseReference(ref)
	if err != nil {
		return err
	}
	if src.Transport != TransportRegistry {
		return fmt.Errorf("push %s: not a registry reference", ref)
	}
	if err := remote.Write(src.Ref, img, remoteOptions(ctx, o)...); err != nil {
		return fmt.Errorf("push %s: %w", ref, ExplainRegistryError(err))
	}
	return nil
}
