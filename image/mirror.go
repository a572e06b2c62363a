package image

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Mirrors say, for a registry (as a reference names it: docker.io,
// ghcr.io, 127.0.0.1:5000), where else the same repositories are served:
// each a host[:port], with a path the repositories go under if the mirror
// keeps them there (mirror.example/dockerhub). A pull asks them first, in
// order, then the registry itself, as containers' registries.conf mirrors
// and Docker's registry-mirrors do. The image is the same whichever
// answers: it is named, stored and verified by the reference's name and
// digests. Registries on localhost or 127.0.0.1 are plain HTTP, as for a
// reference.
type Mirrors map[string][]string

// CheckMirrors says what is wrong with m's registries and locations, if
// anything.
func CheckMirrors(m Mirrors) error {
	for reg, locs := range m {
		if _, err := name.NewRegistry(reg); err != nil || strings.ContainsAny(reg, "/") {
			return fmt.Errorf("registry mirrors: %q is not a registry's name (as docker.io or ghcr.io)", reg)
		}
		for _, loc := range locs {
			if _, err := mirrorRepo(loc, "library/x"); err != nil || strings.Contains(loc, "://") {
				return fmt.Errorf("registry mirrors of %s: %q is not a mirror's host[:port][/path] (no scheme: localhost and 127.0.0.1 are plain HTTP, others HTTPS)", reg, loc)
			}
		}
	}
	return nil
}

// SetMirrors makes the store's pulls from a registry ask m's mirrors
// first (see Mirrors). Call it once, after Open.
func (s *Store) SetMirrors(m Mirrors) { s.mirrors = m }

// mirrorsFor are the mirrors of ref's registry.
func (m Mirrors) mirrorsFor(ref name.Reference) []string {
	want := ref.Context().RegistryStr()
	for reg, locs := range m {
		if r, err := name.NewRegistry(reg); err == nil && r.RegistryStr() == want {
			return locs
		}
	}
	return nil
}

// mirrorRepo is the repository repo at the mirror loc.
func mirrorRepo(loc, repo string) (name.Repository, error) {
	return name.NewRepository(strings.TrimSuffix(loc, "/") + "/" + repo)
}

// remoteImageMirrored fetches ref's manifest from its registry's mirrors,
// in order, then from the registry; the layers then come from whichever
// answered. What each mirror said is kept for the error when none did.
func remoteImageMirrored(ctx context.Context, ref name.Reference, o *options) (v1.Image, error) {
	var tried []error
	for _, loc := range o.mirrors.mirrorsFor(ref) {
		repo, err := mirrorRepo(loc, ref.Context().RepositoryStr())
		if err != nil {
			tried = append(tried, fmt.Errorf("mirror %s: %w", loc, err))
			continue
		}
		var at name.Reference = repo.Tag(ref.Identifier())
		if _, ok := ref.(name.Digest); ok {
			at = repo.Digest(ref.Identifier())
		}
		img, err := remoteImage(ctx, at, o)
		if err == nil {
			return img, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		tried = append(tried, fmt.Errorf("mirror %s: %w", loc, err))
	}
	img, err := remoteImage(ctx, ref, o)
	if err != nil && len(tried) > 0 {
		return nil, fmt.Errorf("%w (and its mirrors: %w)", err, errors.Join(tried...))
	}
	return img, err
}
