package image

import (
	"fmt"
	"net/http"
	"runtime"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Policy says when Pull contacts the image's source.
type Policy string

// Pull policies, as podman names them.
const (
	PullMissing Policy = "missing" // use the stored image of that name if there is one
	PullAlways  Policy = "always"  // resolve the name again; fetch only what changed
	PullNever   Policy = "never"   // fail unless the image is stored
)

// ParsePolicy checks a --pull value.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case PullMissing, PullAlways, PullNever:
		return p, nil
	}
	return "", fmt.Errorf("unknown pull policy %q: use missing, always or never", s)
}

type options struct {
	platform  v1.Platform
	jobs      int
	policy    Policy
	maxSize   int64
	keychain  authn.Keychain
	transport http.RoundTripper
	progress  func(Progress)
	tmpDir    string
	mirrors   Mirrors
	anyBase   bool // Import: any stored base will do (see Store.baseFor)
	// snapshotMin is the least compressed size of layers a snapshot is
	// kept for (planSnapshots).
	snapshotMin int64
}

// Option configures Pull.
type Option func(*options) error

func makeOptions(opts []Option) (*options, error) {
	o := &options{
		platform:    v1.Platform{OS: "linux", Architecture: runtime.GOARCH},
		jobs:        4,
		policy:      PullMissing,
		maxSize:     DefaultMaxSize,
		keychain:    authn.DefaultKeychain,
		progress:    func(Progress) {},
		snapshotMin: defaultSnapshotMin,
	}
	if runtime.GOARCH == "arm64" {
		o.platform.Variant = "v8"
	}
	for _, opt := range opts {
		if err := opt(o); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// WithPlatform picks the image for p out of a multi-platform index.
// The default is linux and the architecture cove was built for.
func WithPlatform(p v1.Platform) Option {
	return func(o *options) error {
		if p.OS == "" || p.Architecture == "" {
			return fmt.Errorf("platform %q: want OS/ARCH[/VARIANT]", p.String())
		}
		o.platform = p
		return nil
	}
}

// WithJobs sets how many layers download at once. The default is 4.
func WithJobs(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("jobs must be at least 1, not %d", n)
		}
		o.jobs = n
		return nil
	}
}

// WithPolicy sets when the source is contacted. The default is PullMissing.
func WithPolicy(p Policy) Option {
	return func(o *options) error { o.policy = p; return nil }
}

// WithMaxSize caps the file data one image may extract. The default is
// DefaultMaxSize (64 GiB).
func WithMaxSize(n int64) Option {
	return func(o *options) error {
		if n <= 0 {
			return fmt.Errorf("max size must be positive")
		}
		o.maxSize = n
		return nil
	}
}

// WithKeychain sets where registry credentials come from. The default is
// authn.DefaultKeychain (the Docker config and its credential helpers).
func WithKeychain(k authn.Keychain) Option {
	return func(o *options) error { o.keychain = k; return nil }
}

// WithTransport sets the HTTP transport for registry requests. The default
// is go-containerregistry's (http.DefaultTransport with retries).
func WithTransport(t http.RoundTripper) Option {
	return func(o *options) error { o.transport = t; return nil }
}

// WithMirrors has Pull ask m's mirrors of a registry before the registry
// (see Mirrors). The default is the store's (SetMirrors).
func WithMirrors(m Mirrors) Option {
	return func(o *options) error { o.mirrors = m; return nil }
}

// WithProgress has Pull report its progress to f, from several goroutines
// one call at a time. The default reports nothing.
func WithProgress(f func(Progress)) Option {
	return func(o *options) error { o.progress = f; return nil }
}

// Phase is the stage of one layer in a pull.
type Phase int

// The stages a layer goes through.
const (
	PhaseDownloading Phase = iota // Done/Total count compressed bytes
	PhaseCached                   // the blob was already in the store
	PhaseDownloaded
	PhaseExtracting
	PhaseExtracted
	PhaseRetrying // a transient error; Err says which
)

var phaseNames = [...]string{"downloading", "cached", "downloaded", "extracting", "extracted", "retrying"}

func (p Phase) String() string {
	if int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return fmt.Sprintf("Phase(%d)", int(p))
}

// Progress is one report from Pull.
type Progress struct {
	Layer v1.Hash
	Index int // 0-based position of the layer, base first
	Count int // number of layers
	Phase Phase
	Done  int64
	Total int64
	Err   error
}
