//go:build cove_inside

package main

import (
	_ "embed"
	"fmt"
	"os"

	"github.com/cove-sh/cove/internal/insideexe"
)

// Written by scripts/build.sh, which builds cove with -tags cove_inside.
var (
	//go:embed inside.zst
	insideZst []byte
	//go:embed inside.sum
	insideSum string
)

func init() {
	p, err := insideexe.Parse(insideZst, insideSum)
	if err != nil {
		// A build that got this far has both files: this is a bug.
		fmt.Fprintf(os.Stderr, "cove: %v\n", err)
		return
	}
	insideProgram = p
}
