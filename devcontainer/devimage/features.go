package devimage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cove-sh/cove/build"
	"github.com/cove-sh/cove/devcontainer"
	"github.com/cove-sh/cove/image"
	"github.com/cove-sh/cove/internal/atomicfile"
	"github.com/cove-sh/cove/internal/projectfs"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// The Features distribution spec's media types.
const (
	featureConfigType = "application/vnd.devcontainers"
	featureLayerType  = "application/vnd.devcontainers.layer.v1+tar"
)

// Limits on what a Feature may bring: real ones are tens of KiB.
const (
	maxFeatureSize  = 64 << 20
	maxFeatureFiles = 10000
	maxFeatures     = 64 // with every dependsOn resolved
)

// featureMeta is what cove reads of a devcontainer-feature.json.
type featureMeta struct {
	ID      string `json:"id"`
	Version string `json:"version"`
	Options map[string]struct {
		Default any `json:"default"`
	} `json:"options"`
	ContainerEnv  map[string]string `json:"containerEnv"`
	Privileged    bool              `json:"privileged"`
	InstallsAfter []string          `json:"installsAfter"`
	DependsOn     map[string]any    `json:"dependsOn"`
	LegacyIDs     []string          `json:"legacyIds"`
}

// metadataKeys are the keys of devcontainer-feature.json that go, as the
// Feature's entry, into the workspace's merged metadata (containerEnv is
// in the image already, as ENV: its ${PATH} resolved there).
var metadataKeys = []string{"id", "mounts", "capAdd", "securityOpt", "init", "entrypoint", "privileged",
	"onCreateCommand", "updateContentCommand", "postCreateCommand", "postStartCommand", "postAttachCommand"}

// feature is one Feature to install, fetched into a directory of cove's.
type feature struct {
	id        string            // as written (user) or as dependsOn names it
	bare      string            // id without its tag or digest: what installsAfter and the override name
	canonical string            // registry/name@digest, or local:PATH
	dir       string            // its files
	options   map[string]string // given
	meta      featureMeta
	raw       map[string]json.RawMessage
	deps      []string // keys of its dependsOn
}

// key is the Feature's identity for the spec's equality: the same
// content with the same options.
func (f *feature) key() string {
	b, _ := json.Marshal(f.options) // sorted keys
	return f.canonical + "\x00" + string(b)
}

// FeatureResult is the image with the Features installed.
type FeatureResult struct {
	Ref    string // the stored tag
	Digest string
	// Metadata are the Features' entries for the workspace's merged
	// devcontainer.metadata, in install order (devcontainer.AppendMetadata).
	Metadata []json.RawMessage
	// Order are the Features as installed (their references).
	Order []string
	// Notes say what was read otherwise than written (an old short name).
	Notes       []string
	Steps, Hits int
}

