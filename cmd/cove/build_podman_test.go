package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"
)

// treeListing describes every entry under dir on one line: path, type,
// mode, owner, a symlink's target or a file's content hash, and its
// xattrs (names and values; the ones only overlayfs and SELinux write
// left out).
func treeListing(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := ownersListing(t, dir, nil, true)
	for rel, line := range out {
		if x := xattrList(filepath.Join(dir, rel)); x != "" {
			out[rel] = line + " " + x
		}
	}
	return out
}

// xattrList is p's xattrs as "xattrs[name=value ...]", sorted; "" if none.
func xattrList(p string) string {
	size, err := unix.Llistxattr(p, nil)
	if err != nil || size == 0 {
		return ""
	}
	buf := make([]byte, size)
	if size, err = unix.Llistxattr(p, buf); err != nil {
		return ""
	}
	var attrs []string
	for _, name := range strings.Split(string(buf[:size]), "\x00") {
		if name == "" || name == "security.selinux" || strings.HasPrefix(name, "trusted.overlay.") {
			continue
		}
		val := make([]byte, 4096)
		n, err := unix.Lgetxattr(p, name, val)
		if err != nil {
			continue
		}
		attrs = append(attrs, fmt.Sprintf("%s=%q", name, val[:n]))
	}
	if len(attrs) == 0 {
		return ""
	}
	sort.Strings(attrs)
	return "xattrs[" + strings.Join(attrs, " ") + "]"
}

// buildahMountPoints are what buildah leaves in a RUN's layer where the
// image had no mount point: empty directories and empty 0755 files. Cove
// drops them (they are the runtime's, not the command's); a choice.
var buildahMountPoints = map[string]bool{"dev": true, "proc": true, "sys": true, "run": true,
	"etc/hostname": true, "etc/hosts": true, "etc/resolv.conf": true}

// podmanPeer runs Debian's podman (4.3, buildah 1.28 inside) on storage
// of its own: vfs, runc, no systemd.
type podmanPeer struct{ dir string }

func (p podmanPeer) run(args ...string) (string, error) {
	cmd := exec.Command("podman", append([]string{"--root", filepath.Join(p.dir, "storage"), "--runroot", filepath.Join(p.dir, "run"),
		"--storage-driver", "vfs", "--cgroup-manager", "cgroupfs", "--events-backend", "file", "--runtime", "runc"}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("podman %v: %v: %s", args, err, errb.String())
	}
	return out.String(), nil
}

// config is the image config podman stored, as Docker's format has it
// (read from a docker-dir copy: podman inspect leaves out Shell and
// OnBuild).
func (p podmanPeer) config(t *testing.T, ref string) *v1.ConfigFile {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "img")
	if _, err := p.run("image", "save", "--format", "docker-dir", "-o", dir, ref); err != nil {
		t.Fatal(err)
	}
	var m v1.Manifest
	raw, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err == nil {
		err = json.Unmarshal(raw, &m)
	}
	if err == nil {
		raw, err = os.ReadFile(filepath.Join(dir, m.Config.Digest.Hex))
	}
	var cf v1.ConfigFile
	if err == nil {
		err = json.Unmarshal(raw, &cf)
	}
	if err != nil {
		t.Fatalf("podman's config of %s: %v", ref, err)
	}
	delete(cf.Config.Labels, "io.buildah.version")
	if len(cf.Config.Labels) == 0 {
		cf.Config.Labels = nil
	}
	return &cf
}

// configFields are the parts of an image config compared, by name, each
// as JSON; an empty list or map is none (buildah writes [] and {} where
// BuildKit leaves the field out; to a runtime they are alike).
func configFields(cf *v1.ConfigFile) map[string]string {
	c := cf.Config
	out := map[string]string{}
	for name, v := range map[string]any{"Env": c.Env, "Cmd": c.Cmd, "Entrypoint": c.Entrypoint, "WorkingDir": c.WorkingDir,
		"User": c.User, "Labels": c.Labels, "ExposedPorts": c.ExposedPorts, "Volumes": c.Volumes, "StopSignal": c.StopSignal,
		"Healthcheck": c.Healthcheck, "Shell": c.Shell, "OnBuild": c.OnBuild, "Author": cf.Author} {
		b, _ := json.Marshal(v)
		if string(b) == "[]" || string(b) == "{}" {
			b = []byte("null")
		}
		out["config."+name] = string(b)
	}
	return out
}

