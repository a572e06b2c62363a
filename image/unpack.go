package image

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/cove-sh/cove/internal/userns"
)

// IsArchive says whether the stream starts like a tar archive, plain or
// compressed with gzip or zstd: what cove build's ADD unpacks. It sniffs
// the content, as docker build does, not the name.
func IsArchive(r io.Reader) bool {
	br := bufio.NewReaderSize(r, 1024)
	magic, _ := br.Peek(4)
	if bytes.HasPrefix(magic, gzipMagic) || bytes.HasPrefix(magic, zstdMagic) {
		return true
	}
	head, _ := br.Peek(262)
	return len(head) == 262 && bytes.Equal(head[257:262], []byte("ustar"))
}

// Unpack extracts a tar archive (plain, gzip or zstd) into dir with the
// protections a layer gets: every entry resolved inside dir, no link or
// symlink followed out of it, sizes capped at maxSize bytes (0: the
// default). Owners are kept only when running as root.
func Unpack(r io.Reader, dir string, maxSize int64) (Stats, error) {
	ext, err := newExtractor(dir, maxSize)
	if err != nil {
		return Stats{}, err
	}
	defer ext.Close()
	plain, closeFn, err := decompress(r)
	if err != nil {
		return Stats{}, err
	}
	defer closeFn()
	if err := ext.applyLayer(plain); err != nil {
		return ext.stats, fmt.Errorf("unpack: %w", err)
	}
	if err := ext.finish(); err != nil {
		return ext.stats, fmt.Errorf("unpack: %w", err)
	}
	return ext.stats, nil
}

// UnpackOwned is Unpack keeping the archive's owners also rootless with
// subordinate ids (mapped through them, in the user namespace helper), as
// root's Unpack keeps them: what cove build's ADD of an archive does.
func UnpackOwned(ctx context.Context, r io.Reader, dir string, maxSize int64) (Stats, error) {
	m := userns.Current()
	if !m.Helps() {
		return Unpack(r, dir, maxSize)
	}
	if maxSize <= 0 {
		maxSize = DefaultMaxSize
	}
	plain, closeFn, err := decompress(r)
	if err != nil {
		return Stats{}, err
	}
	defer closeFn()
	a, err := newApplier(ctx, m, dir, maxSize)
	if err != nil {
		return Stats{}, err
	}
	x := a.(*nsExtractor)
	defer x.Close()
	if err := x.send(plain); err != nil {
		return x.counts(), fmt.Errorf("unpack: %w", err)
	}
	if err := x.finish(); err != nil {
		return x.counts(), fmt.Errorf("unpack: %w", err)
	}
	return x.counts(), x.Close()
}