// InstallFeatures builds base with the Features dc asks for installed,
// as root, each in its own cached RUN step of cove build (in order:
// dependsOn, then installsAfter, overrideFeatureInstallOrder first), and
// stores it under tag. OCI Features are fetched once into cacheDir (a
// reference seen before is not asked for again: --pull-like freshness is
// the user's, by --fresh of the workspace's build cache); local ones are
// read from the project, confined. Nil when dc asks for none.
func InstallFeatures(ctx context.Context, dc *devcontainer.Config, base, tag string, o Options) (*FeatureResult, error) {
	want, err := dc.Features()
	if err != nil || len(want) == 0 {
		return nil, err
	}
	if _, err := image.ParseReference(base); err != nil || strings.ContainsAny(base, " \t\r\n") {
		return nil, fmt.Errorf("features: the base image %q: not an image reference", base)
	}
	tmp, err := os.MkdirTemp("", "cove-features-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	order, notes, err := resolveFeatures(ctx, dc, want, tmp, o)
	if err != nil {
		return nil, err
	}
	if order == nil {
		return &FeatureResult{Ref: base, Notes: notes}, nil
	}
	fc, err := newFeatureContext(ctx, dc, base, tmp, o)
	if err != nil {
		return nil, err
	}
	res := &FeatureResult{Ref: tag, Notes: notes}
	for i, f := range order {
		if err := fc.add(i, f); err != nil {
			return nil, err
		}
		res.Metadata = append(res.Metadata, featureMetadata(f))
		res.Order = append(res.Order, f.id)
	}
	dockerfile, err := fc.finish(tmp)
	if err != nil {
		return nil, err
	}
	if o.Output != nil {
		fmt.Fprintf(o.Output, "Features, in install order: %s\n", strings.Join(res.Order, ", "))
	}
	br, err := build.Build(ctx, o.Store, build.Options{
		Context: fc.dir, Dockerfile: dockerfile, Tag: tag,
		Binary: o.Binary, CacheDir: o.CacheDir, Output: o.Output, Pull: o.Pull,
		// A Feature's install.sh is the project's choice: confined too.
		// The base is the workspace's image, which the user chose.
		Confined: true, TrustedFrom: base,
	})
	if err != nil {
		if inner := errors.Unwrap(err); inner != nil {
			err = inner
		}
		return nil, fmt.Errorf("install the Features (%s): %w", strings.Join(res.Order, ", "), err)
	}
	res.Digest, res.Steps, res.Hits = br.Image.Digest.String(), br.Steps, br.Hits
	return res, nil
}

// resolveFeatures fetches the Features asked for and those they depend
// on, into tmp, and puts them in install order; none that asks for a
// privileged workspace is taken. The order is nil when there are none
// (every one asked for was left out); notes say what was read otherwise
// than written.
func resolveFeatures(ctx context.Context, dc *devcontainer.Config, want []devcontainer.Feature, tmp string, o Options) ([]*feature, []string, error) {
	r := &resolver{ctx: ctx, dc: dc, o: o, tmp: tmp, byKey: map[string]*feature{}}
	for _, w := range want {
		if _, err := r.resolve(w.ID, w.Options, true); err != nil {
			return nil, nil, err
		}
	}
	if len(r.all) == 0 {
		return nil, r.notes, nil
	}
	order, err := installOrder(r.all, dc.OverrideFeatureInstallOrder)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", dc.Path, err)
	}
	for _, f := range order {
		if f.meta.Privileged {
			return nil, nil, fmt.Errorf("%s: the Feature %s asks for a privileged workspace; cove does not run one (every capability and device of the host, and no filter): remove the Feature, or install what it installs another way", dc.Path, f.id)
		}
	}
	return order, r.notes, nil
}

// featureContext is the build context and Dockerfile that install the
// Features on the base: a directory per Feature, and a COPY and RUN of
// it each.
type featureContext struct {
	dir string // the build context
	df  strings.Builder
	// The users a Feature's install.sh is told of.
	containerUser, remoteUser string
	// imageUser is the base image's USER, set again after the installs.
	imageUser string
}

// newFeatureContext starts the Dockerfile on base, as root, and works
// out the users the install scripts are told of: the file's, else the
// image's metadata's, else the image's USER.
func newFeatureContext(ctx context.Context, dc *devcontainer.Config, base, tmp string, o Options) (*featureContext, error) {
	img, err := image.Pull(ctx, o.Store, base, o.Pull...)
	if err != nil {
		return nil, err
	}
	cfg, err := o.Store.ConfigFile(img)
	if err != nil {
		return nil, err
	}
	labelContainer, labelRemote := devcontainer.MetadataUsers(cfg.Config.Labels[devcontainer.MetadataLabel])
	fc := &featureContext{dir: filepath.Join(tmp, "context"), imageUser: cfg.Config.User}
	fc.containerUser = firstOf(dc.ContainerUser, labelContainer, cfg.Config.User, "root")
	fc.remoteUser = firstOf(dc.RemoteUser, labelRemote, fc.containerUser)
	fmt.Fprintf(&fc.df, "FROM %s\nUSER root\n", base)
	return fc, nil
}

