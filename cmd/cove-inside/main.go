// Command cove-inside is the part of cove that runs inside workspaces and
// containers (see package inside): the build puts it in cove, which runs
// it from there (internal/insideexe). It is not installed on its own.
package main

import (
	"fmt"
	"os"

	"github.com/cove-sh/cove/inside"
)

func main() {
	inside.Main(os.Args)
	if len(os.Args) == 2 && os.Args[1] == "version" {
		inside.Version()
	}
	fmt.Fprintln(os.Stderr, "cove-inside: not a command cove runs inside a workspace; this is cove's own part, not a program to run")
	os.Exit(2)
}
