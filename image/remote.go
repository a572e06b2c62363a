package image

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

func remoteOptions(ctx context.Context, o *options) []remote.Option {
	opts := []remote.Option{
		remote.WithContext(ctx),
		remote.WithAuthFromKeychain(o.keychain),
		remote.WithPlatform(o.platform),
		remote.WithUserAgent("cove"),
	}
	if o.transport != nil {
		opts = append(opts, remote.WithTransport(o.transport))
	}
	return opts
}

// remoteImage fetches the manifest (resolving an index for the platform).
// Layers are fetched lazily, later, under the same context.
func remoteImage(ctx context.Context, ref name.Reference, o *options) (v1.Image, error) {
	desc, err := remote.Get(ref, remoteOptions(ctx, o)...)
	if err != nil {
		return nil, ExplainRegistryError(err)
	}
	img, err := desc.Image()
	if err != nil {
		return nil, fmt.Errorf("%s for %s: %w", ref, o.platform, err)
	}
	return img, nil
}

// explainRegistryError adds what the user can do to the registry's answer.
func ExplainRegistryError(err error) error {
	var te *transport.Error
	var dnsErr *net.DNSError
	var opErr *net.OpError
	switch {
	case errors.As(err, &dnsErr):
		return fmt.Errorf("%w: cannot resolve the registry's name; check the reference and your network", err)
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return fmt.Errorf("%w: cannot reach the registry; check that it runs and that the address is right", err)
	case !errors.As(err, &te):
		return err
	}
	switch te.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		return fmt.Errorf("%w: the registry refused our credentials; log in (docker login / podman login write ~/.docker/config.json) or check the name", err)
	case http.StatusNotFound:
		return fmt.Errorf("%w: no such image or tag in the registry; check the name", err)
	}
	if te.StatusCode >= 500 {
		return fmt.Errorf("%w: the registry failed; retry later", err)
	}
	return err
}