// add stages the i-th Feature to install: its files, its options and the
// users as the spec's env files, the wrapper that runs its install.sh;
// and its containerEnv, COPY and RUN in the Dockerfile.
func (fc *featureContext) add(i int, f *feature) error {
	name := fmt.Sprintf("%d-%s", i, safeName(f.meta.ID, f.bare))
	staged := filepath.Join(fc.dir, name)
	if err := copyTree(f.dir, staged); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(staged, "devcontainer-features.env"), []byte(optionsEnv(f)), 0o644); err != nil {
		return err
	}
	builtin := envLine("_CONTAINER_USER", fc.containerUser) + envLine("_REMOTE_USER", fc.remoteUser)
	if err := os.WriteFile(filepath.Join(staged, "devcontainer-features.builtin.env"), []byte(builtin), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(staged, "cove-feature-install.sh"), []byte(installWrapper), 0o755); err != nil {
		return err
	}
	keys := make([]string, 0, len(f.meta.ContainerEnv))
	for k := range f.meta.ContainerEnv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	// containerEnv before the install, as the spec has it (and a PATH it
	// extends is the one the next Features see).
	for _, k := range keys {
		v := f.meta.ContainerEnv[k]
		if !envName().MatchString(k) || strings.ContainsAny(v, "\r\n\x00") {
			return fmt.Errorf("the Feature %s: containerEnv %q: not a variable cove can set", f.id, k)
		}
		fmt.Fprintf(&fc.df, "ENV %s=\"%s\"\n", k, strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v))
	}
	fmt.Fprintf(&fc.df, "COPY %s /tmp/cove-features/%s/\n", name, name)
	fmt.Fprintf(&fc.df, "RUN cd /tmp/cove-features/%s && sh ./cove-feature-install.sh && cd / && rm -rf /tmp/cove-features/%s\n", name, name)
	return nil
}

// finish gives the image its USER back (the installs ran as root) and
// writes the Dockerfile into tmp, outside the context, returning its path.
func (fc *featureContext) finish(tmp string) (string, error) {
	if u := fc.imageUser; u != "" && u != "root" && u != "0" && !strings.ContainsAny(u, " \t\r\n\\") {
		fmt.Fprintf(&fc.df, "USER %s\n", u)
	}
	dockerfile := filepath.Join(tmp, "Dockerfile")
	if err := os.WriteFile(dockerfile, []byte(fc.df.String()), 0o600); err != nil {
		return "", err
	}
	return dockerfile, nil
}

// featureMetadata is the Feature's entry for the workspace's merged
// metadata: the keys of its devcontainer-feature.json that go there.
func featureMetadata(f *feature) json.RawMessage {
	entry := map[string]json.RawMessage{}
	for _, k := range metadataKeys {
		if v, ok := f.raw[k]; ok {
			entry[k] = v
		}
	}
	b, _ := json.Marshal(entry)
	return b
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

var envName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })

// safeName is a Feature's directory name in the build: its id, reduced.
func safeName(id, bare string) string {
	if id == "" {
		id = path.Base(bare)
	}
	s := regexp.MustCompile(`[^A-Za-z0-9_.-]+`).ReplaceAllString(id, "_")
	if len(s) > 40 {
		s = s[:40]
	}
	return strings.Trim(s, ".")
}

// OptionEnvName is an option's environment variable, as the spec names
// it: non-word characters to _, leading digits and underscores to one _,
// upper case.
func OptionEnvName(option string) string {
	s := regexp.MustCompile(`[^\w_]`).ReplaceAllString(option, "_")
	s = regexp.MustCompile(`^[\d_]+`).ReplaceAllString(s, "_")
	return strings.ToUpper(s)
}

// optionsEnv is the Feature's devcontainer-features.env: every option it
// declares, with the user's value or its default, and any other the user
// gave, as shell assignments the wrapper sources.
func optionsEnv(f *feature) string {
	vals := map[string]string{}
	for k, o := range f.meta.Options {
		switch d := o.Default.(type) {
		case string:
			vals[k] = d
		case bool:
			vals[k] = fmt.Sprint(d)
		case float64:
			vals[k] = fmt.Sprint(d)
		}
	}
	for k, v := range f.options {
		vals[k] = v
	}
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(envLine(OptionEnvName(k), vals[k]))
	}
	return b.String()
}

// envLine is NAME='value' for sh, the value quoted whatever it holds.
func envLine(k, v string) string {
	return k + "='" + strings.ReplaceAll(v, "'", `'\''`) + "'\n"
}

