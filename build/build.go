// Package build builds a Dockerfile into an image in Cove's store, with no
// daemon: each RUN runs in a container of the stage so far (Cove's own
// runtime, overlayfs over the stored base image), and its upper directory
// becomes the step's layer. Dockerfiles are read with BuildKit's parser
// and instructions packages, and the image's config and history are
// written as BuildKit writes them.
//
// Supported: FROM (an image, an earlier stage with AS, or a named context,
// Options.Contexts), ARG (the platform ones predefined in the global
// scope, the proxy ones in RUN's environment), ENV, WORKDIR, RUN (shell and
// exec form, SHELL, heredocs and #! heredoc scripts; --mount of type cache,
// bind, tmpfs and secret; --network), USER, COPY (--from, --chown, --chmod,
// --link, --parents, --exclude, globs, .dockerignore, heredocs), ADD of
// local files, tar archives, http(s) URLs (--checksum) and heredocs,
// LABEL, EXPOSE, ENTRYPOINT, CMD; VOLUME, STOPSIGNAL, HEALTHCHECK,
// MAINTAINER and ONBUILD are recorded in the config; the syntax, escape
// and check directives. What else the reference has (RUN --mount=type=ssh,
// --security=insecure, ADD of a git source…) fails with its line number
// and what to do; the README lists each. SOURCE_DATE_EPOCH, as a
// build arg, makes builds reproducible. Besides the store, a build can
// write an OCI layout or archive, a docker archive, or push
// (Options.Exports); Push sends a stored image later, and PruneCache
// trims the step cache.
package build

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cove-sh/cove/container"
	"github.com/cove-sh/cove/image"
	"github.com/cove-sh/cove/internal/termtext"
	"github.com/cove-sh/cove/internal/userns"
	securejoin "github.com/cyphar/filepath-securejoin"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/buildkit/frontend/dockerfile/shell"
	"github.com/moby/patternmatcher"
	"golang.org/x/sys/unix"
)

// Options says what to build. The zero value of each optional field is
// the docker build default.
type Options struct {
	Context    string            // the build context directory (required)
	Dockerfile string            // default: CONTEXT/Dockerfile
	Tag        string            // the name to store the image under; default: cove-build/<context dir>:latest
	BuildArgs  map[string]string // --build-arg
	Target     string            // the stage to build; default: the last
	NoCache    bool              // run every step even when the cache has it
	// Binary is the static cove binary that RUN's containers run as init.
	Binary string
	// CacheDir holds the step cache and scratch space (created if needed).
	CacheDir string
	// Output receives progress lines and RUN's output; nil discards them.
	Output io.Writer
	// Pull are the options FROM's image pulls use (progress, keychain…).
	Pull []image.Option
	// Platform is --platform: only this machine's (linux/GOARCH) is
	// accepted; "" means it.
	Platform string
	// Confined builds a Dockerfile and context that are not trusted
	// (devcontainer.json's build, which the workspace can write; cove
	// build --confined): RUN gets a network of its own (container.NetPrivate:
	// the host's loopback, its addresses and the cloud metadata services
	// out of reach) instead of the host's, RUN --network=host is refused,
	// ADD fetches a URL only from an address such a container could
	// reach, RUN --mount=type=cache caches are the context's own, and FROM,
	// COPY --from and RUN --mount from= name registries' images only, no
	// file of this machine's. The default is docker build's: the host's
	// network, caches shared by id.
	Confined bool
	// TrustedFrom is an image a confined build may take from a file or
	// directory of this machine all the same: a Features build's base,
	// the workspace's image, which the user chose (--image, or a trusted
	// devcontainer.json). "" is none.
	TrustedFrom string
	// Exports are where the image goes besides the store (--output,
	// --push), written once it is stored.
	Exports []Export
	// Secrets are what RUN --mount=type=secret,id=ID reads, by ID (cove
	// build --secret). They are in no layer and no cache key.
	Secrets map[string][]byte
	// Labels are set on the final image, over the Dockerfile's (docker
	// build --label); they leave no history entry, as in BuildKit.
	Labels map[string]string
	// Contexts are the named contexts (--build-context NAME=VALUE), by
	// name: a directory, or docker-image://REF (ParseBuildContexts).
	Contexts map[string]string
}

// Result is a finished build.
type Result struct {
	Image *image.Image // the stored image; its RootFS is read-only
	Ref   string       // the name it is stored under (Options.Tag or the default)
	Steps int          // layer steps run or cached (RUN, COPY, ADD, and WORKDIR where it made a directory)
	Hits  int          // of those, taken from the cache
}

// Build builds o.Dockerfile in o.Context and stores the image in store
// under o.Tag. It blocks until done or ctx ends.
func Build(ctx context.Context, store *image.Store, o Options) (res *Result, err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("build %s: %w", o.Context, err)
		}
	}()
	if o.CacheDir != "" {
		// Shared with other builds; PruneCache waits for it alone.
		lock, err := lockCache(ctx, o.CacheDir, unix.LOCK_SH)
		if err != nil {
			return nil, fmt.Errorf("build cache: %w", err)
		}
		defer lock.Close()
	}
	b, err := newBuilder(store, o)
	if err != nil {
		return nil, err
	}
	defer userns.RemoveAll(ctx, b.tmp)
	return b.build(ctx)
}

type builder struct {
	store  *image.Store
	opts   Options
	tmp    string
	stages []*stage
	ctxSrc *source
	res    Result
	step   int // progress: this instruction's number, of steps
	steps  int
	// epoch is SOURCE_DATE_EPOCH (a build arg), if given: the image's
	// and its history's times, and no file in a layer newer.
	epoch *time.Time
	// contexts are the named contexts, open, by contextKey.
	contexts map[string]*namedContext
	// cacheScope is what a confined build's cache mounts are its own by:
	// the context directory as resolved, not as named (devimage names
	// every project's context /proc/self/fd/N, alike for all of them).
	cacheScope string
}

// stage is a stage's state as its instructions run: the stored base image
// (nil for scratch), the layers on it, its config, and the cache key of
// everything so far.
type stage struct {
	name    string
	base    *image.Image
	baseRef string // the reference FROM pulled base by (through earlier stages too)
	baseCfg *v1.ConfigFile
	cfg     v1.ConfigFile
	layers  []layerFile
	args    map[string]string
	// argOrder are the ARGs the stage declared (and its base stage did),
	// in order, each once; unset are those of them without a value (no
	// default, build arg or global one): in no RUN's environment.
	argOrder []string
	unset    map[string]bool
	global   map[string]string // the ARGs before the first FROM, as given: a stage's ARG without a value takes its
	ownCmd   bool              // this stage set CMD itself (ENTRYPOINT resets an inherited one)
	key      string
	created  time.Time
	history  []v1.History // this build's entries, one per instruction
	// createdBy is the history's words for the instruction being
	// applied, set by the ones that make a layer or declare ARGs.
	createdBy string
}

