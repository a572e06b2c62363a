package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cove-sh/cove/internal/atomicfile"
	"github.com/cove-sh/cove/internal/userns"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"golang.org/x/sync/errgroup"
)

// PullError is a failed Pull of Ref: a caller that chose Ref for the
// user (a default) can say how to choose another.
type PullError struct {
	Ref string
	Err error
}

func (e *PullError) Error() string { return fmt.Sprintf("pull %s: %v", e.Ref, e.Err) }
func (e *PullError) Unwrap() error { return e.Err }

// Pull makes the image ref names available in the store, flattened, and
// records ref as its name. Layers download in parallel into the blob cache,
// each verified against its digest while it streams; they are applied in
// order, each as soon as it and those below it are in, into a temporary
// directory that is renamed into place only when complete. Two Pulls of one
// image, in one process or several, do the work once.
func Pull(ctx context.Context, s *Store, ref string, opts ...Option) (img *Image, err error) {
	defer func() {
		if err != nil {
			err = &PullError{Ref: ref, Err: err}
		}
	}()
	o, err := makeOptions(opts)
	if err != nil {
		return nil, err
	}
	o.tmpDir = filepath.Join(s.dir, "blobs", "tmp")
	if o.mirrors == nil {
		o.mirrors = s.mirrors
	}
	var mu sync.Mutex
	report := o.progress
	o.progress = func(p Progress) { mu.Lock(); defer mu.Unlock(); report(p) }

	src, err := ParseReference(ref)
	if err != nil {
		return nil, err
	}
	if o.policy != PullAlways {
		if img, err := s.Get(src.String()); err == nil {
			return img, nil
		}
		if o.policy == PullNever {
			return nil, fmt.Errorf("%w, and the pull policy is never", ErrNotFound)
		}
	}
	pulls, err := s.sharedLock(ctx, "pulls")
	if err != nil {
		return nil, err
	}
	defer pulls.Unlock()

	v1img, cleanup, err := src.image(ctx, o)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	digest, err := v1img.Digest()
	if err != nil {
		return nil, err
	}
	img, err = s.byDigest(digest)
	if errors.Is(err, ErrNotFound) {
		img, err = s.flattenOnce(ctx, v1img, digest, o)
	}
	if err != nil {
		return nil, err
	}
	if err := s.updateRefs(ctx, func(refs map[string]string) { refs[src.String()] = digest.String() }); err != nil {
		return nil, err
	}
	s.releaseBlobs(pulls, img)
	return img, nil
}

// flattenOnce flattens under the image's lock; whoever waited for the lock
// finds the image done.
func (s *Store) flattenOnce(ctx context.Context, v1img v1.Image, digest v1.Hash, o *options) (*Image, error) {
	l, err := s.lock(ctx, "image-"+digest.Hex)
	if err != nil {
		return nil, err
	}
	defer l.Unlock()
	if img, err := s.byDigest(digest); err == nil {
		return img, nil
	}
	// What a killed pull of this image left: never mistaken for the image,
	// since only a complete one is renamed to its final name.
	stale, _ := filepath.Glob(filepath.Join(s.dir, "images", ".tmp-"+digest.Hex+"-*"))
	for _, d := range stale {
		if err := userns.RemoveAll(ctx, d); err != nil {
			return nil, err
		}
	}
	return s.flatten(ctx, v1img, digest, o)
}

// flattening is one image on its way into the store: the state its steps
// share, held in one place (as go-containerregistry's writers do) so that
// flatten reads as the algorithm.
type flattening struct {
	s      *Store
	o      *options
	img    *Image
	rawCfg []byte // written as the image's config.json, byte for byte
	layers []v1.Layer
	tmp    string // the image's directory until it is complete and renamed
	ext    applier
	// first is the first layer not already in a base image (or snapshot)
	// the store has; baseSize is that base's size, counted in the image's.
	first    int
	baseSize int64
	// snapAt[i] says whether to keep a snapshot after layer i; snaps are
	// those made, kept on commit (snapshot.go).
	snapAt []bool
	snaps  []takenSnapshot
}