// installWrapper runs a Feature's install.sh as the spec says: as root,
// in its folder, with its options and the users (and their homes, looked
// up inside the image: the host reads none of its files) exported.
const installWrapper = `set -e
home_of() {
	while IFS=: read -r n _ _ _ _ h _; do
		if [ "$n" = "$1" ]; then echo "$h"; return; fi
	done < /etc/passwd
	if [ "$1" = root ]; then echo /root; fi
}
set -a
. ./devcontainer-features.builtin.env
. ./devcontainer-features.env
_CONTAINER_USER_HOME=$(home_of "$_CONTAINER_USER")
_REMOTE_USER_HOME=$(home_of "$_REMOTE_USER")
set +a
chmod +x ./install.sh
./install.sh
`

// resolver fetches Features and what they depend on.
type resolver struct {
	ctx   context.Context
	dc    *devcontainer.Config
	o     Options
	tmp   string
	byKey map[string]*feature
	all   []*feature
	notes []string
}

// legacyRenamed are the old short names whose Feature was renamed.
var legacyRenamed = map[string]string{"golang": "go", "common": "common-utils", "docker-from-docker": "docker-outside-of-docker",
	"docker-in-docker": "docker-in-docker"}

// legacyFeatureID is the OCI reference of an old short Feature name.
func legacyFeatureID(id string) string {
	name, _, _ := strings.Cut(id, ":")
	if n, ok := legacyRenamed[name]; ok {
		name = n
	}
	return "ghcr.io/devcontainers/features/" + name + ":1"
}

func (r *resolver) resolve(id string, opts map[string]string, user bool) (*feature, error) {
	f := &feature{id: id, options: opts}
	var err error
	switch {
	case strings.HasPrefix(id, "./") || strings.HasPrefix(id, "../"):
		if !user {
			return nil, fmt.Errorf("features: a dependsOn names the local Feature %s: only the project's file may", id)
		}
		err = r.local(f)
	case strings.HasPrefix(id, "http://") || strings.HasPrefix(id, "https://"):
		if !r.dc.Trusted {
			// A URL is any request the project likes, from this host
			// (to its loopback services too): the user trusts the file
			// first, as for its other host-reaching settings.
			r.notes = append(r.notes, fmt.Sprintf("features: %s is fetched from this host by its URL, which the project chose: not installed until you trust the file (cove up --trust)", id))
			return nil, nil
		}
		err = r.tarball(f)
	default:
		if !strings.Contains(id, "/") {
			// An old short name: the devcontainers CLI reads these as
			// the migrated Features, major version 1.
			long := legacyFeatureID(id)
			r.notes = append(r.notes, fmt.Sprintf("features: %s is an old short name; it is read as %s", id, long))
			f.id = long
		}
		err = r.oci(f)
	}
	if err != nil {
		return nil, err
	}
	if prev, ok := r.byKey[f.key()]; ok {
		return prev, nil
	}
	if len(r.all) >= maxFeatures {
		return nil, fmt.Errorf("features: more than %d Features with their dependsOn", maxFeatures)
	}
	r.byKey[f.key()] = f
	r.all = append(r.all, f)
	if err := r.readMeta(f); err != nil {
		return nil, err
	}
	depIDs := make([]string, 0, len(f.meta.DependsOn))
	for d := range f.meta.DependsOn {
		depIDs = append(depIDs, d)
	}
	sort.Strings(depIDs)
	for _, d := range depIDs {
		dopts, err := devcontainer.FeatureOptions(f.meta.DependsOn[d])
		if err != nil {
			return nil, fmt.Errorf("the Feature %s: dependsOn %s: %w", f.id, d, err)
		}
		dep, err := r.resolve(d, dopts, false)
		if err != nil {
			return nil, fmt.Errorf("the Feature %s: dependsOn: %w", f.id, err)
		}
		if dep == nil {
			return nil, fmt.Errorf("the Feature %s depends on %s, which is held back: trust the file (cove up --trust), or remove the Feature", f.id, d)
		}
		f.deps = append(f.deps, dep.key())
	}
	return f, nil
}

