package image

import (
	"context"
	"errors"
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Import stores an image made on this machine (by cove build) and names it
// ref, as Pull does for one from a registry: it is flattened safely into a
// rootfs of its own, starting as a hardlinked copy of the longest stored
// image its layers extend, so that only layers beyond that are read from
// img. A ref with no registry (myapp:dev) is stored as Docker would name
// it and found again by Get under the same short name.
func (s *Store) Import(ctx context.Context, img v1.Image, ref string, opts ...Option) (stored *Image, err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("store %s: %w", ref, err)
		}
	}()
	o, err := makeOptions(opts)
	if err != nil {
		return nil, err
	}
	o.anyBase = true
	src, err := ParseReference(ref)
	if err != nil {
		return nil, err
	}
	pulls, err := s.sharedLock(ctx, "pulls")
	if err != nil {
		return nil, err
	}
	defer pulls.Unlock()
	digest, err := img.Digest()
	if err != nil {
		return nil, err
	}
	stored, err = s.byDigest(digest)
	if errors.Is(err, ErrNotFound) {
		stored, err = s.flattenOnce(ctx, img, digest, o)
	}
	if err != nil {
		return nil, err
	}
	if err := s.updateRefs(ctx, func(refs map[string]string) { refs[src.String()] = digest.String() }); err != nil {
		return nil, err
	}
	s.releaseBlobs(pulls, stored)
	return stored, nil
}