// flatten makes the image whose manifest has digest a directory in the
// store: described, started from a base image where one matches, its own
// layers downloaded ahead and applied in order, then renamed into place only
// when complete, so a killed pull never leaves something taken for the image.
func (s *Store) flatten(ctx context.Context, v1img v1.Image, digest v1.Hash, o *options) (*Image, error) {
	f := &flattening{s: s, o: o}
	if err := f.describe(v1img, digest); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(filepath.Join(s.dir, "images"), ".tmp-"+digest.Hex+"-")
	if err != nil {
		return nil, explainDiskError(err, s.dir)
	}
	f.tmp = tmp
	done := false
	defer func() {
		if !done {
			userns.RemoveAll(ctx, tmp)
		}
	}()
	if err := f.openApplier(ctx); err != nil {
		return nil, err
	}
	defer f.ext.Close()
	if err := f.startFromBase(); err != nil {
		return nil, err
	}
	f.snapAt = planSnapshots(f.img.Sizes, f.first, f.o.snapshotMin)

	// Downloads run ahead, jobs at a time; extraction follows in order. On
	// the way out they are cancelled and waited for, so none outlives the
	// pull.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ready, fetchErr := f.startFetches(ctx)
	defer func() { cancel(); <-fetchErr }()
	if err := f.applyAll(ctx, ready, fetchErr); err != nil {
		return nil, err
	}
	if err := f.commit(ctx, digest); err != nil {
		return nil, err
	}
	done = true
	f.img.RootFS = filepath.Join(s.imageDir(digest), "rootfs")
	return f.img, nil
}

// describe reads what the store records of the image from its config and
// manifest, and refuses an image whose two disagree on its layers.
func (f *flattening) describe(v1img v1.Image, digest v1.Hash) error {
	cfgName, err := v1img.ConfigName()
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	f.rawCfg, err = v1img.RawConfigFile()
	if err != nil {
		return fmt.Errorf("config: %w", ExplainRegistryError(verifyError("config", cfgName, err)))
	}
	cfg, err := v1img.ConfigFile()
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	f.layers, err = v1img.Layers()
	if err != nil {
		return fmt.Errorf("layers: %w", err)
	}
	if len(cfg.RootFS.DiffIDs) != len(f.layers) {
		return fmt.Errorf("the config lists %d layers but the manifest %d: the image is broken", len(cfg.RootFS.DiffIDs), len(f.layers))
	}
	f.img = &Image{
		Digest:   digest,
		Config:   cfgName,
		DiffIDs:  cfg.RootFS.DiffIDs,
		Platform: (&v1.Platform{OS: cfg.OS, Architecture: cfg.Architecture, Variant: cfg.Variant}).String(),
		Created:  cfg.Created.Time,
	}
	for _, l := range f.layers {
		d, err := l.Digest()
		if err != nil {
			return err
		}
		f.img.Layers = append(f.img.Layers, d)
		n, err := l.Size()
		if err != nil {
			return err
		}
		f.img.Sizes = append(f.img.Sizes, n)
	}
	return nil
}

// openApplier makes the rootfs and what writes into it. Rootless with
// subordinate ids, the files get their owners in a user namespace mapped
// through them (internal/userns).
func (f *flattening) openApplier(ctx context.Context) error {
	rootfs := filepath.Join(f.tmp, "rootfs")
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		return explainDiskError(err, f.s.dir)
	}
	ids := userns.Current()
	f.img.Owners = ids.String()
	ext, err := newApplier(ctx, ids, rootfs, f.o.maxSize)
	if err != nil {
		return err
	}
	f.ext = ext
	return nil
}

// startFromBase starts an image built FROM one we have as a copy of it that
// shares its files, so that only its own layers are fetched and applied.
func (f *flattening) startFromBase() error {
	img := f.img
	base := f.s.baseFor(img.DiffIDs, img.Owners, f.o.anyBase)
	if base == nil {
		return nil
	}
	if base.owners == "user" {
		img.Owners = "user" // its base's files are all the user's: so is the image, as said
	}
	if err := f.ext.cloneInto(base.rootfs); err != nil {
		return explainDiskError(err, f.s.dir)
	}
	f.first, f.baseSize = len(base.diffIDs), base.size
	if base.image.Hex != "" {
		img.Base = base.image.String()
	} else {
		img.BaseChain = base.chain.String()
	}
	for i := range f.first {
		f.o.progress(Progress{Layer: img.Layers[i], Index: i, Count: len(f.layers), Phase: PhaseCached})
		f.o.progress(Progress{Layer: img.Layers[i], Index: i, Count: len(f.layers), Phase: PhaseExtracted})
	}
	return nil
}

