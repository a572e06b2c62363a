package main

import (
	"fmt"
	"io"
	"os"

	"github.com/cove-sh/cove/workspace/filesync"
	"github.com/urfave/cli/v2"
)

// syncServeCommand is the workspace's side of the file sync for a
// workspace that runs elsewhere (a Pod): it answers on standard input and
// output for the project copy at DIR.
func syncServeCommand() *cli.Command {
	return &cli.Command{
		Name:      "sync-serve",
		Usage:     "answer the file sync on standard input and output (inside a workspace)",
		ArgsUsage: "DIR",
		Hidden:    true,
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fmt.Errorf("sync-serve: say DIR")
			}
			d, err := filesync.OpenDir(c.Args().First(), nil)
			if err != nil {
				return err
			}
			defer d.Close()
			return filesync.Serve(stdio{os.Stdin, os.Stdout}, d)
		},
	}
}

// stdio is standard input and output as one stream.
type stdio struct {
	io.Reader
	io.WriteCloser
}
