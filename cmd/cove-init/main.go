// Command cove-init is a container's init and its host-side helpers
// (package container's Init): the build puts it in cove, which runs it
// from there (internal/insideexe). It is not installed on its own.
//
// It is apart from cove-inside, which answers the same command line too,
// because it is executed on every start, up to three times (rootless):
// with package container alone, none of the IDE server's packages (net/http,
// TLS, the file sync's net/rpc) are initialised in it, and its start is
// 8 ms, not 13.
package main

import (
	"fmt"
	"os"

	"github.com/cove-sh/cove/container"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == container.InitArg {
		container.Init(os.Args[2:]) // never returns
	}
	fmt.Fprintln(os.Stderr, "cove-init: cove runs this as a container's init; it is cove's own part, not a program to run")
	os.Exit(2)
}
