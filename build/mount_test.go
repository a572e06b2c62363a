package build

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/moby/buildkit/frontend/dockerfile/instructions"
)

// TestPrepareMounts: what RUN --mount gives the RUN's container, without
// running one: a secret's file (its bytes, mode, default target), a
// secret in the environment only, one not given left out or refused when
// required; tmpfs and cache binds (a cache's directory by its id, and a
// confined build's scoped and in the key); the missing mount points
// (children first); and the refusals.
func TestPrepareMounts(t *testing.T) {
	t.Parallel()
	str := func(s string) *string { return &s }
	u64 := func(n uint64) *uint64 { return &n }
	newB := func(confined bool) *builder {
		b, err := newBuilder(nil, Options{Context: t.TempDir(), CacheDir: t.TempDir(), Confined: confined,
			Secrets: map[string][]byte{"tok": []byte("s3cret"), "npm": []byte("n")}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(b.tmp) })
		return b
	}
	st := &stage{cfg: v1.ConfigFile{Config: v1.Config{WorkingDir: "/w"}}}
	mounts := []*instructions.Mount{
		{Type: instructions.MountTypeSecret, CacheID: "tok", Mode: u64(0o440)},
		{Type: instructions.MountTypeSecret, CacheID: "npm", Env: str("NPM_TOKEN")},
		{Type: instructions.MountTypeSecret, CacheID: "absent"},
		{Type: instructions.MountTypeTmpfs, Target: "scratch"},
		{Type: instructions.MountTypeCache, Target: "/root/.cache", CacheSharing: instructions.MountSharingLocked},
	}
	b := newB(false)
	rm, err := b.prepareMounts(context.Background(), st, mounts)
	if err != nil {
		t.Fatal(err)
	}
	if len(rm.binds) != 3 {
		t.Fatalf("binds %+v, want a secret, a tmpfs and a cache", rm.binds)
	}
	secret := rm.binds[0]
	if secret.Target != "/run/secrets/tok" || !secret.ReadOnly {
		t.Errorf("secret bind %+v", secret)
	}
	if data, err := os.ReadFile(secret.Source); err != nil || string(data) != "s3cret" {
		t.Errorf("secret file: %q %v", data, err)
	}
	if fi, err := os.Stat(secret.Source); err != nil || fi.Mode().Perm() != 0o440 {
		t.Errorf("secret file mode: %v %v", fi, err)
	}
	if !reflect.DeepEqual(rm.env, []string{"NPM_TOKEN=n"}) {
		t.Errorf("env %q, want NPM_TOKEN=n", rm.env)
	}
	if tmpfs := rm.binds[1]; tmpfs.Target != "/w/scratch" || tmpfs.ReadOnly {
		t.Errorf("tmpfs bind %+v", tmpfs)
	}
	cache := rm.binds[2]
	if len(rm.cache) != 1 || rm.cache[0].bind != 2 || rm.cache[0].sharing != instructions.MountSharingLocked ||
		cache.Source != filepath.Join(rm.cache[0].dir, "data") || !strings.HasPrefix(cache.Source, filepath.Join(b.opts.CacheDir, "mounts")) {
		t.Errorf("cache %+v, bind %+v", rm.cache, cache)
	}
	wantStubs := []string{"/w/scratch", "/w", "/run/secrets/tok", "/run/secrets", "/run", "/root/.cache", "/root"}
	if !sameSet(rm.stubs, wantStubs) || rm.stubs[0] < rm.stubs[len(rm.stubs)-1] {
		t.Errorf("stubs %q, want %q children first", rm.stubs, wantStubs)
	}

	// The same cache id in a confined build is its own directory, and
	// the scope is in the step's key.
	cb := newB(true)
	crm, err := cb.prepareMounts(context.Background(), st, mounts[4:])
	if err != nil {
		t.Fatal(err)
	}
	plain, err := b.prepareMounts(context.Background(), st, mounts[4:])
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(crm.cache[0].dir) == filepath.Base(plain.cache[0].dir) || crm.key == plain.key {
		t.Errorf("a confined build's cache is shared: %s %s, keys %s %s", crm.cache[0].dir, plain.cache[0].dir, crm.key, plain.key)
	}

	for _, tc := range []struct {
		m    instructions.Mount
		want string
	}{
		{instructions.Mount{Type: instructions.MountTypeSecret, CacheID: "absent", Required: true}, "--mount=type=secret,id=absent: no such secret"},
		{instructions.Mount{Type: instructions.MountTypeSSH}, "--mount=type=ssh is not supported"},
		{instructions.Mount{Type: instructions.MountTypeTmpfs}, "--mount=type=tmpfs needs a target"},
		{instructions.Mount{Type: instructions.MountTypeCache, Target: "/c", From: "x"}, "--mount=type=cache,from= is not supported yet"},
		{instructions.Mount{Type: instructions.MountTypeBind}, "--mount=type=bind needs a target"},
	} {
		if _, err := b.prepareMounts(context.Background(), st, []*instructions.Mount{&tc.m}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.m, err, tc.want)
		}
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]bool{}
	for _, s := range a {
		m[s] = true
	}
	for _, s := range b {
		if !m[s] {
			return false
		}
	}
	return true
}
