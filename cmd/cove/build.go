package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/cove-sh/cove/build"
	"github.com/cove-sh/cove/image"
	"github.com/cove-sh/cove/internal/userscope"
	"github.com/urfave/cli/v2"
)

func buildCommand() *cli.Command {
	return &cli.Command{
		Name:      "build",
		Usage:     "build an image from a Dockerfile, with no daemon",
		ArgsUsage: "CONTEXT",
		Description: `Each RUN runs in a container of the stage so far; the image is stored under
its tag (-t), so that cove run and cove up --image find it. Prints the image's
digest on stdout; the steps and RUN's output go to stderr (none with -q).
SOURCE_DATE_EPOCH, in the environment or as a build arg, makes the image's
times the epoch and its digest reproducible.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "file", Aliases: []string{"f"}, Usage: "the `Dockerfile` (default: CONTEXT/Dockerfile)"},
			&cli.StringFlag{Name: "tag", Aliases: []string{"t"}, Usage: "store the image as `REF`"},
			&cli.StringSliceFlag{Name: "build-arg", Usage: "set the build argument `K=V`"},
			&cli.StringFlag{Name: "target", Usage: "build the `STAGE` named so, not the last"},
			&cli.BoolFlag{Name: "no-cache", Usage: "run every step, whatever the cache holds"},
			&cli.BoolFlag{Name: "pull", Usage: "ask the registry for newer FROM images even when they are stored"},
			&cli.BoolFlag{Name: "confined", Usage: "build a Dockerfile you do not trust: RUN gets a network of its own (your loopback and machine out of reach), ADD fetches only from elsewhere, cache mounts are this context's own"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "print only the image's digest: no steps, no RUN output"},
			&cli.StringFlag{Name: "platform", Usage: "build for `OS/ARCH`: only this machine's is accepted (RUN runs here)"},
			&cli.StringSliceFlag{Name: "output", Aliases: []string{"o"}, Usage: "also write the image to `type=oci,dest=DIR` (or oci-archive, docker: a file; registry,name=REF)"},
			&cli.BoolFlag{Name: "push", Usage: "also push the image to the registry its -t names"},
			&cli.StringSliceFlag{Name: "secret", Usage: "give RUN --mount=type=secret the secret `id=ID,src=FILE` (or id=ID,env=VAR); it is in no layer"},
			&cli.StringFlag{Name: "iidfile", Usage: "write the image's ID (its digest, sha256:…, as printed) to `FILE`"},
			&cli.StringSliceFlag{Name: "label", Usage: "set the label `K=V` on the image"},
			&cli.StringSliceFlag{Name: "build-context", Usage: "name a context `NAME=DIR` (or NAME=docker-image://REF) for FROM NAME, COPY --from=NAME and RUN --mount from=NAME"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fmt.Errorf("build takes one context directory (see cove build --help)")
			}
			e, err := globalEnv(c)
			if err != nil {
				return err
			}
			// As for cove run: in a login session, a scope of the user's
			// systemd gives RUN's containers cgroups (where none can be
			// had, RUN warns and runs as before).
			userscope.Enter(c.Context, os.Getenv("XDG_RUNTIME_DIR"))
			store, err := e.store()
			if err != nil {
				return err
			}
			o, err := buildOptions(c)
			if err != nil {
				return err
			}
			o.CacheDir = filepath.Join(e.layout.Data, "build")
			if o.Binary, err = e.initBinary(); err != nil {
				return err
			}
			res, err := build.Build(c.Context, store, o)
			if err != nil {
				return err
			}
			if f := c.String("iidfile"); f != "" {
				// As docker and buildah write it: the ID alone, no newline.
				if err := os.WriteFile(f, []byte(res.Image.Digest.String()), 0o644); err != nil {
					return fmt.Errorf("--iidfile: %w", err)
				}
			}
			if !c.Bool("quiet") {
				fmt.Fprintf(c.App.ErrWriter, "stored %s (%d of %d layer steps cached)\n", res.Ref, res.Hits, res.Steps)
			}
			fmt.Fprintln(c.App.Writer, res.Image.Digest)
			return nil
		},
	}
}

// buildOptions are cove build's flags as build.Options (all but the
// cache directory and the binary). With --iidfile it removes the file: as docker buildx,
// a failed build leaves no ID of an earlier one behind.
func buildOptions(c *cli.Context) (build.Options, error) {
	args, err := buildArgs(c.StringSlice("build-arg"), os.Getenv)
	if err != nil {
		return build.Options{}, err
	}
	secrets, err := build.ParseSecrets(c.StringSlice("secret"), os.Getenv)
	if err != nil {
		return build.Options{}, err
	}
	contexts, err := build.ParseBuildContexts(c.StringSlice("build-context"))
	if err != nil {
		return build.Options{}, err
	}
	exports, err := buildExports(c.StringSlice("output"), c.Bool("push"), c.String("tag"))
	if err != nil {
		return build.Options{}, err
	}
	if f := c.String("iidfile"); f != "" {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return build.Options{}, fmt.Errorf("--iidfile: %w", err)
		}
	}
	var pull []image.Option
	if c.Bool("pull") {
		pull = append(pull, image.WithPolicy(image.PullAlways))
	}
	progress := c.App.ErrWriter
	if c.Bool("quiet") {
		progress = nil
	}
	return build.Options{
		Context: c.Args().First(), Dockerfile: c.String("file"), Tag: c.String("tag"),
		BuildArgs: args, Target: c.String("target"), NoCache: c.Bool("no-cache"),
		Output: progress, Pull: pull,
		Secrets: secrets, Platform: c.String("platform"), Exports: exports, Confined: c.Bool("confined"),
		Labels: buildLabels(c.StringSlice("label")), Contexts: contexts,
	}, nil
}

// buildArgs are cove build's --build-arg K=V; as docker buildx,
// SOURCE_DATE_EPOCH in the environment is the build arg, unless one is
// given.
func buildArgs(kvs []string, getenv func(string) string) (map[string]string, error) {
	args := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("--build-arg %q: want K=V", kv)
		}
		args[k] = v
	}
	if v := getenv("SOURCE_DATE_EPOCH"); v != "" {
		if _, ok := args["SOURCE_DATE_EPOCH"]; !ok {
			args["SOURCE_DATE_EPOCH"] = v
		}
	}
	return args, nil
}

// buildLabels are cove build's --label K=V, as docker build reads them
// (K alone is K with an empty value).
func buildLabels(kvs []string) map[string]string {
	labels := map[string]string{}
	for _, kv := range kvs {
		k, v, _ := strings.Cut(kv, "=")
		labels[k] = v
	}
	return labels
}

// buildExports are where cove build writes the image besides the store:
// each --output, and with --push the registry its -t names.
func buildExports(outputs []string, push bool, tag string) ([]build.Export, error) {
	var exports []build.Export
	for _, o := range outputs {
		e, err := build.ParseExport(o)
		if err != nil {
			return nil, err
		}
		exports = append(exports, e)
	}
	if push {
		if tag == "" {
			return nil, fmt.Errorf("--push needs -t REGISTRY/NAME:TAG: where to push")
		}
		exports = append(exports, build.Export{Type: "registry", Dest: tag})
	}
	return exports, nil
}

func pushCommand() *cli.Command {
	return &cli.Command{
		Name:      "push",
		Usage:     "send a stored image to a registry (an image cove built, or one it pulled)",
		ArgsUsage: "IMAGE [DEST]",
		Description: `Pushes the stored IMAGE to DEST (default: IMAGE's own name) as the same
image, with the credentials of ~/.docker/config.json. The store keeps images
flattened: the layers of an image cove built come from its build cache, and
its base's from where the base was pulled (cove prune may have removed the
first: build again). Prints the digest.`,
		Action: func(c *cli.Context) error {
			if c.NArg() < 1 || c.NArg() > 2 {
				return fmt.Errorf("push takes IMAGE and an optional DEST (see cove push --help)")
			}
			e, err := globalEnv(c)
			if err != nil {
				return err
			}
			store, err := e.store()
			if err != nil {
				return err
			}
			src, dest := c.Args().Get(0), c.Args().Get(1)
			if dest == "" {
				dest = src
			}
			img, err := store.Get(src)
			if err != nil {
				return fmt.Errorf("push %s: %w (cove images lists what is stored)", src, err)
			}
			if err := build.Push(c.Context, store, filepath.Join(e.layout.Data, "build"), src, dest); err != nil {
				return err
			}
			fmt.Fprintf(c.App.ErrWriter, "pushed %s\n", dest)
			fmt.Fprintln(c.App.Writer, img.Digest)
			return nil
		},
	}
}