// TestBuildSameAsPodman builds Dockerfiles modelled on the Dockerfile
// reference's examples (podmanCases) with cove and with podman build
// --format docker, and compares the root filesystems (paths, types,
// modes, owners, symlink targets, contents, xattrs) and the configs (Env,
// Cmd, Entrypoint, WorkingDir, User, Labels, ExposedPorts, Volumes,
// StopSignal, Healthcheck, Shell, OnBuild, Author). Where podman 4.3 is
// known to depart from the reference (podmanDepartures, each with the
// reference's sentence), the test asserts that podman still differs and
// that cove gives what the reference says. Besides those:
// buildahMountPoints and the label io.buildah.version podman adds.
func TestBuildSameAsPodman(t *testing.T) {
	t.Parallel()
	needRoot(t)
	if _, err := exec.LookPath("podman"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("podman is not installed: scripts/test.sh installs it")
		}
		t.Skip("podman is not installed (apt-get install podman)")
	}
	base := busyboxRef(t)
	root := t.TempDir()
	pod := podmanPeer{t.TempDir()}
	// The base is stored on both sides before any case: a case's cold
	// build is then the build's own work, as docs/performance.md counts it.
	if r := runProc(t, root, "", "pull", base); r.code != 0 {
		t.Fatalf("cove pull: %+v", r)
	}
	if _, err := pod.run("pull", "--tls-verify=false", base); err != nil {
		t.Fatal(err)
	}
	cases := podmanCases(t, base)
	for _, d := range podmanDepartures {
		if !slices.ContainsFunc(cases, func(c podmanCase) bool { return c.name == d.cases }) {
			t.Errorf("departure %s: no case %s", d.name, d.cases)
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Apart: a context, a ref and a podman tag each (the times
			// logged are then those of builds side by side).
			t.Parallel()
			tc.compare(t, root, pod)
		})
	}
}

// podmanCase is one Dockerfile built on both sides.
type podmanCase struct {
	name, dockerfile string
	files            map[string]string      // the context, as buildContext takes it
	modes            map[string]os.FileMode // context entries chmod-ed after
	xattrs           map[string]string      // context path → "user.NAME=VALUE" set on it
	args             []string               // --build-arg K=V on both sides
	// timed: with COVE_TEST_BUILD_TIMES set, a cold and a warm build on
	// each side, podman with its layer cache, and the times logged
	// (docs/performance.md); else one build each, podman without layers.
	timed bool
}

// departure is a known place where podman 4.3 (buildah 1.28) builds a
// case otherwise than the Dockerfile reference says. Cove follows the
// reference: the test asserts that cove gives want there and that podman
// still gives something else, so that a change on either side shows.
type departure struct {
	name  string // what podmanDepartures calls it
	cases string // the podmanCase it is found in
	// what is a path in the root filesystem, "config.FIELD", or "build":
	// podman refuses the Dockerfile, and wants list what cove's image
	// holds instead (paths and config fields).
	what  string
	ref   string // the reference's sentence podman breaks (and how)
	want  string // cove's listing line or config JSON there ("" where there is none)
	wants map[string]string
}

func (tc podmanCase) context(t *testing.T) string {
	t.Helper()
	ctx := buildContext(t, merge(tc.files, map[string]string{"Dockerfile": tc.dockerfile}))
	for p, mode := range tc.modes {
		if err := os.Chmod(filepath.Join(ctx, p), mode); err != nil {
			t.Fatal(err)
		}
	}
	for p, attr := range tc.xattrs {
		name, val, _ := strings.Cut(attr, "=")
		if err := unix.Lsetxattr(filepath.Join(ctx, p), name, []byte(val), 0); err != nil {
			t.Fatalf("setxattr %s on %s: %v", name, p, err)
		}
	}
	return ctx
}

