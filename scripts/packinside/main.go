// Command packinside compresses cove's inside program for embedding (see
// scripts/build.sh and internal/insideexe): zstd at its best ratio, one
// encoder goroutine, so that one input always gives the same bytes.
//
//	packinside PROGRAM OUT.zst OUT.sum
//
// OUT.sum is one line: the program's SHA-256 (hex) and its size.
package main

import (
	"crypto/sha256"
	"fmt"
	"os"

	"github.com/klauspost/compress/zstd"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: packinside PROGRAM OUT.zst OUT.sum")
		os.Exit(2)
	}
	if err := pack(os.Args[1], os.Args[2], os.Args[3]); err != nil {
		fmt.Fprintf(os.Stderr, "packinside: %v\n", err)
		os.Exit(1)
	}
}

func pack(program, zst, sum string) error {
	b, err := os.ReadFile(program)
	if err != nil {
		return err
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return err
	}
	if err := os.WriteFile(zst, enc.EncodeAll(b, nil), 0o644); err != nil {
		return err
	}
	return os.WriteFile(sum, fmt.Appendf(nil, "%x %d\n", sha256.Sum256(b), len(b)), 0o644)
}