// readMeta reads the Feature's devcontainer-feature.json from its
// fetched copy.
func (r *resolver) readMeta(f *feature) error {
	b, err := readCapped(filepath.Join(f.dir, "devcontainer-feature.json"), 1<<20)
	if err != nil {
		return fmt.Errorf("the Feature %s: devcontainer-feature.json: %w", f.id, err)
	}
	if err := json.Unmarshal(b, &f.meta); err != nil {
		return fmt.Errorf("the Feature %s: devcontainer-feature.json: %w", f.id, err)
	}
	if err := json.Unmarshal(b, &f.raw); err != nil {
		return fmt.Errorf("the Feature %s: devcontainer-feature.json: %w", f.id, err)
	}
	if fi, err := os.Lstat(filepath.Join(f.dir, "install.sh")); err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("the Feature %s has no install.sh", f.id)
	}
	return nil
}

// readCapped reads a file of cove's own copy, refusing a huge one.
func readCapped(p string, limit int64) ([]byte, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > limit {
		return nil, fmt.Errorf("not a regular file of at most %d bytes", limit)
	}
	return os.ReadFile(p)
}

// local copies the project's ./NAME Feature, read confined to the
// project, into a directory of cove's.
func (r *resolver) local(f *feature) error {
	rel, err := r.dc.LocalFeature(f.id)
	if err != nil {
		return err
	}
	d, err := projectfs.Open(r.dc.Project())
	if err != nil {
		return err
	}
	defer d.Close()
	f.dir = filepath.Join(r.tmp, "local", fmt.Sprint(len(r.all)), "f")
	f.bare = strings.TrimSuffix(f.id, "/")
	f.canonical = "local:" + rel
	var total int64
	files := 0
	err = fs.WalkDir(d.FS(), rel, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if files++; files > maxFeatureFiles {
			return fmt.Errorf("more than %d files", maxFeatureFiles)
		}
		out := filepath.Join(f.dir, strings.TrimPrefix(p, rel))
		switch {
		case e.IsDir():
			return os.MkdirAll(out, 0o755)
		case e.Type().IsRegular():
			b, err := d.ReadFileLimit(p, maxFeatureSize-total)
			if err != nil {
				return err
			}
			total += int64(len(b))
			fi, _ := e.Info()
			mode := os.FileMode(0o644)
			if fi != nil && fi.Mode()&0o111 != 0 {
				mode = 0o755
			}
			return os.WriteFile(out, b, mode)
		}
		return nil // a symlink, FIFO or device is not part of it
	})
	if err != nil {
		return fmt.Errorf("%s: features: %s: %w", r.dc.Path, f.id, err)
	}
	return nil
}