func newBuilder(store *image.Store, o Options) (*builder, error) {
	if o.Context == "" {
		return nil, errors.New("no build context: give a directory")
	}
	abs, err := filepath.Abs(o.Context)
	if err != nil {
		return nil, err
	}
	o.Context = abs
	if o.Dockerfile == "" {
		o.Dockerfile = filepath.Join(abs, "Dockerfile")
	}
	if o.Dockerfile, err = filepath.Abs(o.Dockerfile); err != nil {
		return nil, err
	}
	if o.Tag == "" {
		o.Tag = "cove-build/" + strings.ToLower(filepath.Base(abs)) + ":latest"
	}
	if _, err := image.ParseReference(o.Tag); err != nil {
		return nil, fmt.Errorf("-t: %w (give a name such as myapp:dev)", err)
	}
	if o.CacheDir == "" {
		return nil, errors.New("no cache directory")
	}
	if err := os.MkdirAll(filepath.Join(o.CacheDir, "steps"), 0o700); err != nil {
		return nil, fmt.Errorf("build cache: %w", err)
	}
	removeStale(context.Background(), o.CacheDir)
	removeStale(context.Background(), filepath.Join(o.CacheDir, "steps"))
	tmp, err := os.MkdirTemp(o.CacheDir, ".tmp-")
	if err != nil {
		return nil, fmt.Errorf("build cache: %w", err)
	}
	b := &builder{store: store, opts: o, tmp: tmp, cacheScope: abs}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		b.cacheScope = real
	}
	if v, ok := o.BuildArgs["SOURCE_DATE_EPOCH"]; ok && v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			os.RemoveAll(tmp)
			return nil, fmt.Errorf("SOURCE_DATE_EPOCH=%s: give seconds since 1970 (date +%%s)", v)
		}
		t := time.Unix(n, 0).UTC()
		b.epoch = &t
	}
	if o.Platform != "" {
		if err := checkPlatform(o.Platform); err != nil {
			os.RemoveAll(tmp)
			return nil, fmt.Errorf("--platform %s: %w", o.Platform, err)
		}
	}
	return b, nil
}

// checkPlatform accepts the platform this machine runs (RUN runs here,
// with no emulation) and refuses any other.
func checkPlatform(p string) error {
	want, err := v1.ParsePlatform(p)
	if err != nil {
		return err
	}
	host := v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	if want.OS != host.OS || want.Architecture != host.Architecture || (want.Variant != "" && !(host.Architecture == "arm64" && want.Variant == "v8")) {
		return fmt.Errorf("cove build builds only for this machine's platform, %s/%s (RUN runs here, with no emulation): build on a %s machine", host.OS, host.Architecture, p)
	}
	return nil
}

// staleAfter is how old a scratch directory of a build that was killed
// must be before another build removes it: far longer than any build runs.
const staleAfter = 24 * time.Hour

// removeStale removes the .tmp-* directories killed builds left in dir.
func removeStale(ctx context.Context, dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".tmp-") {
			continue
		}
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > staleAfter {
			userns.RemoveAll(ctx, filepath.Join(dir, e.Name()))
		}
	}
}

// logf says a step; its words (the Dockerfile's) are shown with their
// control characters made visible, as RUN's output is.
func (b *builder) logf(format string, args ...any) {
	if b.opts.Output != nil {
		io.WriteString(b.opts.Output, termtext.Visible(fmt.Sprintf(format, args...))+"\n")
	}
}

// located is an instruction that knows its place in the Dockerfile.
type located interface {
	Name() string
	Location() []parser.Range
}

// lineError names the Dockerfile line an instruction failed on.
func lineError(cmd located, err error) error {
	line := 0
	if loc := cmd.Location(); len(loc) > 0 {
		line = loc[0].Start.Line
	}
	return fmt.Errorf("line %d: %s: %w", line, strings.ToUpper(cmd.Name()), err)
}

// build runs the Dockerfile: it parses it, works out the global ARGs and
// the stages the target needs, runs those in order, and stores the
// target's image (and exports it).
func (b *builder) build(ctx context.Context) (*Result, error) {
	stages, metaArgs, lex, err := b.parse()
	if err != nil {
		return nil, err
	}
	global, err := b.globalArgs(lex, metaArgs)
	if err != nil {
		return nil, err
	}
	last := len(stages) - 1
	if b.opts.Target != "" {
		i, ok := instructions.HasStage(stages, b.opts.Target)
		if !ok {
			return nil, fmt.Errorf("--target %s: no stage has that name", b.opts.Target)
		}
		last = i
	}
	ignore, err := openDockerfileIgnore(b.opts.Context, b.opts.Dockerfile)
	if err != nil {
		return nil, err
	}
	b.ctxSrc, err = openContext(b.opts.Context, ignore)
	if err != nil {
		return nil, err
	}
	defer b.ctxSrc.root.Close()
	if err := b.openContexts(); err != nil {
		return nil, err
	}
	defer b.closeContexts()
	replaced := func(name string) bool { return b.namedCtx(name) != nil }
	needed := neededStages(stages, last, replaced, func(w string) string {
		v, _, err := lex.ProcessWord(w, envGetter(nil, global))
		if err != nil {
			return w
		}
		return v
	})
	for i := 0; i <= last; i++ {
		if needed[i] {
			b.steps++
			if !replaced(stages[i].Name) {
				b.steps += len(stages[i].Commands)
			}
		}
	}
	for i := 0; i <= last; i++ {
		if !needed[i] {
			b.stages = append(b.stages, nil) // as BuildKit: a stage the target does not use is not built
			continue
		}
		st, err := b.runStage(ctx, lex, &stages[i], global)
		if err != nil {
			return nil, err
		}
		b.stages = append(b.stages, st)
	}
	return b.finish(ctx, b.stages[last])
}

// parse reads the Dockerfile into its stages and the ARGs before the
// first FROM, and the lexer its escape character asks for.
func (b *builder) parse() ([]instructions.Stage, []instructions.ArgCommand, *shell.Lex, error) {
	df, err := readDockerfile(b.opts.Context, b.opts.Dockerfile)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := checkBuiltinArgs(b.opts.BuildArgs); err != nil {
		return nil, nil, nil, err
	}
	if err := checkSyntax(df, b.opts.BuildArgs); err != nil {
		return nil, nil, nil, err
	}
	lint, err := b.newLinter(df)
	if err != nil {
		return nil, nil, nil, err
	}
	ast, err := parser.Parse(bytes.NewReader(df))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("parse the Dockerfile: %w", err)
	}
	for _, w := range ast.Warnings {
		b.logf("WARN: %s", w.Short)
	}
	stages, metaArgs, err := instructions.Parse(ast.AST, lint)
	if err == nil {
		err = lint.Error() // # check=error=true, and a check failed
	}
	if err != nil {
		var ue *instructions.UnknownInstructionError
		if errors.As(err, &ue) {
			return nil, nil, nil, fmt.Errorf("line %d: unknown instruction %s", ue.Line, ue.Instruction)
		}
		return nil, nil, nil, fmt.Errorf("parse the Dockerfile: %w", err)
	}
	if len(stages) == 0 {
		return nil, nil, nil, errors.New("the Dockerfile has no FROM")
	}
	return stages, metaArgs, shell.NewLex(ast.EscapeToken), nil
}

// globalArgs are the values of the ARGs in the global scope: the
// platform ones BuildKit predefines there (FROM --platform=$BUILDPLATFORM
// needs no ARG line), and those before the first FROM, each a
// --build-arg, else its default expanded with the ones before it, else
// (for a platform one) the predefined value.
func (b *builder) globalArgs(lex *shell.Lex, metaArgs []instructions.ArgCommand) (map[string]string, error) {
	global := map[string]string{}
	for k, v := range platformArgs {
		global[k] = v
	}
	for _, a := range metaArgs {
		for _, kv := range a.Args {
			if v, ok := b.opts.BuildArgs[kv.Key]; ok {
				global[kv.Key] = v
			} else if kv.Value != nil {
				v, _, err := lex.ProcessWord(*kv.Value, envGetter(nil, global))
				if err != nil {
					return nil, lineError(&a, err)
				}
				global[kv.Key] = v
			}
		}
	}
	return global, nil
}