// startFetches downloads the layers past the base into the blob cache, jobs
// at a time, closing ready[i] when layer i is in. fetchErr gets the first
// error (or nil) once all are done; the caller must cancel ctx and receive
// from it before returning.
func (f *flattening) startFetches(ctx context.Context) (ready []chan struct{}, fetchErr chan error) {
	ready = make([]chan struct{}, len(f.layers))
	for i := range ready {
		ready[i] = make(chan struct{})
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(f.o.jobs)
	fetchErr = make(chan error, 1)
	go func() {
		for i, l := range f.layers[f.first:] {
			i := f.first + i
			g.Go(func() error {
				if err := f.s.fetchBlob(gctx, l, f.img.Layers[i], i, len(f.layers), f.o); err != nil {
					return err
				}
				close(ready[i])
				return nil
			})
		}
		fetchErr <- g.Wait()
	}()
	return ready, fetchErr
}

// applyAll applies the layers as they come in and counts what they made.
func (f *flattening) applyAll(ctx context.Context, ready []chan struct{}, fetchErr chan error) error {
	if err := f.s.applyLayers(ctx, f.ext, f.img, f.first, ready, fetchErr, f.o, f.afterLayer); err != nil {
		return err
	}
	if err := f.ext.finish(); err != nil {
		return explainDiskError(err, f.s.dir)
	}
	if err := f.ext.Close(); err != nil {
		return err
	}
	f.img.Stats = f.ext.counts()
	f.img.Size = f.baseSize + f.img.Stats.Bytes
	f.img.Pulled = time.Now().UTC()
	return nil
}

// commit writes the image's config and record beside its rootfs and renames
// the whole into place: durably, so that after a crash the store has either
// the complete image or a temporary directory the next pull removes.
func (f *flattening) commit(ctx context.Context, digest v1.Hash) error {
	meta, err := json.MarshalIndent(f.img, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(f.tmp, "config.json"), f.rawCfg); err != nil {
		return explainDiskError(err, f.s.dir)
	}
	if err := atomicfile.WriteFile(filepath.Join(f.tmp, "image.json"), meta); err != nil {
		return explainDiskError(err, f.s.dir)
	}
	if err := f.keepSnapshots(ctx); err != nil {
		return err
	}
	if err := syncDir(filepath.Join(f.s.dir, "images")); err != nil {
		return err
	}
	return os.Rename(f.tmp, f.s.imageDir(digest))
}

// releaseBlobs deletes the blobs of img: once their content is in a rootfs
// the store keeps each layer once, not twice. Blobs of a pull that did not
// finish stay, so that the next pull resumes from them. Another pull may be
// about to use one of these blobs, so this happens only when the pulls lock
// can be had alone; otherwise prune drops them later.
func (s *Store) releaseBlobs(pulls *fileLock, img *Image) {
	if !pulls.tryExclusive() {
		return
	}
	for _, l := range img.Layers {
		os.Remove(s.blobPath(l))
	}
}

// lookAhead bounds the decompressed bytes of the next layer held in memory
// while the current one is applied (a few seconds of inflating).
const lookAhead = 32 << 20

// applyLayers applies the layers in order, each once its blob is in. The
// next layer is opened as soon as its blob is there, so that it inflates on
// the second core while the current one is written. after runs once each
// layer is in.
func (s *Store) applyLayers(ctx context.Context, ext applier, img *Image, first int, ready []chan struct{}, fetchErr chan error, o *options, after func(i int) error) error {
	if first == len(img.Layers) {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type opened struct {
		ls  *layerStream
		err error
	}
	// waitBlob waits for blob i or the first download error.
	waitBlob := func(i int) error {
		select {
		case <-ready[i]:
			return nil
		case err := <-fetchErr:
			fetchErr <- err // for the other waiters and the deferred wait
			if err != nil {
				return err
			}
			<-ready[i] // all downloads succeeded
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	open := func(i, maxAhead int) opened {
		if err := waitBlob(i); err != nil {
			return opened{err: err}
		}
		f, err := os.Open(s.blobPath(img.Layers[i]))
		if err != nil {
			return opened{err: err}
		}
		ls, err := openLayer(ctx, f, maxAhead)
		if err != nil {
			f.Close()
			return opened{err: err}
		}
		ls.closeFn = chain(ls.closeFn, func() { f.Close() })
		return opened{ls: ls}
	}
	var next chan opened
	defer func() {
		if next != nil {
			cancel()
			if n := <-next; n.ls != nil {
				n.ls.abort()
			}
		}
	}()
	cur := open(first, readaheadChunk*readaheadChunks)
	for i := first; i < len(img.Layers); i++ {
		if cur.err != nil {
			return fmt.Errorf("layer %s: %w", img.Layers[i], explainDiskError(cur.err, s.dir))
		}
		next = nil
		if i+1 < len(img.Layers) {
			next = make(chan opened, 1)
			go func(i int) { next <- open(i, lookAhead) }(i + 1)
		}
		o.progress(Progress{Layer: img.Layers[i], Index: i, Count: len(img.Layers), Phase: PhaseExtracting})
		if err := ext.apply(cur.ls, img.DiffIDs[i]); err != nil {
			var de *DigestError
			if errors.As(err, &de) {
				// The cached blob matched its digest when written; a
				// mismatch now means the image itself is inconsistent (or
				// the disk lied). Drop the blob so the next pull fetches it.
				os.Remove(s.blobPath(img.Layers[i]))
				return err
			}
			return fmt.Errorf("layer %s: %w", img.Layers[i], explainDiskError(err, s.dir))
		}
		o.progress(Progress{Layer: img.Layers[i], Index: i, Count: len(img.Layers), Phase: PhaseExtracted})
		if err := after(i); err != nil {
			return err
		}
		if next != nil {
			cur = <-next
			next = nil
		}
	}
	return nil
}

func chain(fns ...func()) func() {
	return func() {
		for _, f := range fns {
			f()
		}
	}
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// fetchBlob makes sure the layer's compressed blob is in the cache,
// downloading it with retries on transient errors.
func (s *Store) fetchBlob(ctx context.Context, l v1.Layer, digest v1.Hash, index, count int, o *options) error {
	final := s.blobPath(digest)
	if _, err := os.Stat(final); err == nil {
		o.progress(Progress{Layer: digest, Index: index, Count: count, Phase: PhaseCached})
		return nil
	}
	size, err := l.Size()
	if err != nil {
		return fmt.Errorf("layer %s: %w", digest, err)
	}
	backoff := 500 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err = s.download(ctx, l, digest, size, final, index, count, o)
		if err == nil || attempt == 3 || !transient(err) || ctx.Err() != nil {
			break
		}
		o.progress(Progress{Layer: digest, Index: index, Count: count, Phase: PhaseRetrying, Err: err})
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return ctx.Err()
		}
		backoff *= 3
	}
	var de *DigestError
	if errors.As(err, &de) {
		return err // it names the layer
	}
	if err != nil {
		return fmt.Errorf("layer %s: %w", digest, explainDiskError(err, s.dir))
	}
	o.progress(Progress{Layer: digest, Index: index, Count: count, Phase: PhaseDownloaded, Done: size, Total: size})
	return nil
}

func (s *Store) download(ctx context.Context, l v1.Layer, digest v1.Hash, size int64, final string, index, count int, o *options) error {
	rc, err := l.Compressed()
	if err != nil {
		return ExplainRegistryError(err)
	}
	defer rc.Close()
	tmp, err := os.CreateTemp(filepath.Join(s.dir, "blobs", "tmp"), digest.Hex+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()

	h := sha256.New()
	var n int64
	buf := make([]byte, 1<<20)
	lastReport := time.Now()
	var readErr error
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		m, rerr := rc.Read(buf)
		if m > 0 {
			h.Write(buf[:m])
			if _, err := tmp.Write(buf[:m]); err != nil {
				return err
			}
			n += int64(m)
			if time.Since(lastReport) > 100*time.Millisecond {
				o.progress(Progress{Layer: digest, Index: index, Count: count, Phase: PhaseDownloading, Done: n, Total: size})
				lastReport = time.Now()
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			readErr = rerr
			break
		}
	}
	got := v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(h.Sum(nil))}
	if readErr != nil {
		// go-containerregistry verifies remote blobs too and reports a
		// mismatch at EOF; say it in our terms.
		if n == size && got != digest && strings.Contains(readErr.Error(), "verifying") {
			return &DigestError{What: "layer", Want: digest, Got: got, Hint: hintCorrupt}
		}
		return readErr
	}
	if got != digest {
		return &DigestError{What: "layer", Want: digest, Got: got, Hint: hintCorrupt}
	}
	if n != size {
		return fmt.Errorf("size mismatch: got %d bytes, the manifest says %d", n, size)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), final)
}

// transient says whether a failed download is worth another try.
func transient(err error) bool {
	var de *DigestError
	if errors.As(err, &de) || errors.Is(err, context.Canceled) || errors.Is(err, syscall.ENOSPC) {
		return false
	}
	var te *transport.Error
	if errors.As(err, &te) {
		return te.Temporary()
	}
	var ne net.Error
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed) || errors.As(err, &ne)
}

// explainDiskError adds what to do when the store's disk is full or not ours.
func explainDiskError(err error, dir string) error {
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return fmt.Errorf("%w: the disk holding %s is full; free space (cove prune) or move the store with COVE_ROOT", err, dir)
	case errors.Is(err, syscall.EROFS):
		return fmt.Errorf("%w: %s is on a read-only file system; move the store with COVE_ROOT", err, dir)
	case errors.Is(err, syscall.EACCES) && !errors.Is(err, ErrUnsafeEntry):
		return fmt.Errorf("%w: check the permissions of %s or move the store with COVE_ROOT", err, dir)
	}
	return err
}