// oci fetches an OCI Feature: its manifest (config type
// application/vnd.devcontainers), and its one tar layer unpacked as a
// layer is (nothing out of its directory). A reference fetched before is
// taken from the cache without asking the registry, as cove pull does
// with an image it has, unless Options.Refresh says to ask again.
func (r *resolver) oci(f *feature) error {
	ref, err := name.ParseReference(f.id, name.WithDefaultTag("latest"))
	if err != nil {
		return fmt.Errorf("%s: features: %s: %w (an OCI reference such as ghcr.io/devcontainers/features/go:1, or ./NAME)", r.dc.Path, f.id, err)
	}
	f.bare = bareID(f.id)
	store := filepath.Join(r.o.CacheDir, "features")
	if err := os.MkdirAll(store, 0o700); err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(ref.Name()))
	refFile := filepath.Join(store, "ref-"+hex.EncodeToString(sum[:12]))
	if b, err := os.ReadFile(refFile); err == nil && !r.o.Refresh {
		var rec struct{ Canonical, Layer string }
		if json.Unmarshal(b, &rec) == nil && rec.Layer != "" {
			if fi, err := os.Stat(filepath.Join(store, rec.Layer)); err == nil && fi.IsDir() {
				f.canonical, f.dir = rec.Canonical, filepath.Join(store, rec.Layer)
				return nil
			}
		}
	}
	if r.o.Output != nil {
		fmt.Fprintf(r.o.Output, "fetching the Feature %s\n", f.id)
	}
	opts := []remote.Option{remote.WithContext(r.ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain), remote.WithUserAgent("cove")}
	desc, err := remote.Get(ref, opts...)
	if err != nil {
		return fmt.Errorf("features: fetch %s: %w%s", f.id, image.ExplainRegistryError(err), unreachableHint(err, ref))
	}
	m, err := v1.ParseManifest(bytes.NewReader(desc.Manifest))
	if err != nil {
		return fmt.Errorf("features: %s: not an OCI manifest: %w", f.id, err)
	}
	if string(m.Config.MediaType) != featureConfigType {
		return fmt.Errorf("features: %s is not a Feature (its config is %s, not %s)", f.id, m.Config.MediaType, featureConfigType)
	}
	var layer *v1.Descriptor
	for i := range m.Layers {
		if string(m.Layers[i].MediaType) == featureLayerType {
			layer = &m.Layers[i]
			break
		}
	}
	if layer == nil {
		return fmt.Errorf("features: %s has no layer of type %s", f.id, featureLayerType)
	}
	if layer.Size > maxFeatureSize {
		return fmt.Errorf("features: %s: its layer is %d bytes, more than the %d a Feature may be", f.id, layer.Size, maxFeatureSize)
	}
	f.canonical = ref.Context().Name() + "@" + desc.Digest.String()
	dirName := layer.Digest.Algorithm + "-" + layer.Digest.Hex
	f.dir = filepath.Join(store, dirName)
	if _, err := os.Stat(f.dir); err != nil {
		l, err := remote.Layer(ref.Context().Digest(layer.Digest.String()), opts...)
		if err != nil {
			return fmt.Errorf("features: fetch %s: %w", f.id, image.ExplainRegistryError(err))
		}
		rc, err := l.Compressed() // checked against its digest as it is read
		if err != nil {
			return fmt.Errorf("features: fetch %s: %w", f.id, err)
		}
		tmp, err := os.MkdirTemp(store, ".tmp-")
		if err != nil {
			rc.Close()
			return err
		}
		defer os.RemoveAll(tmp)
		_, err = image.Unpack(rc, tmp, maxFeatureSize)
		rc.Close()
		if err != nil {
			return fmt.Errorf("features: %s: %w", f.id, err)
		}
		if err := os.Rename(tmp, f.dir); err != nil && !errors.Is(err, fs.ErrExist) && !isNotEmpty(err) {
			return err
		}
	}
	rec, _ := json.Marshal(struct{ Canonical, Layer, Fetched string }{f.canonical, dirName, time.Now().UTC().Format(time.RFC3339)})
	return atomicfile.WriteFile(refFile, rec)
}

func isNotEmpty(err error) bool {
	return err != nil && strings.Contains(err.Error(), "directory not empty")
}

// copyTree copies cove's own copy of a Feature (regular files and
// directories: nothing else was kept) into the build context.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		switch {
		case e.IsDir():
			return os.MkdirAll(out, 0o755)
		case e.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fi, _ := e.Info()
			mode := os.FileMode(0o644)
			if fi != nil && fi.Mode()&0o111 != 0 {
				mode = 0o755
			}
			return os.WriteFile(out, b, mode)
		}
		return nil
	})
}

// bareID is a Feature reference without its tag or digest: how
// installsAfter and overrideFeatureInstallOrder name it.
func bareID(id string) string {
	if i := strings.Index(id, "@"); i >= 0 {
		return id[:i]
	}
	if i := strings.LastIndex(id, ":"); i > strings.LastIndex(id, "/") {
		return id[:i]
	}
	return strings.TrimSuffix(id, "/")
}

// named says whether a Feature is the one an installsAfter or the
// override names: by its reference without version, or by its id (or an
// id it had) under the same namespace.
func (f *feature) named(id string) bool {
	id = bareID(id)
	if id == f.bare || id == f.id {
		return true
	}
	ns := path.Dir(f.bare)
	if f.meta.ID != "" && (id == f.meta.ID || id == ns+"/"+f.meta.ID) {
		return true
	}
	for _, l := range f.meta.LegacyIDs {
		if id == l || id == ns+"/"+l {
			return true
		}
	}
	return false
}

