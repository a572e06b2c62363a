package main

import (
	"fmt"
	"io"
	"os/user"

	"github.com/cove-sh/cove/container"
	"github.com/cove-sh/cove/image"
	"github.com/cove-sh/cove/image/progress"
	"github.com/cove-sh/cove/internal/termtext"
	"github.com/cove-sh/cove/internal/userns"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/urfave/cli/v2"
)

func pullCommand() *cli.Command {
	return &cli.Command{
		Name:      "pull",
		Usage:     "fetch an image and flatten it into the cache; prints the manifest digest",
		ArgsUsage: "REF",
		Description: `REF is a registry reference (debian:bookworm, 127.0.0.1:5000/x:tag, x@sha256:…)
or oci:DIR[:TAG], oci-archive:FILE[:TAG], docker-archive:FILE[:REF].`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "platform", Usage: "image for `OS/ARCH[/VARIANT]` out of a multi-platform index (default: this machine's)"},
			&cli.StringFlag{Name: "pull", Value: "missing", Usage: "`POLICY`: missing (use a stored image of that name), always (ask the source again), never"},
			&cli.IntFlag{Name: "jobs", Value: 4, Usage: "layers to download at once"},
			&cli.StringFlag{Name: "max-size", Value: "64g", Usage: "fail if the image would extract more than `SIZE` of file data (bytes, or 512m, 64g, …)"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no progress output"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fmt.Errorf("pull takes one image reference (see cove pull --help)")
			}
			e, err := globalEnv(c)
			if err != nil {
				return err
			}
			opts, err := pullOptions(c)
			if err != nil {
				return err
			}
			store, err := e.store()
			if err != nil {
				return err
			}
			bars := progress.New(c.App.ErrWriter, c.Args().First(), c.Bool("quiet") || c.Bool("debug"))
			opts = append(opts, image.WithProgress(func(p image.Progress) {
				if p.Phase != image.PhaseDownloading {
					e.log.Debug("layer", "index", p.Index, "digest", p.Layer, "phase", p.Phase, "bytes", p.Total, "err", p.Err)
				}
				bars.Update(p)
			}))
			img, err := image.Pull(c.Context, store, c.Args().First(), opts...)
			bars.Wait()
			if err != nil {
				return err
			}
			e.log.Debug("pulled", "digest", img.Digest, "rootfs", img.RootFS, "files", img.Stats.Files, "bytes", img.Stats.Bytes)
			if !c.Bool("quiet") {
				ownersNote(c.App.ErrWriter, c.Args().First(), img)
			}
			if img.Stats.SkippedDev > 0 && !c.Bool("quiet") {
				fmt.Fprintf(c.App.ErrWriter, "note: %d device nodes skipped (unprivileged pull)\n", img.Stats.SkippedDev)
			}
			fmt.Fprintln(c.App.Writer, img.Digest)
			return nil
		},
	}
}

func pullOptions(c *cli.Context) ([]image.Option, error) {
	policy, err := image.ParsePolicy(c.String("pull"))
	if err != nil {
		return nil, err
	}
	maxSize := image.DefaultMaxSize
	if c.IsSet("max-size") {
		if maxSize, err = container.ParseSize(c.String("max-size")); err != nil || maxSize <= 0 {
			return nil, fmt.Errorf("--max-size %q: want a size such as 64g or 512m", c.String("max-size"))
		}
	}
	opts := []image.Option{
		image.WithPolicy(policy),
		image.WithJobs(c.Int("jobs")),
		image.WithMaxSize(maxSize),
	}
	if p := c.String("platform"); p != "" {
		plat, err := v1.ParsePlatform(p)
		if err != nil || plat.OS == "" || plat.Architecture == "" {
			return nil, fmt.Errorf("--platform %q: want OS/ARCH[/VARIANT], e.g. linux/arm64", p)
		}
		opts = append(opts, image.WithPlatform(*plat))
	}
	return opts, nil
}

// ownersNote says what a rootless store could not keep of the image's
// owners, and how to have them.
func ownersNote(w io.Writer, ref string, img *image.Image) {
	switch {
	case img.OwnersLost() && img.OwnersMode() == "user":
		fmt.Fprintf(w, "note: %s was stored before cove kept an image's owners rootless: every file of it is yours (root's inside), so its own users own nothing; cove rmi %s && cove pull %s stores it again with them\n", termtext.Visible(ref), termtext.Visible(ref), termtext.Visible(ref))
	case img.OwnersLost():
		fmt.Fprintf(w, "note: %s was stored when your subordinate ids were others (%s, now %s): its users' files are not theirs; cove rmi %s && cove pull %s stores it again\n", termtext.Visible(ref), img.OwnersMode(), userns.Current(), termtext.Visible(ref), termtext.Visible(ref))
	case img.Stats.DroppedOwner == 0:
	case img.OwnersMode() == "user":
		u, _ := user.Current()
		name := ""
		if u != nil {
			name = u.Username
		}
		fmt.Fprintf(w, "note: pulled as a user, so the %d files other users own in the image are stored as yours: %s\n", img.Stats.DroppedOwner, userns.Advice(name))
	default:
		fmt.Fprintf(w, "note: %d files of the image belong to ids beyond your subordinate range, so they are stored as yours (root's inside); a larger range in /etc/subuid and /etc/subgid keeps them\n", img.Stats.DroppedOwner)
	}
}
