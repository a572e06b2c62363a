// Command appendinside appends one of cove's inside programs to a cove
// executable, compressed, with the trailer cove finds it by (see
// scripts/build.sh and internal/insideexe).
//
//	appendinside NAME PROGRAM COVE
package main

import (
	"fmt"
	"os"

	"github.com/cove-sh/cove/internal/insideexe"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: appendinside NAME PROGRAM COVE")
		os.Exit(2)
	}
	b, err := os.ReadFile(os.Args[2])
	if err == nil {
		err = insideexe.Append(os.Args[3], os.Args[1], b)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "appendinside: %v\n", err)
		os.Exit(1)
	}
}
