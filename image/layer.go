package image

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// DigestError reports content whose digest is not the one its manifest or
// config promised.
type DigestError struct {
	What string // "layer", "uncompressed layer", "config"
	Want v1.Hash
	Got  v1.Hash // zero when the check happened inside go-containerregistry
	Hint string  // what the user can do
}

func (e *DigestError) Error() string {
	msg := fmt.Sprintf("%s %s: digest mismatch", e.What, e.Want)
	if e.Got.Hex != "" {
		msg += fmt.Sprintf(" (got %s)", e.Got)
	}
	if e.Hint != "" {
		msg += ": " + e.Hint
	}
	return msg
}

const (
	hintCorrupt      = "the source sent corrupt data; retry or check the registry"
	hintInconsistent = "the image's config does not match its layers; the image is broken, ask its publisher"
)

// verifyError turns go-containerregistry's own digest check failure (it
// verifies blobs as it reads them, in its own words) into a DigestError.
func verifyError(what string, want v1.Hash, err error) error {
	if err != nil && strings.Contains(err.Error(), "error verifying") {
		return &DigestError{What: what, Want: want, Hint: hintCorrupt}
	}
	return err
}

var (
	gzipMagic = []byte{0x1f, 0x8b}
	zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}
)

// decompress sniffs the stream's compression from its first bytes rather
// than trusting the media type: registries and archives get that wrong.
func decompress(r io.Reader) (io.Reader, func(), error) {
	br := bufio.NewReaderSize(r, 1<<16)
	magic, _ := br.Peek(4)
	switch {
	case bytes.HasPrefix(magic, gzipMagic):
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, nil, fmt.Errorf("gzip: %w", err)
		}
		return zr, func() { zr.Close() }, nil
	case bytes.HasPrefix(magic, zstdMagic):
		zr, err := zstd.NewReader(br, zstd.WithDecoderMaxMemory(1<<30))
		if err != nil {
			return nil, nil, fmt.Errorf("zstd: %w", err)
		}
		return zr, zr.Close, nil
	}
	return br, func() {}, nil
}

// layerStream is one layer's uncompressed stream, inflating ahead of its
// reader in its own goroutine.
type layerStream struct {
	ra      *readahead
	h       hash.Hash
	closeFn func()
}

// openLayer starts decompressing blob. maxAhead bounds the decompressed
// bytes held in memory before the reader takes them: a layer opened while
// the one before it is still being applied gets a large bound, so that the
// two inflate on two cores at once.
func openLayer(ctx context.Context, blob io.Reader, maxAhead int) (*layerStream, error) {
	plain, closeFn, err := decompress(blob)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	return &layerStream{ra: newReadahead(ctx, plain, h, maxAhead), h: h, closeFn: closeFn}, nil
}

// abort stops the stream without reading the rest.
func (ls *layerStream) abort() {
	ls.ra.abort()
	ls.closeFn()
}

// apply applies the stream and checks that it, trailing bytes included,
// hashes to diffID.
func (e *extractor) apply(ls *layerStream, diffID v1.Hash) error {
	return ls.applyWith(e.applyLayer, diffID)
}

// applyWith has apply read the uncompressed stream (in this process, or
// sent to the user namespace helper) and checks that it, trailing bytes
// included, hashes to diffID.
func (ls *layerStream) applyWith(apply func(io.Reader) error, diffID v1.Hash) error {
	if err := apply(ls.ra); err != nil {
		ls.abort()
		return err
	}
	err := ls.ra.finish()
	ls.closeFn()
	if err != nil {
		return fmt.Errorf("decompress: %w", err)
	}
	got := v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(ls.h.Sum(nil))}
	if diffID.Hex != "" && got != diffID {
		return &DigestError{What: "uncompressed layer", Want: diffID, Got: got, Hint: hintInconsistent}
	}
	return nil
}

// applyCompressed decompresses one layer blob, applies it and checks its
// DiffID.
func (e *extractor) applyCompressed(ctx context.Context, blob io.Reader, diffID v1.Hash) error {
	ls, err := openLayer(ctx, blob, readaheadChunk*readaheadChunks)
	if err != nil {
		return err
	}
	return e.apply(ls, diffID)
}

// readahead decompresses in its own goroutine, a few chunks ahead of the
// reader, so that inflating a layer and writing its files use two cores
// instead of taking turns on one. Inflating is the slower half, so the
// reader's side hashes each chunk as it takes it.
type readahead struct {
	h    hash.Hash
	ch   chan []byte
	free chan []byte
	stop chan struct{}
	done chan struct{}
	cur  []byte
	held []byte
	err  error // set by the producer before it closes ch
	left int   // chunks the producer may still allocate
}

const (
	readaheadChunk  = 1 << 20
	readaheadChunks = 8
)

func newReadahead(ctx context.Context, src io.Reader, h hash.Hash, maxAhead int) *readahead {
	n := max(maxAhead/readaheadChunk, 2)
	ra := &readahead{
		h:    h,
		ch:   make(chan []byte, n),
		free: make(chan []byte, n+1),
		stop: make(chan struct{}),
		done: make(chan struct{}),
		left: n + 1,
	}
	go ra.produce(ctx, src)
	return ra
}

func (ra *readahead) produce(ctx context.Context, src io.Reader) {
	defer close(ra.done)
	defer close(ra.ch)
	for {
		var b []byte
		if ra.left > 0 {
			// Chunks are allocated as needed, so that a bound sized for a
			// look-ahead costs memory only when it is used.
			select {
			case b = <-ra.free:
			default:
				b = make([]byte, readaheadChunk)
				ra.left--
			}
		} else {
			select {
			case b = <-ra.free:
			case <-ra.stop:
				return
			}
		}
		if err := ctx.Err(); err != nil {
			ra.err = err
			return
		}
		n, err := io.ReadFull(src, b[:cap(b)])
		if n > 0 {
			select {
			case ra.ch <- b[:n]:
			case <-ra.stop:
				return
			}
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return
		}
		if err != nil {
			ra.err = err
			return
		}
	}
}

func (ra *readahead) Read(p []byte) (int, error) {
	for len(ra.cur) == 0 {
		if ra.held != nil {
			ra.free <- ra.held[:cap(ra.held)]
			ra.held = nil
		}
		b, ok := <-ra.ch
		if !ok {
			if ra.err != nil {
				return 0, ra.err
			}
			return 0, io.EOF
		}
		ra.h.Write(b)
		ra.cur, ra.held = b, b
	}
	n := copy(p, ra.cur)
	ra.cur = ra.cur[n:]
	return n, nil
}

// finish reads what the consumer left (the tar end padding and any trailing
// bytes, which the DiffID covers) and returns the producer's error.
func (ra *readahead) finish() error {
	for b := range ra.ch {
		ra.h.Write(b)
		ra.free <- b[:cap(b)]
	}
	<-ra.done
	return ra.err
}

// abort stops the producer without reading the rest of the stream.
func (ra *readahead) abort() {
	close(ra.stop)
	for b := range ra.ch {
		ra.free <- b[:cap(b)]
	}
	<-ra.done
}
