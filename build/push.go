package build

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cove-sh/cove/image"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Push sends the stored image named src to the registry reference dest,
// as the same image (the same digest). The store keeps images flattened,
// not their layers, so each layer's blob comes from the build cache in
// cacheDir (a layer cove build made) or from where a stored image with
// that layer came from (a registry or a local layout or archive; for a
// registry, pinned by digest). opts are the registry options (keychain,
// transport).
func Push(ctx context.Context, store *image.Store, cacheDir, src, dest string, opts ...image.Option) (err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("push %s to %s: %w", src, dest, err)
		}
	}()
	img, err := store.Get(src)
	if err != nil {
		return err
	}
	rawCfg, err := os.ReadFile(filepath.Join(store.Dir(), "images", img.Digest.Hex, "config.json"))
	if err != nil {
		return err
	}
	entries, err := store.List()
	if err != nil {
		return err
	}
	// Images with a layer of the build cache were built here: they are
	// read from nowhere else. Any other is copied from where it was
	// pulled, as it is.
	steps := stepBlobs(cacheDir)
	var pulled []image.Entry
	for _, e := range entries {
		if e.Ref != "" && !hasStep(e.Image, steps) {
			pulled = append(pulled, e)
		}
	}
	if !hasStep(img, steps) {
		for _, e := range pulled {
			if e.Image.Digest != img.Digest {
				continue
			}
			orig, done, err := openPinned(ctx, e.Ref, e.Image, opts)
			if err != nil {
				continue
			}
			defer done()
			return image.Push(ctx, orig, dest, opts...)
		}
	}
	// A built image: its manifest is the one cove build wrote (OCI,
	// gzip'd layers with their sizes), its layers from the build cache or
	// from a stored image (its base) that has them.
	if len(img.Sizes) != len(img.Layers) {
		return errors.New("the store does not know its layers' sizes (it was stored by an older cove): build it again")
	}
	core := &pushCore{raw: rawCfg, layers: map[v1.Hash]partial.CompressedLayer{}}
	m := v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1,
		Config: v1.Descriptor{MediaType: types.OCIConfigJSON, Size: int64(len(rawCfg)), Digest: img.Config}}
	opened := map[string]v1.Image{}
	for i, d := range img.Layers {
		m.Layers = append(m.Layers, v1.Descriptor{MediaType: types.OCILayer, Size: img.Sizes[i], Digest: d})
		if e, ok := steps[d]; ok {
			core.layers[d] = &storedLayer{digest: d, diffID: e.Layer.DiffID, size: e.Layer.Size, blob: e.Layer.Blob}
			continue
		}
		l, err := layerFromStored(ctx, pulled, i, d, opened, opts)
		if err != nil {
			return fmt.Errorf("layer %s: %w", d, err)
		}
		core.layers[d] = ociLayer{l}
	}
	if core.manifest, err = json.Marshal(m); err != nil {
		return err
	}
	out, err := partial.CompressedToImage(core)
	if err != nil {
		return err
	}
	if d, err := out.Digest(); err != nil || d != img.Digest {
		return fmt.Errorf("its manifest cannot be made again (digest %s, stored %s): push the image it was pulled from instead", d, img.Digest)
	}
	return image.Push(ctx, out, dest, opts...)
}

// openPinned opens where a stored image came from, by its name (a
// registry name pinned to the stored digest).
func openPinned(ctx context.Context, ref string, img *image.Image, opts []image.Option) (v1.Image, func(), error) {
	src, err := image.ParseReference(ref)
	if err != nil {
		return nil, nil, err
	}
	if src.Transport == image.TransportRegistry {
		ref = src.Ref.Context().Digest(img.Digest.String()).String()
	}
	orig, done, err := image.OpenImage(ctx, ref, opts...)
	if err != nil {
		return nil, nil, err
	}
	if d, err := orig.Digest(); err != nil || d != img.Digest {
		done()
		return nil, nil, fmt.Errorf("%s is now %s, not the stored %s", ref, d, img.Digest)
	}
	return orig, done, nil
}

// layerFromStored finds layer d (at index i) in a stored image that has
// it there and was pulled from somewhere it can be read again.
func layerFromStored(ctx context.Context, entries []image.Entry, i int, d v1.Hash, opened map[string]v1.Image, opts []image.Option) (v1.Layer, error) {
	for _, e := range entries {
		if e.Ref == "" || len(e.Image.Layers) <= i || e.Image.Layers[i] != d {
			continue
		}
		orig, ok := opened[e.Ref]
		if !ok {
			var err error
			orig, _, err = openPinned(ctx, e.Ref, e.Image, opts)
			if err != nil {
				continue // a built image, or a source gone: try another
			}
			opened[e.Ref] = orig
		}
		l, err := orig.LayerByDigest(d)
		if err != nil {
			continue
		}
		mt, err := l.MediaType()
		if err != nil || (mt != types.DockerLayer && mt != types.OCILayer) {
			continue
		}
		return l, nil
	}
	return nil, errors.New("not in the build cache, nor in any stored image cove can read it from again: pull the base image again (cove pull) and rebuild")
}

// hasStep says whether one of img's layers is in the build cache.
func hasStep(img *image.Image, steps map[v1.Hash]cacheEntry) bool {
	for _, d := range img.Layers {
		if _, ok := steps[d]; ok {
			return true
		}
	}
	return false
}

// stepBlobs indexes the build cache's layers by digest.
func stepBlobs(cacheDir string) map[v1.Hash]cacheEntry {
	out := map[v1.Hash]cacheEntry{}
	steps := filepath.Join(cacheDir, "steps")
	dirs, _ := os.ReadDir(steps)
	for _, d := range dirs {
		if strings.HasPrefix(d.Name(), ".") {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(steps, d.Name(), "entry.json"))
		var e cacheEntry
		if err != nil || json.Unmarshal(raw, &e) != nil {
			continue
		}
		e.Layer.Blob = filepath.Join(steps, d.Name(), "layer.tar.gz")
		if _, err := os.Stat(e.Layer.Blob); err == nil {
			out[e.Layer.Digest] = e
		}
	}
	return out
}

// pushCore is a built image as the registry is to get it: the stored
// config, the manifest cove build wrote, and the layers' blobs.
type pushCore struct {
	raw, manifest []byte
	layers        map[v1.Hash]partial.CompressedLayer
}

func (c *pushCore) RawConfigFile() ([]byte, error)      { return c.raw, nil }
func (c *pushCore) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
func (c *pushCore) RawManifest() ([]byte, error)        { return c.manifest, nil }
func (c *pushCore) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	if l, ok := c.layers[h]; ok {
		return l, nil
	}
	return nil, fmt.Errorf("no layer %s", h)
}