// build builds the case on both sides (twice each, timed, for a timed
// case) and returns cove's image digest and podman's error, if it failed.
func (tc podmanCase) build(t *testing.T, root string, pod podmanPeer, ctx string) (string, error) {
	t.Helper()
	ref, tag := "same/"+tc.name+":test", "localhost/same-"+tc.name
	coveArgs := []string{"build", "-t", ref}
	timed := tc.timed && os.Getenv("COVE_TEST_BUILD_TIMES") != ""
	// Without layers podman commits once, at the end: no cache to warm,
	// and several seconds less a case.
	podArgs := []string{"build", "--format", "docker", "--network", "host", "--layers=" + fmt.Sprint(timed), "-t", tag}
	for _, a := range tc.args {
		coveArgs = append(coveArgs, "--build-arg", a)
		podArgs = append(podArgs, "--build-arg", a)
	}
	passes := []string{"once"}
	if timed {
		passes = []string{"cold", "warm"}
	}
	var times []string
	var digest string
	var podErr error
	for _, pass := range passes {
		start := time.Now()
		r := runProc(t, root, "", append(coveArgs, ctx)...)
		if r.code != 0 {
			t.Fatalf("cove build: %+v", r)
		}
		digest = strings.TrimPrefix(strings.TrimSpace(r.stdout), "sha256:")
		coveTime := time.Since(start)
		start = time.Now()
		_, podErr = pod.run(append(podArgs, ctx)...)
		times = append(times, fmt.Sprintf("%s: cove %v, podman %v", pass, coveTime.Round(time.Millisecond), time.Since(start).Round(time.Millisecond)))
	}
	t.Log(strings.Join(times, "; "))
	return digest, podErr
}

func (tc podmanCase) compare(t *testing.T, root string, pod podmanPeer) {
	ctx := tc.context(t)
	digest, podErr := tc.build(t, root, pod, ctx)
	cove := treeListing(t, filepath.Join(root, "images", "images", digest, "rootfs"))
	for k, v := range configFields(imageConfig(t, root, "same/"+tc.name+":test")) {
		cove[k] = v
	}
	if d, ok := tc.departure("build"); ok {
		if podErr == nil {
			t.Errorf("%s: podman now builds it (%s): drop the departure and compare", d.name, d.ref)
		}
		for what, want := range d.wants {
			if cove[what] != want {
				t.Errorf("%s: %s: cove %q, want %q (the reference: %s)", d.name, what, cove[what], want, d.ref)
			}
		}
		return
	}
	if podErr != nil {
		t.Fatal(podErr)
	}
	tag := "localhost/same-" + tc.name
	mnt, err := pod.run("image", "mount", tag)
	if err != nil {
		t.Fatal(err)
	}
	defer pod.run("image", "unmount", tag)
	peer := treeListing(t, strings.TrimSpace(mnt))
	for k, v := range configFields(pod.config(t, tag)) {
		peer[k] = v
	}
	known := map[string]bool{}
	for _, d := range podmanDepartures {
		if d.cases != tc.name {
			continue
		}
		known[d.what] = true
		if cove[d.what] != d.want {
			t.Errorf("%s: %s: cove %q, want %q (the reference: %s)", d.name, d.what, cove[d.what], d.want, d.ref)
		}
		if peer[d.what] == cove[d.what] {
			t.Errorf("%s: %s: podman now agrees with cove (%s): drop the departure", d.name, d.what, d.ref)
		}
	}
	var diffs []string
	for _, p := range sortedUnion(cove, peer) {
		if known[p] || cove[p] == "" && buildahMountPoints[p] {
			continue
		}
		if cove[p] != peer[p] {
			diffs = append(diffs, fmt.Sprintf("%s: cove %s, podman %s", p, cove[p], peer[p]))
		}
	}
	if len(diffs) > 0 {
		t.Errorf("cove and podman differ:\n%s", strings.Join(diffs, "\n"))
	}
}

func (tc podmanCase) departure(what string) (departure, bool) {
	for _, d := range podmanDepartures {
		if d.cases == tc.name && d.what == what {
			return d, true
		}
	}
	return departure{}, false
}

func merge(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

func sortedUnion(a, b map[string]string) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range []map[string]string{a, b} {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}
