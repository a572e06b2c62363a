// Command appendinside appends cove's inside program to a cove
// executable, compressed, with the trailer cove finds it by (see
// scripts/build.sh and internal/insideexe).
//
//	appendinside PROGRAM COVE
package main

import (
	"fmt"
	"os"

	"github.com/cove-sh/cove/internal/insideexe"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: appendinside PROGRAM COVE")
		os.Exit(2)
	}
	b, err := os.ReadFile(os.Args[1])
	if err == nil {
		err = insideexe.Append(os.Args[2], b)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "appendinside: %v\n", err)
		os.Exit(1)
	}
}
