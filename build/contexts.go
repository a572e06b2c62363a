package build

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"
)

// Named contexts (docker build --build-context NAME=VALUE): a Dockerfile
// names them where it names an image or a stage, in FROM, COPY --from
// and RUN --mount from=. As in BuildKit, a stage of that name is the
// context instead (its instructions do not run), and an image of that
// name (alpine, alpine:latest and docker.io/library/alpine are one) is
// the context instead. A context is a local directory, read as the
// main context is (through os.Root, its own .dockerignore applied), or
// docker-image://REF, an image pulled as FROM pulls.

// dockerImagePrefix starts a named context that is an image.
const dockerImagePrefix = "docker-image://"

// namedContext is one --build-context: an image (ref) or a directory
// (src, open for the build).
type namedContext struct {
	name string // as given
	ref  string // docker-image://REF's REF
	dir  string // the directory, as given
	src  *source
}

// ParseBuildContexts reads cove build --build-context values, NAME=VALUE,
// into Options.Contexts, refusing the kinds cove build does not take
// (URLs, git, oci-layout://) with what to do instead.
func ParseBuildContexts(specs []string) (map[string]string, error) {
	out := map[string]string{}
	for _, s := range specs {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("--build-context %q: want NAME=DIR or NAME=docker-image://REF", s)
		}
		if err := checkContextValue(v); err != nil {
			return nil, fmt.Errorf("--build-context %s: %w", s, err)
		}
		out[k] = v
	}
	return out, nil
}

// checkContextValue refuses what a named context may be in BuildKit but
// not in cove build, which fetches nothing for one.
func checkContextValue(v string) error {
	scheme, rest, isURL := strings.Cut(v, "://")
	switch {
	case strings.HasPrefix(v, dockerImagePrefix):
		if rest == "" {
			return errors.New("docker-image:// names no image")
		}
		return nil
	case scheme == "oci-layout" && isURL:
		return fmt.Errorf("an oci-layout context is not supported: name the layout as docker-image://oci:DIR:TAG")
	case isURL || strings.HasPrefix(v, "git@"):
		return fmt.Errorf("cove build takes a local directory or docker-image://REF as a context, and fetches no URL or git repository for one (it builds offline): download or clone it and name the directory")
	}
	return nil
}

// contextKey is the name a context is found by: an image name in its
// short form (docker.io/library/alpine:latest is alpine), any other name
// lower-cased (stage names are not case-sensitive).
func contextKey(n string) string {
	n = strings.ToLower(n)
	ref, err := name.ParseReference(n)
	if err != nil {
		return n
	}
	repo := ref.Context()
	short := repo.RepositoryStr()
	if reg := repo.RegistryStr(); reg != name.DefaultRegistry {
		short = reg + "/" + short
	} else {
		short = strings.TrimPrefix(short, "library/")
	}
	switch r := ref.(type) {
	case name.Tag:
		if r.TagStr() != "latest" {
			short += ":" + r.TagStr()
		}
	case name.Digest:
		short += "@" + r.DigestStr()
	}
	return short
}

// openContexts opens each named context's directory for the build (and
// checks its image reference). A confined build's Dockerfile is not
// trusted, and its project may be a workspace's to change: a directory
// is taken only by a path with no symlink in it, so that no link a
// workspace made in the path leads the context elsewhere.
func (b *builder) openContexts() error {
	b.contexts = map[string]*namedContext{}
	for k, v := range b.opts.Contexts {
		if err := checkContextValue(v); err != nil {
			return fmt.Errorf("--build-context %s=%s: %w", k, v, err)
		}
		nc := &namedContext{name: k}
		if ref, ok := strings.CutPrefix(v, dockerImagePrefix); ok {
			nc.ref = ref
		} else {
			src, err := b.openContextDir(v)
			if err != nil {
				return fmt.Errorf("--build-context %s=%s: %w", k, v, err)
			}
			src.name = "the build context " + k
			nc.dir, nc.src = v, src
		}
		b.contexts[contextKey(k)] = nc
	}
	return nil
}

// openContextDir opens a named context's directory as the main context
// is opened (os.Root: nothing in it leads out), in a confined build by a
// path with no symlink.
func (b *builder) openContextDir(dir string) (*source, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if !b.opts.Confined || strings.HasPrefix(abs, "/proc/self/fd/") {
		return openContext(abs, nil)
	}
	fd, err := unix.Openat2(unix.AT_FDCWD, abs, &unix.OpenHow{
		Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS})
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("a confined build takes a context directory only by a path with no symlink in it (a workspace could have made one lead elsewhere): name the directory by its real path")
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", abs, err)
	}
	defer unix.Close(fd)
	return openContext(fmt.Sprintf("/proc/self/fd/%d", fd), nil)
}

// closeContexts closes the named contexts' directories.
func (b *builder) closeContexts() {
	for _, nc := range b.contexts {
		if nc.src != nil {
			nc.src.root.Close()
		}
	}
}

// namedCtx is the named context a FROM, COPY --from or RUN --mount from=
// names, or nil.
func (b *builder) namedCtx(n string) *namedContext {
	if len(b.contexts) == 0 || n == "" {
		return nil
	}
	return b.contexts[contextKey(n)]
}

// contextStage makes a stage of a named context: an image's, as FROM
// makes it; a directory's, its files as one layer (owned by root, as
// COPY makes them) on scratch.
func (b *builder) contextStage(ctx context.Context, st *stage, nc *namedContext) error {
	if nc.ref != "" {
		return b.imageBase(ctx, st, nc.ref)
	}
	st.cfg = v1.ConfigFile{OS: "linux", Architecture: st.cfg.Architecture}
	if st.cfg.Architecture == "" {
		st.cfg.Architecture = platformArgs["TARGETARCH"]
	}
	st.key = b.baseKey("build-context")
	op := &copyOp{b: b, st: st, text: "FROM " + nc.name, a: copyArgs{srcs: []string{"."}, dest: "/", link: true},
		spec: copySpec{dest: "/", destDir: true}, src: nc.src, srcs: []string{"."}}
	layers := len(st.layers)
	if err := op.copyFiles(ctx); err != nil {
		return fmt.Errorf("--build-context %s: %w", nc.name, err)
	}
	if len(st.layers) > layers {
		// BuildKit has no Dockerfile entry for it: its exporter adds one
		// for the layer, with its own comment.
		st.history = append(st.history, v1.History{Created: v1.Time{Time: st.created},
			CreatedBy: "build context " + nc.name, Comment: "buildkit.exporter.image.v0"})
	}
	return nil
}

// imageRef is the image a --from names: a named context's image, or the
// name itself.
func (b *builder) imageRef(from string) string {
	if nc := b.namedCtx(from); nc != nil && nc.ref != "" {
		return nc.ref
	}
	return from
}
