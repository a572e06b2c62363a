package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/cove-sh/cove/build"
	"github.com/cove-sh/cove/image/progress"
	"github.com/urfave/cli/v2"
)

// imageJSON is one element of `cove images --json` (the command-line contract).
type imageJSON struct {
	Ref     string    `json:"ref"`
	Digest  string    `json:"digest"`
	Size    int64     `json:"size"`
	RootFS  string    `json:"rootfs"`
	Created time.Time `json:"created"`
}

func imagesCommand() *cli.Command {
	return &cli.Command{
		Name:  "images",
		Usage: "list the images in the cache",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print one JSON array of {ref, digest, size, rootfs, created}"},
		},
		Action: func(c *cli.Context) error {
			e, err := globalEnv(c)
			if err != nil {
				return err
			}
			store, err := e.store()
			if err != nil {
				return err
			}
			entries, err := store.List()
			if err != nil {
				return err
			}
			if c.Bool("json") {
				out := make([]imageJSON, 0, len(entries))
				for _, en := range entries {
					out = append(out, imageJSON{Ref: en.Ref, Digest: en.Image.Digest.String(), Size: en.Image.Size, RootFS: en.Image.RootFS, Created: en.Image.Created})
				}
				enc := json.NewEncoder(c.App.Writer)
				enc.SetIndent("", "  ")
				return enc.Encode(out)
			}
			tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "REF\tDIGEST\tSIZE\tCREATED")
			for _, en := range entries {
				ref := en.Ref
				if ref == "" {
					ref = "<none>"
				}
				created := "-" // the config has no date
				if !en.Image.Created.IsZero() {
					created = en.Image.Created.Format("2006-01-02")
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", ref, en.Image.Digest.Hex[:12], progress.Bytes(en.Image.Size), created)
			}
			return tw.Flush()
		},
	}
}

func rmiCommand() *cli.Command {
	return &cli.Command{
		Name:      "rmi",
		Usage:     "remove images from the cache",
		ArgsUsage: "REF...",
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return fmt.Errorf("rmi takes one or more image references (see cove images)")
			}
			e, err := globalEnv(c)
			if err != nil {
				return err
			}
			store, err := e.store()
			if err != nil {
				return err
			}
			for _, ref := range c.Args().Slice() {
				img, err := store.Remove(c.Context, ref)
				if err != nil {
					return fmt.Errorf("rmi %s: %w", ref, err)
				}
				if _, err := store.Get(img.Digest.String()); err == nil {
					// Another name or a container still holds it.
					fmt.Fprintf(c.App.Writer, "untagged %s %s (the image stays: another name or a container uses it)\n", ref, img.Digest)
					continue
				}
				fmt.Fprintf(c.App.Writer, "removed %s %s\n", ref, img.Digest)
			}
			return nil
		},
	}
}

func pruneCommand() *cli.Command {
	return &cli.Command{
		Name:  "prune",
		Usage: "remove cached blobs and images that no image name uses, and build steps no image has",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "build-cache", Usage: "remove all of cove build's cache: every step, every RUN --mount=type=cache and the fetched devcontainer Features"},
		},
		Action: func(c *cli.Context) error {
			e, err := globalEnv(c)
			if err != nil {
				return err
			}
			store, err := e.store()
			if err != nil {
				return err
			}
			rep, err := store.Prune(c.Context)
			if err != nil {
				return fmt.Errorf("prune: %w", err)
			}
			fmt.Fprintf(c.App.Writer, "removed %d images and %d blobs, freed %s of blobs\n", rep.Images, rep.Blobs, progress.Bytes(rep.Bytes))
			if rep.Snapshots > 0 {
				fmt.Fprintf(c.App.Writer, "removed %d layer snapshots no stored image has\n", rep.Snapshots)
			}
			// After the images: the steps of an image just removed are
			// no longer used.
			crep, err := build.PruneCache(c.Context, filepath.Join(e.layout.Data, "build"), store, c.Bool("build-cache"))
			if err != nil {
				return fmt.Errorf("prune: %w", err)
			}
			fmt.Fprintf(c.App.Writer, "removed %d build steps and %d build cache mounts, freed %s\n", crep.Steps, crep.Mounts, progress.Bytes(crep.Bytes))
			if crep.Features > 0 {
				fmt.Fprintf(c.App.Writer, "removed %d fetched devcontainer Features (fetched again when a workspace needs them)\n", crep.Features)
			}
			return nil
		},
	}
}