// finish assembles the final stage's image, stores it under the tag, and
// writes the exports.
func (b *builder) finish(ctx context.Context, final *stage) (*Result, error) {
	if len(b.opts.Labels) > 0 {
		cfg := &final.cfg.Config
		if cfg.Labels == nil {
			cfg.Labels = map[string]string{}
		}
		for k, v := range b.opts.Labels {
			cfg.Labels[k] = v
		}
	}
	img, err := b.assemble(final, nil)
	if err != nil {
		return nil, err
	}
	if len(b.opts.Exports) > 0 {
		// The image with every blob readable is the one stored, so the
		// store and the exports have one digest. (The store finds the
		// base's files stored and reads only this build's layers.)
		full, done, err := b.exportImage(ctx, final)
		if err != nil {
			return nil, fmt.Errorf("export: %w", err)
		}
		defer done()
		img = full
	}
	stored, err := b.store.Import(ctx, img, b.opts.Tag)
	if err != nil {
		return nil, err
	}
	for _, e := range b.opts.Exports {
		if err := b.export(ctx, img, e); err != nil {
			return nil, fmt.Errorf("export to %s %s: %w", e.Type, e.Dest, err)
		}
		b.logf("exported to %s %s", e.Type, e.Dest)
	}
	b.res.Image, b.res.Ref = stored, b.opts.Tag
	return &b.res, nil
}

// defaultPath is the PATH a stage FROM scratch starts with (BuildKit's
// and buildah's, for Linux).
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// platformArgs are the build args BuildKit predefines for the platform,
// given to an ARG that names one without a value. Cove builds for the
// machine it runs on.
var platformArgs = map[string]string{
	"TARGETPLATFORM": "linux/" + runtime.GOARCH, "TARGETOS": "linux", "TARGETARCH": runtime.GOARCH, "TARGETVARIANT": "",
	"BUILDPLATFORM": "linux/" + runtime.GOARCH, "BUILDOS": "linux", "BUILDARCH": runtime.GOARCH, "BUILDVARIANT": "",
}

// envGetter lets the shell lexer see the stage's ENV over its ARGs.
func envGetter(env []string, args map[string]string) shell.EnvGetter {
	all := []string{}
	for k, v := range args {
		all = append(all, k+"="+v)
	}
	return shell.EnvsFromSlice(append(all, env...))
}

