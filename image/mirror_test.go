package image

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/cove-sh/cove/internal/testregistry"
)

// TestPullAsksMirrorsFirst: a reference on a registry that does not exist
// (registry.invalid) is pulled from its mirror, a real registry on
// 127.0.0.1, stored under the reference's own name; a mirror that fails
// (a 500, one that is down) is passed over for the next and then the
// registry itself; when all fail, the error names each.
func TestPullAsksMirrorsFirst(t *testing.T) {
	t.Parallel()
	addr := testregistry.InProcess(t)
	ref := push(t, addr, layered(t))
	rest := strings.TrimPrefix(ref, addr+"/")
	mirror := newProxy(t, addr)
	broken := newProxy(t, addr)
	broken.SetStatus(http.StatusInternalServerError)
	at := func(p *proxy) string { return strings.SplitN(p.Ref(ref), "/", 2)[0] }

	s := openStore(t)
	s.SetMirrors(Mirrors{"registry.invalid": {"127.0.0.1:1", at(broken), at(mirror)}})
	img, err := Pull(context.Background(), s, "registry.invalid/"+rest)
	if err != nil {
		t.Fatalf("pull through the mirror: %v", err)
	}
	if mirror.Blobs.Load() == 0 {
		t.Errorf("the layers did not come from the mirror")
	}
	if got, err := s.Get("registry.invalid/" + rest); err != nil || got.Digest != img.Digest {
		t.Errorf("not stored under the reference's name: %v", err)
	}

	// The registry itself after its mirrors: a dead mirror of addr.
	s2 := openStore(t)
	s2.SetMirrors(Mirrors{addr: {"127.0.0.1:1"}})
	if _, err := Pull(context.Background(), s2, ref); err != nil {
		t.Errorf("a dead mirror stopped the pull from the registry: %v", err)
	}

	s3 := openStore(t)
	s3.SetMirrors(Mirrors{"registry.invalid": {at(broken)}})
	_, err = Pull(context.Background(), s3, "registry.invalid/"+rest)
	if err == nil || !strings.Contains(err.Error(), "mirror "+at(broken)) || !strings.Contains(err.Error(), "registry.invalid") {
		t.Errorf("all failing: %v", err)
	}
}

func TestCheckMirrors(t *testing.T) {
	t.Parallel()
	for _, bad := range []Mirrors{{"docker.io": {"https://mirror.example"}}, {"docker.io/library": {"m.example"}}, {"docker.io": {"UPPER CASE"}}} {
		if CheckMirrors(bad) == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	if err := CheckMirrors(Mirrors{"docker.io": {"mirror.example:5000", "mirror.example/dockerhub"}}); err != nil {
		t.Error(err)
	}
}