// installOrder sorts the Features as the spec's rounds do: a round is
// every Feature whose dependsOn are installed and whose installsAfter
// (among these Features) are too; of those, only the ones
// overrideFeatureInstallOrder puts first (highest) go in this round; a
// round is in name order. A round with nothing ready is a cycle.
func installOrder(all []*feature, override []string) ([]*feature, error) {
	for _, o := range override {
		found := false
		for _, f := range all {
			found = found || f.named(o)
		}
		if !found {
			return nil, fmt.Errorf("overrideFeatureInstallOrder names %s, which is not among the features; add it to features, or remove it from the list", o)
		}
	}
	prio := func(f *feature) int {
		for i, o := range override {
			if f.named(o) {
				return len(override) - i
			}
		}
		return 0
	}
	installed := map[string]bool{}
	left := append([]*feature(nil), all...)
	var order []*feature
	for len(left) > 0 {
		var ready []*feature
		best := -1
		for _, f := range left {
			ok := true
			for _, d := range f.deps {
				ok = ok && installed[d]
			}
			for _, a := range f.meta.InstallsAfter {
				for _, g := range left {
					if g != f && g.named(a) {
						ok = false
					}
				}
			}
			if ok {
				ready = append(ready, f)
				best = max(best, prio(f))
			}
		}
		if len(ready) == 0 {
			var ids []string
			for _, f := range left {
				ids = append(ids, f.id)
			}
			return nil, fmt.Errorf("features: %s depend on each other in a circle (dependsOn, installsAfter): none can be installed first", strings.Join(ids, ", "))
		}
		var round []*feature
		for _, f := range ready {
			if prio(f) == best {
				round = append(round, f)
			}
		}
		sort.SliceStable(round, func(i, j int) bool {
			if round[i].bare != round[j].bare {
				return round[i].bare < round[j].bare
			}
			return round[i].key() < round[j].key()
		})
		for _, f := range round {
			installed[f.key()] = true
			order = append(order, f)
			for i, g := range left {
				if g == f {
					left = append(left[:i], left[i+1:]...)
					break
				}
			}
		}
	}
	return order, nil
}

// tarball fetches a Feature published as a .tgz at an http(s) URL (a
// trusted file's), once: a URL fetched before is taken from the cache.
func (r *resolver) tarball(f *feature) error {
	f.bare = f.id
	store := filepath.Join(r.o.CacheDir, "features")
	if err := os.MkdirAll(store, 0o700); err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(f.id))
	f.dir = filepath.Join(store, "url-"+hex.EncodeToString(sum[:16]))
	f.canonical = f.id
	if fi, err := os.Stat(f.dir); err == nil && fi.IsDir() {
		return nil
	}
	if r.o.Output != nil {
		fmt.Fprintf(r.o.Output, "fetching the Feature %s\n", f.id)
	}
	ctx, cancel := context.WithTimeout(r.ctx, 5*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.id, nil)
	if err != nil {
		return fmt.Errorf("features: %s: %w", f.id, err)
	}
	req.Header.Set("User-Agent", "cove")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("features: fetch %s: %w", f.id, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("features: fetch %s: %s", f.id, resp.Status)
	}
	tmp, err := os.MkdirTemp(store, ".tmp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if _, err := image.Unpack(io.LimitReader(resp.Body, maxFeatureSize), tmp, maxFeatureSize); err != nil {
		return fmt.Errorf("features: %s: %w", f.id, err)
	}
	if err := os.Rename(tmp, f.dir); err != nil && !errors.Is(err, fs.ErrExist) && !isNotEmpty(err) {
		return err
	}
	return nil
}

// unreachableHint is what to do when a Feature's registry cannot be
// reached from this machine at all: bring the Feature where it can be.
func unreachableHint(err error, ref name.Reference) string {
	var dnsErr *net.DNSError
	var opErr *net.OpError
	if !errors.As(err, &dnsErr) && !(errors.As(err, &opErr) && opErr.Op == "dial") {
		return ""
	}
	return fmt.Sprintf(" (or copy the Feature to a registry this machine reaches, crane copy %s REGISTRY/NAME, and name that in features; a local ./folder works too)", ref)
}