func (b *builder) runStage(ctx context.Context, lex *shell.Lex, s *instructions.Stage, global map[string]string) (*stage, error) {
	line := 0
	if len(s.Location) > 0 {
		line = s.Location[0].Start.Line
	}
	from, _, err := lex.ProcessWord(s.BaseName, envGetter(nil, global))
	if err != nil {
		return nil, fmt.Errorf("line %d: FROM %s: %w", line, s.BaseName, err)
	}
	if s.Platform != "" {
		p, _, err := lex.ProcessWord(s.Platform, envGetter(nil, global))
		if err == nil {
			err = checkPlatform(p)
		}
		if err != nil {
			return nil, fmt.Errorf("line %d: FROM --platform=%s: %w", line, s.Platform, err)
		}
	}
	st := &stage{name: s.Name, args: map[string]string{}, unset: map[string]bool{}, global: global}
	b.step++
	if nc := b.namedCtx(s.Name); nc != nil {
		// As BuildKit: a named context of the stage's name is the stage.
		b.logf("STEP %d/%d: FROM %s (--build-context %s)", b.step, b.steps, from, nc.name)
		if err := b.contextStage(ctx, st, nc); err != nil {
			return nil, fmt.Errorf("line %d: FROM %s AS %s: %w", line, from, s.Name, err)
		}
		return st, nil
	}
	b.logf("STEP %d/%d: FROM %s", b.step, b.steps, from)
	if err := b.stageBase(ctx, st, from); err != nil {
		return nil, fmt.Errorf("line %d: FROM %s: %w", line, from, err)
	}
	triggers, err := onbuildTriggers(st, s)
	if err != nil {
		return nil, err
	}
	b.steps += len(triggers)
	for _, c := range append(triggers, s.Commands...) {
		if err := b.dispatch(ctx, lex, st, c); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// stageBase starts the stage from what FROM names: an earlier stage (its
// ARGs too), a named context, scratch, or an image.
func (b *builder) stageBase(ctx context.Context, st *stage, from string) error {
	if prev := b.stageNamed(from); prev != nil {
		st.base, st.baseCfg, st.layers, st.created = prev.base, prev.baseCfg, append([]layerFile{}, prev.layers...), prev.created
		st.baseRef = prev.baseRef
		st.cfg = *prev.cfg.DeepCopy()
		st.key = prev.key
		st.history = append([]v1.History{}, prev.history...)
		// The reference: "An ARG variable declared within a build stage
		// is automatically inherited by other stages based on that stage."
		for k, v := range prev.args {
			st.args[k] = v
		}
		for k := range prev.unset {
			st.unset[k] = true
		}
		st.argOrder = append([]string{}, prev.argOrder...)
		return nil
	}
	if nc := b.namedCtx(from); nc != nil {
		return b.contextStage(ctx, st, nc)
	}
	if strings.EqualFold(from, "scratch") {
		// As BuildKit's empty image: PATH set, for a RUN or a container
		// of the stage to find its commands.
		st.cfg = v1.ConfigFile{OS: "linux", Architecture: runtime.GOARCH, Config: v1.Config{Env: []string{"PATH=" + defaultPath}}}
		st.key = b.baseKey("scratch\x00PATH=" + defaultPath)
		return nil
	}
	return b.imageBase(ctx, st, from)
}

// imageBase starts the stage from the image ref names, pulled.
func (b *builder) imageBase(ctx context.Context, st *stage, ref string) error {
	img, err := b.pull(ctx, ref)
	if err != nil {
		return err
	}
	cfg, err := b.store.ConfigFile(img)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	st.base, st.baseCfg, st.cfg, st.created = img, cfg, *cfg.DeepCopy(), cfg.Created.Time
	st.baseRef = ref
	st.key = b.baseKey(img.Digest.String())
	return nil
}

// baseKey starts a stage's cache key from its base (with
// SOURCE_DATE_EPOCH, which every layer's times follow).
func (b *builder) baseKey(base string) string {
	key := digestOf(cacheFormat, base)
	if b.epoch != nil {
		key = digestOf(key, fmt.Sprintf("source-date-epoch=%d", b.epoch.Unix()))
	}
	return key
}

// onbuildTriggers are the ONBUILD instructions the stage's base left (an
// image's config, or an earlier stage's ONBUILD lines), to run first, as
// BuildKit runs them; the stage's own image does not carry them on.
func onbuildTriggers(st *stage, s *instructions.Stage) ([]instructions.Command, error) {
	exprs := st.cfg.Config.OnBuild
	st.cfg.Config.OnBuild = nil
	var out []instructions.Command
	for _, expr := range exprs {
		line := 0
		if len(s.Location) > 0 {
			line = s.Location[0].Start.Line
		}
		ast, err := parser.Parse(strings.NewReader(expr))
		if err != nil || len(ast.AST.Children) != 1 {
			return nil, fmt.Errorf("line %d: the base's ONBUILD %q: not one instruction (%v)", line, expr, err)
		}
		node := ast.AST.Children[0]
		node.StartLine, node.EndLine = line, line
		switch strings.ToLower(node.Value) {
		case "onbuild", "from", "maintainer":
			return nil, fmt.Errorf("line %d: the base's ONBUILD %s: not allowed as a trigger", line, strings.ToUpper(node.Value))
		}
		c, err := instructions.ParseCommand(node)
		if err != nil {
			return nil, fmt.Errorf("line %d: the base's ONBUILD %q: %w", line, expr, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// neededStages marks the stages the target stage uses: its base stage and
// those it COPYs --from, and theirs.
func neededStages(stages []instructions.Stage, target int, replaced func(string) bool, expand func(string) string) map[int]bool {
	needed := map[int]bool{}
	index := func(name string, before int) (int, bool) {
		for i := 0; i < before; i++ {
			if (stages[i].Name != "" && strings.EqualFold(stages[i].Name, name)) || fmt.Sprint(i) == name {
				return i, true
			}
		}
		return 0, false
	}
	var mark func(i int)
	mark = func(i int) {
		if needed[i] {
			return
		}
		needed[i] = true
		if replaced(stages[i].Name) {
			return // a named context is the stage: it needs nothing
		}
		if j, ok := index(expand(stages[i].BaseName), i); ok {
			mark(j)
		}
		for _, c := range stages[i].Commands {
			var froms []string
			switch c := c.(type) {
			case *instructions.CopyCommand:
				froms = append(froms, c.From)
			case *instructions.RunCommand:
				for _, m := range instructions.GetMounts(c) {
					froms = append(froms, m.From)
				}
			}
			for _, from := range froms {
				if j, ok := index(from, i); ok && from != "" {
					mark(j)
				}
			}
		}
	}
	mark(target)
	return needed
}

func (b *builder) stageNamed(name string) *stage {
	for i, s := range b.stages {
		if s == nil {
			continue
		}
		if (s.name != "" && strings.EqualFold(s.name, name)) || fmt.Sprint(i) == name {
			return s
		}
	}
	return nil
}

// cacheFormat starts every cache key: a change to how steps make their
// layers changes it, so that entries made the old way are not taken.
const cacheFormat = "cove-build-1"

// digestOf hashes parts, each length-prefixed so that none can run into
// the next.
func digestOf(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s\x00", len(p), p)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// dispatch runs one instruction on the stage: it expands the
// instruction's words, logs it, extends the stage's cache key with its
// text, applies it, and records it in the stage's history (an empty
// layer unless it made one). Every error names the Dockerfile line.
func (b *builder) dispatch(ctx context.Context, lex *shell.Lex, st *stage, c instructions.Command) error {
	if e, ok := c.(instructions.SupportsSingleWordExpansion); ok {
		getter := envGetter(st.cfg.Config.Env, st.args)
		err := e.Expand(func(word string) (string, error) {
			v, _, err := lex.ProcessWord(word, getter)
			return v, err
		})
		if err != nil {
			return lineError(c.(located), err)
		}
	}
	if e, ok := c.(instructions.SupportsSingleWordExpansionRaw); ok {
		// A heredoc's text (COPY <<EOF, not <<"EOF") is expanded as
		// BuildKit expands it: variables only, its quotes kept.
		raw := shell.NewLex('\\')
		raw.SkipProcessQuotes = true
		getter := envGetter(st.cfg.Config.Env, st.args)
		err := e.ExpandRaw(func(word string) (string, error) {
			v, _, err := raw.ProcessWord(word, getter)
			return v, err
		})
		if err != nil {
			return lineError(c.(located), err)
		}
	}
	text := fmt.Sprint(c) // the instruction as written: with the chain of keys before it, it fixes what expansion gives
	b.step++
	b.logf("STEP %d/%d: %s", b.step, b.steps, text)
	layers := len(st.layers)
	st.key = digestOf(st.key, text)
	st.createdBy = ""
	if err := b.apply(ctx, lex, st, text, c); err != nil {
		return lineError(c.(located), err)
	}
	createdBy, ok := st.createdBy, st.createdBy != ""
	if !ok {
		createdBy, ok = configCreatedBy(st, c)
	}
	if ok {
		st.history = append(st.history, v1.History{Created: v1.Time{Time: st.created}, CreatedBy: createdBy,
			Comment: historyComment, EmptyLayer: len(st.layers) == layers})
	}
	return nil
}

// apply does what the instruction says: the ones that change files make a
// layer step; the others only change the stage's config (or its ARGs).
func (b *builder) apply(ctx context.Context, lex *shell.Lex, st *stage, text string, c instructions.Command) error {
	switch c := c.(type) {
	case *instructions.WorkdirCommand:
		return b.workdir(ctx, st, text, c.Path)
	case *instructions.RunCommand:
		return b.run(ctx, st, text, c)
	case *instructions.CopyCommand:
		return b.copyInstruction(ctx, st, text, copyArgs{from: c.From, srcs: c.SourcePaths, docs: c.SourceContents,
			dest: c.DestPath, chown: c.Chown, chmod: c.Chmod, link: c.Link, parents: c.Parents, exclude: c.ExcludePatterns})
	case *instructions.AddCommand:
		return b.add(ctx, st, text, c)
	}
	return b.configure(lex, st, c)
}

// configure applies an instruction that changes only the stage's config
// or its ARGs, not its files.
func (b *builder) configure(lex *shell.Lex, st *stage, c instructions.Command) error {
	cfg := &st.cfg.Config
	switch c := c.(type) {
	case *instructions.ArgCommand:
		b.declareArgs(st, c.Args)
		st.createdBy = argCreatedBy(st, c.Args)
	case *instructions.EnvCommand:
		for _, kv := range c.Env {
			cfg.Env = setEnv(cfg.Env, kv.Key, kv.Value)
		}
	case *instructions.LabelCommand:
		if cfg.Labels == nil {
			cfg.Labels = map[string]string{}
		}
		for _, kv := range c.Labels {
			cfg.Labels[kv.Key] = kv.Value
		}
	case *instructions.ExposeCommand:
		return expose(lex, st, c.Ports)
	case *instructions.UserCommand:
		cfg.User = c.User
	case *instructions.VolumeCommand:
		if cfg.Volumes == nil {
			cfg.Volumes = map[string]struct{}{}
		}
		for _, v := range c.Volumes {
			cfg.Volumes[v] = struct{}{} // recorded; cove run does not make volumes of them
		}
	case *instructions.StopSignalCommand:
		if err := checkSignal(c.Signal); err != nil {
			return err
		}
		cfg.StopSignal = c.Signal
	case *instructions.HealthCheckCommand:
		if c.Health.StartInterval != 0 {
			return errors.New("--start-interval is not supported: the image config cove build writes has no field for it; leave it out (the container engine's default applies)")
		}
		cfg.Healthcheck = &v1.HealthConfig{Test: c.Health.Test, Interval: c.Health.Interval,
			Timeout: c.Health.Timeout, StartPeriod: c.Health.StartPeriod, Retries: c.Health.Retries} // recorded, not run
	case *instructions.MaintainerCommand:
		st.cfg.Author = c.Maintainer
	case *instructions.OnbuildCommand:
		cfg.OnBuild = append(cfg.OnBuild, c.Expression) // run by the stages and images built FROM this one
	case *instructions.ShellCommand:
		cfg.Shell = c.Shell
	case *instructions.CmdCommand:
		cfg.Cmd = b.cmdLine(st, c.ShellDependantCmdLine)
		st.ownCmd = true
	case *instructions.EntrypointCommand:
		cfg.Entrypoint = b.cmdLine(st, c.ShellDependantCmdLine)
		if !st.ownCmd {
			// The reference: "If CMD is defined from the base image,
			// setting ENTRYPOINT will reset CMD to an empty value", a base
			// image or an earlier stage alike.
			cfg.Cmd = nil
		}
	default:
		return errors.New("not supported by cove build yet")
	}
	return nil
}

// declareArgs gives the stage ARG's values, each in the cache key (a RUN
// sees them in its environment).
func (b *builder) declareArgs(st *stage, args []instructions.KeyValuePairOptional) {
	for _, kv := range args {
		// --build-arg, else the ARG's own default, else (redeclared
		// without one) the global ARG's value (the platform ones are
		// global), else none: declared, but in no RUN's environment.
		v, ok := b.opts.BuildArgs[kv.Key]
		if !ok && kv.Value != nil {
			v, ok = *kv.Value, true
		} else if !ok {
			v, ok = st.global[kv.Key]
		}
		if ok {
			delete(st.unset, kv.Key)
		} else {
			st.unset[kv.Key] = true
		}
		if _, seen := st.args[kv.Key]; !seen {
			st.argOrder = append(st.argOrder, kv.Key)
		}
		st.args[kv.Key] = v
		st.key = digestOf(st.key, kv.Key+"="+v)
	}
}

// expose records EXPOSE's ports, expanded (the instruction's own
// expansion leaves them) and split into words, as BuildKit reads them: a
// range is each of its ports, the protocol TCP unless one is given (tcp,
// udp or sctp, lower-cased).
func expose(lex *shell.Lex, st *stage, ports []string) error {
	cfg := &st.cfg.Config
	if cfg.ExposedPorts == nil {
		cfg.ExposedPorts = map[string]struct{}{}
	}
	var all []string
	for _, p := range ports {
		words, err := lex.ProcessWords(p, envGetter(cfg.Env, st.args))
		if err != nil {
			return err
		}
		for _, w := range words {
			specs, err := parsePort(w)
			if err != nil {
				return err
			}
			all = append(all, specs...)
		}
	}
	for _, p := range all {
		cfg.ExposedPorts[p] = struct{}{}
	}
	st.createdBy = fmt.Sprintf("EXPOSE %v", all)
	return nil
}

// parsePort reads one EXPOSE word, PORT[-END][/PROTO] (a host part
// before a colon, which the reference does not have, is dropped, as
// BuildKit drops it), into PORT/PROTO specs.
func parsePort(w string) ([]string, error) {
	if i := strings.LastIndex(w, ":"); i >= 0 {
		w = w[i+1:]
	}
	port, proto, _ := strings.Cut(w, "/")
	switch proto = strings.ToLower(proto); proto {
	case "":
		proto = "tcp"
	case "tcp", "udp", "sctp":
	default:
		return nil, fmt.Errorf("EXPOSE %s: the protocol %q is not tcp, udp or sctp", w, proto)
	}
	first, last, isRange := strings.Cut(port, "-")
	start, err := strconv.ParseUint(first, 10, 16)
	end := start
	if err == nil && isRange {
		end, err = strconv.ParseUint(last, 10, 16)
	}
	if err != nil || end < start {
		return nil, fmt.Errorf("EXPOSE %s: give a port (0-65535) or a range of them (8000-8010)", w)
	}
	var out []string
	for p := start; p <= end; p++ {
		out = append(out, fmt.Sprintf("%d/%s", p, proto))
	}
	return out, nil
}

// workdir sets the working directory (relative to the current one) and,
// where the stage lacks it, makes it in a layer of its own.
func (b *builder) workdir(ctx context.Context, st *stage, text, dir string) error {
	cfg := &st.cfg.Config
	// As BuildKit (NormalizeWorkdir): a relative path is joined to the
	// current one, an absolute one kept as written (a trailing slash too).
	wd := dir
	if !path.IsAbs(wd) {
		wd = path.Join("/", cfg.WorkingDir, wd)
	}
	cfg.WorkingDir = wd
	wd = path.Clean(wd)
	if b.exists(st, wd) {
		return nil
	}
	// As BuildKit does, the directories WORKDIR makes are the current
	// USER's: a later RUN as that user writes there.
	uid, gid, err := parseChown(cfg.User, func(p string) []byte { return b.readFile(st, p) })
	if err != nil {
		return fmt.Errorf("WORKDIR as USER %s: %w", cfg.User, err)
	}
	var made []string
	for d := wd; d != "/" && !b.exists(st, d); d = path.Dir(d) {
		made = append(made, strings.TrimPrefix(d, "/"))
	}
	return b.layerStep(ctx, st, text, fmt.Sprintf("owner=%d:%d", uid, gid), func(dir string) error {
		if err := os.MkdirAll(filepath.Join(dir, wd), 0o755); err != nil {
			return err
		}
		root, err := os.OpenRoot(dir)
		if err != nil {
			return err
		}
		defer root.Close()
		for _, d := range made {
			if err := lchown(root, d, copySpec{uid: uid, gid: gid}); err != nil {
				return err
			}
		}
		return nil
	})
}

// run reads RUN's flags, heredocs and mounts, and runs its command.
func (b *builder) run(ctx context.Context, st *stage, text string, c *instructions.RunCommand) error {
	network, err := runFlags(c, b.opts.Confined)
	if err != nil {
		return err
	}
	cmd, heredocs, err := heredocCmdLine(c.ShellDependantCmdLine)
	if err != nil {
		return err
	}
	mounts, err := b.prepareMounts(ctx, st, instructions.GetMounts(c))
	if err != nil {
		return err
	}
	if len(cmd.Files) == 1 { // a #! heredoc script
		script := filepath.Join(b.tmp, "script-"+newID()[:12])
		if err := os.WriteFile(script, []byte(cmd.Files[0].Data), 0o755); err != nil {
			return err
		}
		mounts.binds = append(mounts.binds, container.Bind{Source: script, Target: cmd.CmdLine[0], ReadOnly: true})
		cmd.Files = nil
	}
	args := b.cmdLine(st, cmd)
	st.createdBy = runCreatedBy(st, args)
	return b.runInstruction(ctx, st, text, args, heredocs, mounts, network)
}

// add refuses what ADD can name but cove build does not fetch (git
// sources), then copies as COPY does, fetching URLs, unpacking archives
// and writing heredocs.
func (b *builder) add(ctx context.Context, st *stage, text string, c *instructions.AddCommand) error {
	for _, p := range c.SourcePaths {
		if isGitSource(p) {
			return fmt.Errorf("%s: ADD of a git repository is not supported: clone it in a RUN (RUN --mount=type=secret gives it a token)", p)
		}
	}
	if c.KeepGitDir != nil {
		return errors.New("--keep-git-dir is only for git sources, which cove build does not ADD")
	}
	return b.copyInstruction(ctx, st, text, copyArgs{srcs: c.SourcePaths, docs: c.SourceContents, dest: c.DestPath, chown: c.Chown, chmod: c.Chmod,
		add: true, link: c.Link, exclude: c.ExcludePatterns, checksum: c.Checksum, unpack: c.Unpack})
}

// cmdLine is the argv of a shell-form (through SHELL, default /bin/sh -c)
// or exec-form command.
func (b *builder) cmdLine(st *stage, c instructions.ShellDependantCmdLine) []string {
	if !c.PrependShell {
		return append([]string{}, c.CmdLine...)
	}
	sh := st.cfg.Config.Shell
	if len(sh) == 0 {
		sh = []string{"/bin/sh", "-c"}
	}
	return append(append([]string{}, sh...), strings.Join(c.CmdLine, " "))
}

func setEnv(env []string, k, v string) []string {
	for i, e := range env {
		if ek, _, _ := strings.Cut(e, "="); ek == k {
			env[i] = k + "=" + v
			return env
		}
	}
	return append(env, k+"="+v)
}

// lowers is the stage's file system for overlayfs, top layer first.
func (st *stage) lowers() []string {
	var out []string
	for i := len(st.layers) - 1; i >= 0; i-- {
		out = append(out, st.layers[i].Dir)
	}
	if st.base != nil {
		out = append(out, st.base.RootFS)
	}
	return out
}

// lookup finds rel in the stage's layers, top first, resolved inside each.
func (b *builder) lookup(st *stage, rel string) (string, os.FileInfo) {
	for _, root := range st.lowers() {
		p, err := securejoin.SecureJoin(root, rel)
		if err != nil {
			continue
		}
		if fi, err := os.Lstat(p); err == nil {
			var sys unix.Stat_t
			if unix.Lstat(p, &sys) == nil && isWhiteout(p, &sys) {
				return "", nil // removed by a later layer
			}
			return p, fi
		}
	}
	return "", nil
}

func (b *builder) exists(st *stage, rel string) bool {
	_, fi := b.lookup(st, rel)
	return fi != nil
}

func (b *builder) readFile(st *stage, rel string) []byte {
	p, fi := b.lookup(st, rel)
	if fi == nil || !fi.Mode().IsRegular() {
		return nil
	}
	data, _ := os.ReadFile(p)
	return data
}

// cacheEntry is a layer step's record in the cache, under its key.
type cacheEntry struct {
	Layer   layerFile `json:"layer"`
	Created time.Time `json:"created"`
}

func (b *builder) stepDir(key string) string {
	return filepath.Join(b.opts.CacheDir, "steps", strings.TrimPrefix(key, "sha256:")[:32])
}

// layerStep runs a step that makes a layer, or takes it from the cache by
// st.key (extended with inputs, a hash of what it reads). make fills the
// layer's directory.
func (b *builder) layerStep(ctx context.Context, st *stage, text, inputs string, make func(dir string) error) error {
	b.res.Steps++
	if inputs != "" {
		st.key = digestOf(st.key, inputs)
	}
	dir := b.stepDir(st.key)
	if !b.opts.NoCache {
		if raw, err := os.ReadFile(filepath.Join(dir, "entry.json")); err == nil {
			var e cacheEntry
			if json.Unmarshal(raw, &e) == nil {
				e.Layer.Dir, e.Layer.Blob = filepath.Join(dir, "diff"), filepath.Join(dir, "layer.tar.gz")
				st.layers = append(st.layers, e.Layer)
				st.created = e.Created
				b.res.Hits++
				b.logf("--> cached")
				return nil
			}
		}
	}
	tmp, err := os.MkdirTemp(filepath.Join(b.opts.CacheDir, "steps"), ".tmp-")
	if err != nil {
		return err
	}
	defer userns.RemoveAll(ctx, tmp)
	diff := filepath.Join(tmp, "diff")
	if err := os.Mkdir(diff, 0o755); err != nil {
		return err
	}
	if err := make(diff); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	lf, err := makeLayer(ctx, diff, filepath.Join(tmp, "layer.tar.gz"), b.epoch)
	if err != nil {
		return err
	}
	lf.CreatedBy = text
	e := cacheEntry{Layer: lf, Created: time.Now().UTC().Truncate(time.Second)}
	if b.epoch != nil {
		e.Created = *b.epoch
	}
	raw, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, "entry.json"), raw, 0o600); err != nil {
		return err
	}
	// An entry is never replaced: another build may be using it as a
	// lower layer right now. A --no-cache rebuild's fresh layer goes
	// beside it; a concurrent build that got there first wins the name.
	if _, err := os.Stat(dir); err == nil {
		dir += "-" + newID()[:8]
	}
	if err := os.Rename(tmp, dir); err != nil {
		if raw, rerr := os.ReadFile(filepath.Join(dir, "entry.json")); rerr == nil && json.Unmarshal(raw, &e) == nil {
			lf = e.Layer // made meanwhile by another build: use that one
		} else {
			return fmt.Errorf("build cache: %w", err)
		}
	}
	lf.Dir, lf.Blob = filepath.Join(dir, "diff"), filepath.Join(dir, "layer.tar.gz")
	st.layers = append(st.layers, lf)
	st.created = e.Created
	return nil
}

// scriptDir is where a RUN's #! heredoc script is, as in BuildKit.
const scriptDir = "/dev/pipes"

// heredocCmdLine turns a RUN with heredocs into the command the shell
// runs, as BuildKit does: a lone heredoc is the script itself; heredocs
// feeding a command are put back after it for the shell to read. It also
// returns their text, which the instruction's own text does not hold and
// the cache key must.
func heredocCmdLine(c instructions.ShellDependantCmdLine) (instructions.ShellDependantCmdLine, string, error) {
	if len(c.Files) == 0 {
		return c, "", nil
	}
	if len(c.CmdLine) != 1 || !c.PrependShell {
		return c, "", errors.New("a heredoc needs the shell form of RUN")
	}
	var all strings.Builder
	for _, f := range c.Files {
		fmt.Fprintf(&all, "%s\x00%s\x00", f.Name, f.Data)
	}
	out := c
	out.Files = nil
	if parser.MustParseHeredoc(c.CmdLine[0]) != nil {
		data := c.Files[0].Data
		if c.Files[0].Chomp {
			data = parser.ChompHeredocContent(data)
		}
		if strings.HasPrefix(data, "#!") {
			// As BuildKit: the script is a file the RUN's shell executes,
			// by its #! line, from /dev/pipes (the container's own /dev,
			// so in no layer). The file is left in out.Files.
			out.CmdLine = []string{scriptDir + "/" + c.Files[0].Name}
			out.Files = []instructions.ShellInlineFile{{Name: c.Files[0].Name, Data: data}}
			return out, all.String(), nil
		}
		out.CmdLine = []string{data}
		return out, all.String(), nil
	}
	var b strings.Builder
	b.WriteString(c.CmdLine[0])
	for _, f := range c.Files {
		b.WriteString("\n" + f.Data + f.Name)
	}
	out.CmdLine = []string{b.String()}
	return out, all.String(), nil
}

func (b *builder) runInstruction(ctx context.Context, st *stage, text string, args []string, heredocs string, mounts *runMounts, network string) error {
	if len(st.lowers()) == 0 {
		return errors.New("RUN needs a base image with a shell (FROM scratch has none)")
	}
	// Build args are in RUN's environment, and in its cache key.
	var argEnv []string
	for _, k := range sortedKeys(st.args) {
		argEnv = append(argEnv, k+"="+st.args[k])
	}
	proc, err := container.ProcessFromImage(v1.Config{
		Env: st.cfg.Config.Env, WorkingDir: st.cfg.Config.WorkingDir, User: st.cfg.Config.User,
	}, args, nil, "", "")
	if err != nil {
		return err
	}
	for _, kv := range argEnv {
		k, _, _ := strings.Cut(kv, "=")
		if !hasKey(proc.Env, k) && !st.unset[k] {
			proc.Env = append(proc.Env, kv)
		}
	}
	// The predefined proxy args, given as --build-arg, are in every
	// RUN's environment but, unless an ARG declares them, in no cache
	// key and no history (a proxy's password stays out of the image).
	for _, kv := range proxyEnv(b.opts.BuildArgs) {
		k, _, _ := strings.Cut(kv, "=")
		if !hasKey(proc.Env, k) {
			proc.Env = append(proc.Env, kv)
		}
	}
	// A secret's env= is in this RUN's environment only: not in the
	// image's config, nor the cache key.
	for _, kv := range mounts.env {
		k, v, _ := strings.Cut(kv, "=")
		proc.Env = setEnv(proc.Env, k, v)
	}
	var missing []string
	for _, m := range mountPoints {
		if !b.exists(st, m) {
			missing = append(missing, m)
		}
	}
	inputs := strings.Join(argEnv, "\x00") + "\x00" + heredocs + "\x00" + mounts.key + "\x00" + network
	if h := b.opts.BuildArgs["BUILDKIT_SANDBOX_HOSTNAME"]; h != "" {
		inputs += "\x00hostname=" + h
	}
	return b.layerStep(ctx, st, text, inputs, func(diff string) error {
		release, err := b.lockCaches(ctx, mounts)
		if err != nil {
			return err
		}
		defer release()
		if err := b.runStep(ctx, st.lowers(), proc, diff, mounts.binds, network); err != nil {
			return err
		}
		dropStubs(diff, mounts.stubs)
		return dropMountPoints(diff, missing)
	})
}

func hasKey(env []string, k string) bool {
	for _, e := range env {
		if ek, _, _ := strings.Cut(e, "="); ek == k {
			return true
		}
	}
	return false
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// copyArgs is what one COPY or ADD asks for.
type copyArgs struct {
	from     string // --from
	srcs     []string
	docs     []instructions.SourceContent // heredocs
	dest     string
	chown    string
	chmod    string
	add      bool // ADD: URLs fetched, local archives unpacked
	link     bool // --link: the layer does not depend on the stage
	parents  bool // --parents: sources keep their path
	exclude  []string
	checksum string // ADD --checksum of a URL
	unpack   *bool  // ADD --unpack: nil, the default for the source
}

// copyOp is one COPY or ADD as it runs: what it asks for, the copySpec
// that says where and as whom its files land, and where it reads them
// (the context, or the stage or image of --from).
type copyOp struct {
	b    *builder
	st   *stage
	text string
	a    copyArgs
	spec copySpec
	src  *source
	srcs []string // a.srcs, or for --from where the stage's symlinks lead
}

// copyInstruction stages what COPY (or ADD) reads into a directory laid
// out as in the image, keyed by a hash of its content; the cache decides
// whether that becomes a new layer.
func (b *builder) copyInstruction(ctx context.Context, st *stage, text string, a copyArgs) error {
	op := &copyOp{b: b, st: st, text: text, a: a, src: b.ctxSrc, srcs: a.srcs}
	st.createdBy = copyCreatedBy(a)
	if err := op.resolveSpec(); err != nil {
		return err
	}
	if nc := b.namedCtx(a.from); nc != nil && nc.src != nil && b.stageNamed(a.from) == nil {
		op.src = nc.src // a named context's directory, read as the main context is
	} else if a.from != "" {
		done, err := op.openFrom(ctx)
		if err != nil {
			return err
		}
		defer done()
	}
	if !a.add && len(a.docs) == 0 {
		return op.copyFiles(ctx)
	}
	return op.stageAndCopy(ctx)
}

// resolveSpec reads --chown, --chmod and --exclude, and places the
// destination: relative to WORKDIR and, unless --link, through the
// stage's symlinks.
func (op *copyOp) resolveSpec() error {
	a := op.a
	uid, gid, err := parseChown(a.chown, func(p string) []byte { return op.b.readFile(op.st, p) })
	if err != nil {
		return err
	}
	mode, err := parseChmod(a.chmod)
	if err != nil {
		return err
	}
	spec := copySpec{dest: a.dest, destDir: strings.HasSuffix(a.dest, "/"), uid: uid, gid: gid, mode: mode, parents: a.parents}
	if len(a.exclude) > 0 {
		if spec.exclude, err = patternmatcher.New(a.exclude); err != nil {
			return fmt.Errorf("--exclude: %w", err)
		}
	}
	if !path.IsAbs(spec.dest) {
		spec.dest = path.Join("/", op.st.cfg.Config.WorkingDir, spec.dest)
	}
	spec.dest = path.Clean(spec.dest)
	if !a.link {
		// As BuildKit: the destination's symlinks are followed, inside
		// the stage, and a destination that is a directory there (through
		// a symlink too) is copied into.
		if err := op.b.resolveDest(op.st, &spec); err != nil {
			return err
		}
	}
	if a.checksum != "" {
		for _, p := range a.srcs {
			if !isURL(p) {
				return fmt.Errorf("--checksum is only for a URL source, and %s is not one", p)
			}
		}
	}
	op.spec = spec
	return nil
}

// openFrom makes the source of COPY --from: the sources' trees of the
// stage or image, staged in the build's scratch space and read through
// os.Root as the context is. done removes them.
func (op *copyOp) openFrom(ctx context.Context) (done func(), err error) {
	b, from := op.b, op.a.from
	lowers, err := b.fromLowers(ctx, from)
	if err != nil {
		return nil, err
	}
	tree := filepath.Join(b.tmp, "from-"+newID()[:12])
	if err := os.Mkdir(tree, 0o755); err != nil {
		return nil, err
	}
	// Each source is read where the stage's symlinks lead (an absolute
	// one from the stage's root), not where the host's would.
	var prefixes []string
	resolved := make([]string, len(op.srcs))
	for i, p := range op.srcs {
		prefix := treePrefix(p)
		real, err := resolveInStage(lowers, prefix)
		if err != nil {
			return nil, err
		}
		resolved[i] = path.Join(real, strings.TrimPrefix(inRoot(p), prefix))
		prefixes = append(prefixes, real)
	}
	op.srcs = resolved
	if err := stageTree(ctx, lowers, prefixes, tree); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(tree)
	if err != nil {
		userns.RemoveAll(ctx, tree)
		return nil, err
	}
	op.src = &source{name: "--from=" + from, root: root}
	return func() {
		root.Close()
		userns.RemoveAll(ctx, tree)
	}, nil
}

// copyFiles is a plain COPY. It hashes what it reads first, and copies it
// only when the cache does not have the step: a cached COPY of a big
// context then reads it once and writes nothing.
func (op *copyOp) copyFiles(ctx context.Context) error {
	h := sha256.New()
	if err := copyInto(op.src, op.srcs, op.spec, "", h); err != nil {
		return err
	}
	key := hex.EncodeToString(h.Sum(nil))
	return op.b.layerStep(ctx, op.st, op.text, key, func(diff string) error {
		again := sha256.New()
		if err := copyInto(op.src, op.srcs, op.spec, diff, again); err != nil {
			return err
		}
		if hex.EncodeToString(again.Sum(nil)) != key {
			return errors.New("the files changed while COPY read them: build again once they are written")
		}
		if op.a.link {
			return nil
		}
		return op.b.keepParents(op.st, diff, op.spec.dest, op.spec)
	})
}

// stageAndCopy is an ADD, or a COPY of heredocs: what they make (a
// download, an unpacked archive, a heredoc's text) is only known once
// made, so it is staged first, hashed as it is written, and moved into
// the layer if the cache does not have the step.
func (op *copyOp) stageAndCopy(ctx context.Context) error {
	b, spec := op.b, op.spec
	staged, err := os.MkdirTemp(b.tmp, "copy-")
	if err != nil {
		return err
	}
	defer userns.RemoveAll(ctx, staged)
	h := sha256.New()
	srcs := op.srcs
	if op.a.add {
		if srcs, err = op.fetchAndUnpack(ctx, staged, h); err != nil {
			return err
		}
	}
	if len(srcs) > 0 {
		if err := copyInto(op.src, srcs, spec, staged, h); err != nil {
			return err
		}
	}
	if err := writeHeredocs(op.a.docs, spec, len(srcs)+len(op.a.docs) > 1, staged, h); err != nil {
		return err
	}
	if !op.a.link {
		if err := b.keepParents(op.st, staged, spec.dest, spec); err != nil {
			return err
		}
	}
	return b.layerStep(ctx, op.st, op.text, hex.EncodeToString(h.Sum(nil)), func(diff string) error {
		if err := os.Remove(diff); err != nil {
			return err
		}
		return os.Rename(staged, diff) // both under CacheDir: one file system
	})
}

// fetchAndUnpack does ADD's own part into staged: it fetches a URL, and
// unpacks a local tar archive (plain, gzip, zstd) into dest. It returns
// the other sources, which ADD copies as COPY does.
func (op *copyOp) fetchAndUnpack(ctx context.Context, staged string, h hash.Hash) ([]string, error) {
	a := op.a
	var plain []string
	for _, p := range op.srcs {
		if isURL(p) {
			if err := op.b.addURL(ctx, p, a.checksum, a.unpack, op.spec, len(op.srcs) > 1, staged, h); err != nil {
				return nil, err
			}
			continue
		}
		if a.unpack != nil && !*a.unpack {
			plain = append(plain, p)
			continue
		}
		ok, err := addArchive(ctx, op.src, p, op.spec, staged, h)
		if err != nil {
			return nil, err
		}
		if !ok {
			plain = append(plain, p)
		}
	}
	return plain, nil
}

// keepParents gives the directories at and above dest that the stage
// already has their owner and mode there: the layer's entries for them
// must not change /tmp's sticky bit or a user's home, nor (as BuildKit's
// copy leaves it) the directory a COPY copies into. The ones the COPY
// creates are made as BuildKit makes them: its --chown owner, its --chmod
// mode or 0755 (not the mode of a directory source, whose contents alone
// are copied).
func (b *builder) keepParents(st *stage, staged, dest string, spec copySpec) error {
	root, err := os.OpenRoot(staged)
	if err != nil {
		return err
	}
	defer root.Close()
	mode := spec.mode
	if mode == 0 {
		mode = 0o755
	}
	for d := dest; ; d = path.Dir(d) {
		if ofi, err := root.Lstat(inRoot(d)); err == nil && ofi.IsDir() {
			if p, fi := b.lookup(st, d); fi != nil && fi.IsDir() {
				if err := copyMeta(p, filepath.Join(staged, d), fi); err != nil {
					return err
				}
			} else if d != "/" {
				if err := lchown(root, inRoot(d), spec); err != nil {
					return err
				}
				if err := root.Chmod(inRoot(d), mode); err != nil { // after chown, which clears setgid
					return err
				}
			}
		}
		if d == "/" {
			return nil
		}
	}
}

// pull pulls from, an image FROM, COPY --from or RUN --mount from= names.
// A confined build's Dockerfile is not trusted: it names registries'
// images only, never a file or directory of this machine's (one of the
// user's private images, by path).
func (b *builder) pull(ctx context.Context, from string) (*image.Image, error) {
	if b.opts.Confined && image.IsLocal(from) && from != b.opts.TrustedFrom {
		return nil, errors.New("a confined build takes images from registries only: this names a file or directory on this machine; push the image to a registry and name it there")
	}
	img, err := image.Pull(ctx, b.store, from, b.opts.Pull...)
	if err != nil {
		return nil, err
	}
	// The build uses the image's root filesystem until it ends: a use
	// held by a file in the build's own directory (gone with it), so
	// that no rmi or prune meanwhile deletes it from under a step.
	holder := filepath.Join(b.tmp, "use-"+img.Digest.Hex)
	if err := os.WriteFile(holder, nil, 0o600); err != nil {
		return nil, err
	}
	err = b.store.Use(ctx, img.Digest, holder)
	if errors.Is(err, image.ErrNotFound) { // removed since the pull: again
		if img, err = image.Pull(ctx, b.store, from, b.opts.Pull...); err == nil {
			holder = filepath.Join(b.tmp, "use-"+img.Digest.Hex)
			if err = os.WriteFile(holder, nil, 0o600); err == nil {
				err = b.store.Use(ctx, img.Digest, holder)
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", from, err)
	}
	return img, nil
}

// fromLowers is the file system COPY --from reads: an earlier stage's, or
// an image's (pulled as FROM pulls).
func (b *builder) fromLowers(ctx context.Context, from string) ([]string, error) {
	if prev := b.stageNamed(from); prev != nil {
		return prev.lowers(), nil
	}
	img, err := b.pull(ctx, b.imageRef(from))
	if err != nil {
		return nil, fmt.Errorf("--from=%s: %w", from, err)
	}
	return []string{img.RootFS}, nil
}

// fromSource is what RUN --mount=type=bind,from= reads: an earlier
// stage's file system and its cache key, or an image's and its digest.
func (b *builder) fromSource(ctx context.Context, from string) ([]string, string, error) {
	if prev := b.stageNamed(from); prev != nil {
		return prev.lowers(), prev.key, nil
	}
	img, err := b.pull(ctx, b.imageRef(from))
	if err != nil {
		return nil, "", fmt.Errorf("from=%s: %w", from, err)
	}
	return []string{img.RootFS}, img.Digest.String(), nil
}

// assemble makes the stage's image: the base image's layers (which the
// store holds flattened) and this build's, and the config with history.
//
// baseLayers, if given, are the base image's layers with their blobs (for
// an export); else they stand for them by digest.
func (b *builder) assemble(st *stage, baseLayers []v1.Layer) (v1.Image, error) {
	var layers []v1.Layer
	var history []v1.History
	if st.base != nil {
		if baseLayers != nil {
			layers = append(layers, baseLayers...)
		} else {
			for i, d := range st.base.Layers {
				var size int64 // unknown in images stored before the store kept sizes
				if len(st.base.Sizes) == len(st.base.Layers) {
					size = st.base.Sizes[i]
				}
				layers = append(layers, &storedLayer{digest: d, diffID: st.base.DiffIDs[i], size: size})
			}
		}
		history = append(history, st.baseCfg.History...)
	}
	for _, l := range st.layers {
		layers = append(layers, &storedLayer{digest: l.Digest, diffID: l.DiffID, size: l.Size, blob: l.Blob})
	}
	history = append(history, st.history...)
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layers...)
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	base, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf := st.cfg.DeepCopy()
	cf.RootFS = base.RootFS
	cf.History = history
	cf.Created = v1.Time{Time: st.created}
	if b.epoch != nil {
		// As BuildKit: the image and this build's history say the epoch.
		cf.Created = v1.Time{Time: *b.epoch}
		for i := len(history) - len(st.history); i < len(history); i++ {
			history[i].Created = cf.Created
		}
	}
	if cf.OS == "" {
		cf.OS, cf.Architecture = "linux", runtime.GOARCH
	}
	return mutate.ConfigFile(img, cf)
}

// copyMeta gives out the owner, mode and times of the stage's directory p.
func copyMeta(p, out string, fi os.FileInfo) error {
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return err
	}
	if os.Geteuid() == 0 {
		if err := os.Lchown(out, int(st.Uid), int(st.Gid)); err != nil {
			return err
		}
	}
	if err := unix.Chmod(out, st.Mode&0o7777); err != nil {
		return err
	}
	return os.Chtimes(out, fi.ModTime(), fi.ModTime())
}
