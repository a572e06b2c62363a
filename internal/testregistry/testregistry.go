// Package testregistry connects tests to the real registry server that
// scripts/registry.sh runs, starts an in-process one (go-containerregistry's
// pkg/registry) for tests where the registry's own make is not the point,
// and puts a proxy in front of either that can break what it forwards.
package testregistry

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Addr returns HOST:PORT of the registry scripts/registry.sh started. It
// skips the test when there is none, except under CI, where it fails.
func Addr(t testing.TB) string {
	t.Helper()
	return envAddr(t, "COVE_TEST_REGISTRY")
}

// AuthAddr returns HOST:PORT of the registry that wants a login (user
// User, password Password); like Addr, it skips without one outside CI.
func AuthAddr(t testing.TB) string {
	t.Helper()
	return envAddr(t, "COVE_TEST_REGISTRY_AUTH")
}

func envAddr(t testing.TB, name string) string {
	t.Helper()
	addr := os.Getenv(name)
	if addr == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not set: CI must start the registries (scripts/registry.sh start)", name)
		}
		t.Skipf("%s is not set: export $(scripts/registry.sh start)", name)
	}
	return addr
}

// InProcess starts a registry in this process (go-containerregistry's
// pkg/registry, blobs in memory) on a loopback port, closed when the test
// ends, and returns its HOST:PORT. It needs nothing installed and starts
// in a millisecond; end-to-end tests keep Addr's real server (Debian's
// docker-registry), whose behaviour is what users meet.
func InProcess(t testing.TB) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// The login of the registry at AuthAddr (scripts/registry.sh sets it).
const (
	User     = "cove"
	Password = "cove-secret"
)

var seq atomic.Int64

// Push writes img to a fresh repository and returns its reference.
func Push(t testing.TB, addr string, img v1.Image, opts ...remote.Option) string {
	t.Helper()
	repo := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	ref := fmt.Sprintf("%s/test/%s-%d-%d:latest", addr, repo, os.Getpid(), seq.Add(1))
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img, opts...); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	return ref
}

// Proxy stands between the code under test and the real registry. Its
// fields may be changed while it runs, under Mu.
type Proxy struct {
	srv      *httptest.Server
	upstream string
	// Blobs counts the blob GETs it received.
	Blobs atomic.Int64

	Mu sync.Mutex
	// BreakBlob, if set, may answer a blob GET itself (returning true);
	// returning false lets the request through.
	BreakBlob func(w http.ResponseWriter, r *http.Request) bool
	// Status, if non-zero, is the answer to every request.
	Status int
}

// NewProxy starts a proxy to the registry at upstream, closed when the test ends.
func NewProxy(t testing.TB, upstream string) *Proxy {
	t.Helper()
	p := &Proxy{upstream: upstream}
	u, _ := url.Parse("http://" + upstream)
	rp := httputil.NewSingleHostReverseProxy(u)
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.Mu.Lock()
		status, brk := p.Status, p.BreakBlob
		p.Mu.Unlock()
		if status != 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			fmt.Fprintf(w, `{"errors":[{"code":"UNKNOWN","message":"proxy says %d"}]}`, status)
			return
		}
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/sha256:") {
			p.Blobs.Add(1)
			if brk != nil && brk(w, r) {
				return
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// Ref rewrites a reference to the registry so that it goes through the proxy.
func (p *Proxy) Ref(ref string) string {
	_, rest, _ := strings.Cut(ref, "/")
	return strings.TrimPrefix(p.srv.URL, "http://") + "/" + rest
}

// SetStatus makes the proxy answer every request with code (0: forward).
func (p *Proxy) SetStatus(code int) {
	p.Mu.Lock()
	p.Status = code
	p.Mu.Unlock()
}

// SetBreakBlob sets BreakBlob under the lock.
func (p *Proxy) SetBreakBlob(f func(w http.ResponseWriter, r *http.Request) bool) {
	p.Mu.Lock()
	p.BreakBlob = f
	p.Mu.Unlock()
}

// Upstream fetches the blob r asks for straight from the registry, for a
// BreakBlob handler to mangle.
func (p *Proxy) Upstream(r *http.Request) ([]byte, error) {
	resp, err := http.Get("http://" + p.upstream + r.URL.Path)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}
