package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cove-sh/cove/internal/testimage"
	"github.com/cove-sh/cove/workspace"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	v1tarball "github.com/google/go-containerregistry/pkg/v1/tarball"
)

// privateArchive writes, outside any project, a docker-archive of an image
// holding a file only this machine has (a private image of the user's).
func privateArchive(t *testing.T) string {
	t.Helper()
	l, err := testimage.Layer(testimage.File("private.txt", "private-image-bytes\n", 0o644))
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(layered(t), l)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "private.tar")
	tag, _ := name.NewTag("example.com/private:v1")
	if err := v1tarball.WriteToFile(p, tag, img); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestUntrustedFileNamesNoLocalImage: an untrusted devcontainer.json's
// "image" names what to pull from a registry, never a file or directory
// on this machine (oci:, oci-archive:, docker-archive:), which would put
// one of the user's private images, chosen by path by the project, in the
// workspace; it is held back and said, as the other host-reaching keys,
// and the start stops rather than run another image.
func TestUntrustedFileNamesNoLocalImage(t *testing.T) {
	t.Parallel()
	needRoot(t)
	base := busyboxRef(t)
	archive := privateArchive(t)
	project, root := devcontainerProject(t, `{"image": "docker-archive:`+archive+`"}`)
	name := workspace.Name(project)
	r := runProc(t, root, "", "up", "--detach", project)
	if r.code == 0 {
		if got := runProc(t, root, "", "exec", name, "cat", "/private.txt"); strings.Contains(got.stdout, "private-image-bytes") {
			t.Errorf("an untrusted file put the host's private image in the workspace: %+v", got)
		}
	}
	// Held back, it is not replaced by another image either: the start
	// stops, saying why and what to do.
	if r.code == 0 || !strings.Contains(r.stderr, "the image docker-archive:"+archive+" is a file on this host") || !strings.Contains(r.stderr, "cove up --trust, or give an image with --image") {
		t.Errorf("up: %+v, want the local image held back and the start refused", r)
	}
	if running(t, root, name) {
		t.Error("a refused start left a workspace running")
	}
	// A confined build (devcontainer.json's build) takes images from
	// registries only: FROM and COPY --from naming a file here are refused.
	for _, line := range []string{"FROM docker-archive:" + archive, "FROM " + base + "\nCOPY --from=docker-archive:" + archive + " /private.txt /p"} {
		p, root := devcontainerProject(t, `{"build": {"dockerfile": "Dockerfile"}}`)
		os.WriteFile(filepath.Join(p, ".devcontainer", "Dockerfile"), []byte(line+"\n"), 0o644)
		r := runProc(t, root, "", "up", "--detach", p)
		if r.code == 0 || !strings.Contains(r.stderr, "a confined build takes images from registries only") {
			t.Errorf("%q: %+v, want refused", line, r)
		}
		if got := runProc(t, root, "", "exec", workspace.Name(p), "cat", "/private.txt", "/p"); strings.Contains(got.stdout, "private-image-bytes") {
			t.Errorf("%q: the host's private image reached the workspace", line)
		}
	}
	// Trusted, the file may name one (the user chose it), and its
	// Features build on it.
	p, root2 := devcontainerProject(t, `{"image": "docker-archive:`+archive+`", "features": {"./feat": {}}}`)
	os.MkdirAll(filepath.Join(p, ".devcontainer", "feat"), 0o755)
	os.WriteFile(filepath.Join(p, ".devcontainer", "feat", "devcontainer-feature.json"), []byte(`{"id": "feat", "version": "1.0.0"}`), 0o644)
	os.WriteFile(filepath.Join(p, ".devcontainer", "feat", "install.sh"), []byte("#!/bin/sh\necho installed > /feat.txt\n"), 0o755)
	if r := runEnv(t, root2, []string{"HOME=" + t.TempDir()}, "up", "--detach", "--trust", p); r.code != 0 {
		t.Fatalf("trusted up: %+v", r)
	}
	if got := runProc(t, root2, "", "exec", workspace.Name(p), "cat", "/private.txt", "/feat.txt"); got.stdout != "private-image-bytes\ninstalled\n" {
		t.Errorf("trusted, with a Feature: %+v", got)
	}
}
