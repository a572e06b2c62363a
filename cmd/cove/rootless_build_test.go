package main

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cove-sh/cove/internal/execfile"
	"github.com/cove-sh/cove/internal/testimage"
	"github.com/cove-sh/cove/internal/testregistry"
	"github.com/cove-sh/cove/internal/userns"
	"github.com/cove-sh/cove/workspace"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	v1tarball "github.com/google/go-containerregistry/pkg/v1/tarball"
)

// rootlessUser is covetest with its subordinate ids, as cove run by it
// maps them; the test skips without them.
type rootlessUser struct {
	u        *user.User
	uid, gid int
	m        userns.IDMap
}

func needRangedUser(t *testing.T) rootlessUser {
	t.Helper()
	needRoot(t)
	u, uid, gid := testUser(t)
	sub, ok1 := userns.SubIDs("/etc/subuid", uid)
	subg, ok2 := userns.SubIDs("/etc/subgid", uid)
	if !ok1 || !ok2 {
		t.Skip("covetest has no subordinate ids (scripts/test.sh gives them)")
	}
	return rootlessUser{u, uid, gid, userns.IDMap{UID: uid, GID: gid, Ranged: true, UIDSub: sub, GIDSub: subg}}
}

// run runs the cove binary as the user with COVE_ROOT root.
func (r rootlessUser) run(t *testing.T, root string, args ...string) result {
	t.Helper()
	cmd, out, errb := coveProc(root, args...)
	asTestUser(cmd, r.u, r.uid, r.gid)
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{out.String(), errb.String(), code}
}

// ownersListing describes every entry under dir on one line: path, type,
// mode, owner (as the image sees it: the host ids of a rootless store
// mapped back through m; nil: as they are), and a symlink's target or,
// with content, a file's content hash (without, files are compared by
// type, mode and owner only).
func ownersListing(t *testing.T, dir string, m *userns.IDMap, content bool) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		uid, gid := int(st.Uid), int(st.Gid)
		if m != nil {
			uid, gid = m.ToContainer(uid, gid)
		}
		line := fmt.Sprintf("%v %d:%d", fi.Mode(), uid, gid)
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			line += " -> " + target
		case fi.Mode().IsRegular() && content:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			line += " " + hex.EncodeToString(sum[:8])
		}
		out[rel] = line
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// userBase is busybox with a user app (1000:1000) who owns /home/app, and
// USER app: a base like jupyter's or a devcontainers image's.
func userBase(t *testing.T) v1.Image {
	t.Helper()
	bb, err := testimage.BusyboxLayer()
	if err != nil {
		t.Skip(err)
	}
	home, profile := testimage.Dir("home/app", 0o755), testimage.File("home/app/.profile", "# app\n", 0o644)
	home.UID, home.GID, profile.UID, profile.GID = 1000, 1000, 1000, 1000
	l, err := testimage.Layer(testimage.Dir("home", 0o755), home, profile,
		testimage.File("etc/passwd", "root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000::/home/app:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n", 0o644),
		testimage.File("etc/group", "root:x:0:\napp:x:1000:\nnobody:x:65534:\n", 0o644))
	if err != nil {
		t.Fatal(err)
	}
	img, err := testimage.Image(runtime.GOARCH, bb, l)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Config.User = "app"
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// debianRef pushes a Debian 12 image made from a debootstrap'd tree
// (COVE_TEST_DEBIAN, else /var/cache/cove-test/debian-bookworm), or
// returns "" when there is none.
func debianRef(t *testing.T, addr string) string {
	t.Helper()
	dir := os.Getenv("COVE_TEST_DEBIAN")
	if dir == "" {
		dir = "/var/cache/cove-test/debian-bookworm"
	}
	if _, err := os.Stat(filepath.Join(dir, "usr/bin/apt-get")); err != nil {
		return ""
	}
	l, err := treeLayer(dir)
	if err != nil {
		t.Fatal(err)
	}
	img, err := testimage.Image(runtime.GOARCH, l)
	if err != nil {
		t.Fatal(err)
	}
	return testregistry.Push(t, addr, img)
}

// treeLayer is the tree at dir as one layer (tarDir).
func treeLayer(dir string) (v1.Layer, error) {
	return v1tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(tarDir(dir, pw)) }()
		return pr, nil
	})
}

// tarDir writes the tree at dir as a tar with its owners and modes,
// devices left out.
func tarDir(dir string, w io.Writer) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if fi.Mode()&(os.ModeDevice|os.ModeCharDevice|os.ModeSocket) != 0 {
			return nil
		}
		link := ""
		if fi.Mode()&os.ModeSymlink != 0 {
			link, _ = os.Readlink(p)
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		hdr.Name = rel
		hdr.Uname, hdr.Gname = "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, f)
			f.Close()
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// TestBuildRootlessSameAsRoot builds Dockerfiles as root and as a user with
// subordinate ids, and compares the stored images' trees: every path's
// type, mode and owner (the rootless store's host ids mapped back through
// the user's ranges) and contents. The cases are the ones that failed
// rootless when a rootless store kept no owners: a user made by a step
// who writes a new home, a base image whose USER writes its home, a 0700
// directory of another user in a step (the layer is read as that user's
// root), and, with a Debian image, apt-get install (apt's 0700 _apt
// directory).
func TestBuildRootlessSameAsRoot(t *testing.T) {
	t.Parallel()
	ru := needRangedUser(t)
	addr := testregistry.Addr(t)
	bb := busyboxRef(t)
	app := testregistry.Push(t, addr, userBase(t))
	cases := map[string]string{
		// busybox-static has no adduser: what useradd -m does, by hand.
		"useradd": "FROM " + bb + "\nRUN echo dev:x:1001:1001::/home/dev:/bin/sh >> /etc/passwd && echo dev:x:1001: >> /etc/group && mkdir -p -m 700 /home/dev && chown dev:dev /home/dev\n" +
			"RUN su dev -c 'echo hi > /home/dev/x && mkdir -m 700 /home/dev/private && echo s > /home/dev/private/s'\n",
		"user-base": "FROM " + app + "\nRUN touch /home/app/x && mkdir /home/app/.cache && id -u > /home/app/.cache/uid\n" +
			"USER root\nRUN echo root > /root-was-here\n",
		"private-dir": "FROM " + bb + "\nRUN mkdir -p /var/cache/priv && echo s > /var/cache/priv/f && chmod 600 /var/cache/priv/f && chown -R 100:101 /var/cache/priv && chmod 700 /var/cache/priv\n" +
			"COPY --chown=1234:5678 f /opt/f\nRUN test \"$(stat -c %u:%g /opt/f)\" = 1234:5678\n",
	}
	// ADD of a local archive keeps its owners, as root's build does.
	cases["add-archive"] = "FROM " + bb + "\nADD a.tar /opt/\nRUN stat -c %u:%g:%a /opt/d /opt/d/f > /seen\n"
	// COPY --from a stage's 0700 directory of another user (read in the
	// user namespace), and RUN --mount from it.
	cases["copy-from"] = "FROM " + bb + " AS b\nRUN mkdir -m 700 /home && echo s > /home/f && chown -R 1000:1000 /home\n" +
		"FROM " + bb + "\nCOPY --from=b /home /copied\nRUN --mount=type=bind,from=b,source=/home,target=/m cat /m/f > /mounted\n"
	// WORKDIR makes its directory the current USER's (as BuildKit does), and
	// a RUN as that user writes there, rootless as as root.
	cases["workdir-user"] = "FROM " + bb + "\nUSER 1000:1000\nWORKDIR /w/sub\nRUN touch /w/sub/mine\nUSER nobody\nRUN test -O /w/sub || ls -ld /w/sub\n"
	content := map[string]bool{"useradd": true, "user-base": true, "private-dir": true, "add-archive": true, "copy-from": true, "workdir-user": true}
	if deb := debianRef(t, addr); deb != "" {
		cases["apt"] = "FROM " + deb + "\nRUN apt-get update -q && apt-get install -y -q --no-install-recommends hello && useradd -m -u 1002 dev && su dev -c 'touch ~/made'\n"
	} else {
		t.Log("no Debian image (debootstrap --variant=minbase bookworm /var/cache/cove-test/debian-bookworm): apt not tried")
	}
	rootRoot := t.TempDir()
	userRoot := filepath.Join(rootlessBase(t, "cove-rootless-same-"), "root")
	os.Mkdir(userRoot, 0o700)
	os.Chown(userRoot, ru.uid, ru.gid)
	for name, df := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel() // two stores, a context and a ref each
			ctx := filepath.Join(filepath.Dir(userRoot), "ctx-"+name)
			os.Mkdir(ctx, 0o755)
			os.WriteFile(filepath.Join(ctx, "Dockerfile"), []byte(df), 0o644)
			os.WriteFile(filepath.Join(ctx, "f"), []byte("copied\n"), 0o644)
			writeOwnedTar(t, filepath.Join(ctx, "a.tar"))
			ref := "same/" + name + ":test"
			r := runProc(t, rootRoot, "", "build", "-q", "-t", ref, ctx)
			if r.code != 0 {
				t.Fatalf("build as root: %+v", r)
			}
			asRoot := filepath.Join(rootRoot, "images", "images", strings.TrimPrefix(strings.TrimSpace(r.stdout), "sha256:"), "rootfs")
			r = ru.run(t, userRoot, "build", "-q", "-t", ref, ctx)
			if r.code != 0 {
				t.Fatalf("build as %s: %+v", ru.u.Username, r)
			}
			asUser := filepath.Join(userRoot, "images", "images", strings.TrimPrefix(strings.TrimSpace(r.stdout), "sha256:"), "rootfs")
			want, got := ownersListing(t, asRoot, nil, content[name]), ownersListing(t, asUser, &ru.m, content[name])
			var diffs []string
			for _, p := range sortedUnion(want, got) {
				if want[p] != got[p] {
					diffs = append(diffs, fmt.Sprintf("%s: root %q, rootless %q", p, want[p], got[p]))
				}
			}
			if len(diffs) > 0 {
				t.Errorf("the image built rootless differs from root's (%d of %d paths):\n%s", len(diffs), len(want), strings.Join(diffs[:min(len(diffs), 40)], "\n"))
			}
		})
	}
}

// TestRootlessSystemReset: as a user with subordinate ids, a workspace
// from devcontainer.json whose local Feature makes a user with a home
// (useradd -m) and, on a Debian image, installs a package with apt starts;
// a build killed in a RUN that made a 0700 directory of another user
// leaves files prune --build-cache removes; cove system reset refuses
// while the workspace runs, naming it, and with --force leaves nothing
// under the user's cove directories (COVE_ROOT), exit 0, saying what it
// freed.
func TestRootlessSystemReset(t *testing.T) {
	t.Parallel()
	ru := needRangedUser(t)
	addr := testregistry.Addr(t)
	img, apt := debianRef(t, addr), true
	if img == "" {
		img, apt = busyboxRef(t), false
		t.Log("no Debian image (debootstrap --variant=minbase bookworm /var/cache/cove-test/debian-bookworm): the Feature makes its user by hand, without apt")
	}
	base := rootlessBase(t, "cove-rootless-reset-")
	project, root, bctx := filepath.Join(base, "project"), filepath.Join(base, "root"), filepath.Join(base, "ctx")
	install := "#!/bin/sh\nset -e\necho feat:x:1500:1500::/home/feat:/bin/sh >> /etc/passwd\necho feat:x:1500: >> /etc/group\nmkdir -m 700 -p /home/feat\necho hi > /home/feat/f\nchown -R feat:feat /home/feat\n"
	if apt {
		install = "#!/bin/sh\nset -e\napt-get update -q\napt-get install -y -q --no-install-recommends hello\nuseradd -m -u 1500 feat\nsu feat -c 'echo hi > ~/f'\n"
	}
	files := map[string]string{
		"project/.devcontainer/devcontainer.json":              `{"image": "` + img + `", "features": {"./feat": {}}}`,
		"project/.devcontainer/feat/devcontainer-feature.json": `{"id": "feat", "version": "1.0.0"}`,
		"project/.devcontainer/feat/install.sh":                install,
		"ctx/Dockerfile":                                       "FROM " + busyboxRef(t) + "\nRUN mkdir -m 700 /x && echo s > /x/f && chown -R 100:100 /x && touch /x-done && sleep 60\n",
	}
	for p, body := range files {
		full := filepath.Join(base, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		execfile.Write(full, []byte(body), 0o755)
	}
	os.Mkdir(root, 0o700)
	for _, d := range []string{project, root, bctx} {
		filepath.Walk(d, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, ru.uid, ru.gid) })
	}
	os.Chown(root, ru.uid, ru.gid)
	name := workspace.Name(project)
	defer ru.run(t, root, "rm", "-f", name)
	if r := ru.run(t, root, "up", "--detach", "--no-browser", project); r.code != 0 {
		t.Fatalf("rootless up with a Feature that makes a user: %+v", r)
	}
	check := "stat -c %U /home/feat /home/feat/f && cat /home/feat/f"
	if apt {
		check += " && hello"
	}
	want := "feat\nfeat\nhi\n"
	if apt {
		want += "Hello, world!\n"
	}
	if r := ru.run(t, root, "exec", name, "sh", "-c", check); r.stdout != want {
		t.Errorf("the Feature's user and package: %+v, want %q", r, want)
	}

	// A RUN that fails leaves nothing in the cache (its 0700 directory of
	// another user included).
	fctx := filepath.Join(base, "fctx")
	os.Mkdir(fctx, 0o755)
	os.WriteFile(filepath.Join(fctx, "Dockerfile"), []byte("FROM "+busyboxRef(t)+"\nRUN mkdir -m 700 /x && echo s > /x/f && chown -R 100:100 /x && false\n"), 0o644)
	if r := ru.run(t, root, "build", "-t", "failed:test", fctx); r.code == 0 {
		t.Errorf("a failing RUN built: %+v", r)
	}
	if m, _ := filepath.Glob(filepath.Join(root, "data", "build", "steps", ".tmp-*")); len(m) > 0 {
		t.Errorf("a failed RUN left %v", m)
	}

	// A build killed in a RUN.
	cmd, _, _ := coveProc(root, "build", "-t", "killed:test", bctx)
	asTestUser(cmd, ru.u, ru.uid, ru.gid)
	cmd.SysProcAttr.Setpgid = true
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if m, _ := filepath.Glob(filepath.Join(root, "data", "build", "steps", ".tmp-*", "diff", "x-done")); len(m) > 0 {
			break
		}
		if time.Now().After(deadline) {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			cmd.Wait()
			t.Fatal("the build's RUN did not get as far as /x-done in a minute")
		}
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	cmd.Wait()
	if r := ru.run(t, root, "prune", "--build-cache"); r.code != 0 {
		t.Errorf("prune --build-cache after a killed build: %+v", r)
	}
	if m, _ := filepath.Glob(filepath.Join(root, "data", "build", "steps", ".tmp-*")); len(m) > 0 {
		t.Errorf("prune --build-cache left the killed build's %v", m)
	}

	r := ru.run(t, root, "system", "reset")
	if r.code == 0 || !strings.Contains(r.stderr, "running: "+name) {
		t.Errorf("system reset with a workspace running: %+v, want a refusal naming %s", r, name)
	}
	r = ru.run(t, root, "system", "reset", "--force")
	if r.code != 0 || !strings.Contains(r.stdout, "freed ") || strings.Contains(r.stdout, "freed 0 B") {
		t.Fatalf("system reset --force: %+v", r)
	}
	left, _ := os.ReadDir(root)
	for _, e := range left {
		t.Errorf("left under COVE_ROOT after system reset: %s", e.Name())
	}
}

// TestRootlessPullWithoutSubIDs: a user whose cove finds no newuidmap
// (PATH without it) pulls as before, every file the user's, and is told
// once (not again on the next pull) what that costs and how to add
// ranges; cove doctor says it every time.
func TestRootlessPullWithoutSubIDs(t *testing.T) {
	t.Parallel()
	ru := needRangedUser(t)
	addr := testregistry.Addr(t)
	ref := testregistry.Push(t, addr, layered(t))
	root := filepath.Join(rootlessBase(t, "cove-rootless-nosubids-"), "root")
	os.Mkdir(root, 0o700)
	os.Chown(root, ru.uid, ru.gid)
	run := func(args ...string) result {
		cmd, out, errb := coveProc(root, args...)
		asTestUser(cmd, ru.u, ru.uid, ru.gid)
		cmd.Env = append(cmd.Env, "PATH=/nonexistent")
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		return result{out.String(), errb.String(), code}
	}
	const advice = "usermod --add-subuids 100000-165535 --add-subgids 100000-165535 covetest"
	r := run("pull", ref)
	if r.code != 0 || strings.Count(r.stderr, advice) != 2 || !strings.Contains(r.stderr, "note (said once)") {
		t.Fatalf("first pull without subordinate ids: %+v, want the advice said once as a note and once for the image's owners", r)
	}
	rootfs := filepath.Join(root, "images", "images", strings.TrimPrefix(strings.TrimSpace(r.stdout), "sha256:"), "rootfs")
	if fi, err := os.Stat(filepath.Join(rootfs, "srv/data/owned")); err != nil || int(fi.Sys().(*syscall.Stat_t).Uid) != ru.uid {
		t.Errorf("without subordinate ids the image's files are the user's: %v", err)
	}
	if r := run("pull", "-q", ref); r.code != 0 || strings.Contains(r.stderr, "said once") {
		t.Errorf("the note again: %+v", r)
	}
	if r := run("doctor"); !strings.Contains(r.stdout, advice) {
		t.Errorf("doctor without subordinate ids: %+v", r)
	}

	// The store as cove before this change left it (no owners in the
	// record), used once the user has ranges: it still works, builds on it
	// too, and cove pull and doctor say how to give it its owners.
	record := filepath.Join(filepath.Dir(rootfs), "image.json")
	b, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(record, []byte(strings.Replace(string(b), `"owners": "user"`, `"owners": ""`, 1)), 0o600)
	if r := ru.run(t, root, "pull", ref); r.code != 0 || !strings.Contains(r.stderr, "was stored before cove kept an image's owners rootless") {
		t.Errorf("pull of an image stored without owners, now with ranges: %+v", r)
	}
	if r := ru.run(t, root, "doctor"); !strings.Contains(r.stdout, "image owners") || !strings.Contains(r.stdout, ref) {
		t.Errorf("doctor with an image stored without owners: %+v", r)
	}
	ctx := filepath.Join(filepath.Dir(root), "ctx")
	os.Mkdir(ctx, 0o755)
	os.WriteFile(filepath.Join(ctx, "Dockerfile"), []byte("FROM "+ref+"\nRUN mkdir -m 700 /p && chown 7:7 /p && touch /srv/x\n"), 0o644)
	if r := ru.run(t, root, "build", "-t", "on-old:test", ctx); r.code != 0 {
		t.Errorf("build on an image stored without owners: %+v", r)
	}
	if r := ru.run(t, root, "run", "--rm", "on-old:test", "stat", "-c", "%u", "/p", "/srv/x"); r.stdout != "7\n0\n" {
		t.Errorf("the image built on it: %+v", r)
	}
	if r := ru.run(t, root, "system", "reset"); r.code != 0 {
		t.Errorf("system reset: %+v", r)
	}
}

// TestSystemResetAsRoot: as root, with a container running, a build and a
// pulled image, cove system reset refuses and names the container; with
// --force it stops it and leaves nothing under COVE_ROOT.
func TestSystemResetAsRoot(t *testing.T) {
	t.Parallel()
	needRoot(t)
	root := t.TempDir()
	bb := busyboxRef(t)
	ctx := buildContext(t, map[string]string{"Dockerfile": "FROM " + bb + "\nRUN mkdir -m 700 /p && chown 7:7 /p\n"})
	if r := runProc(t, root, "", "build", "-q", "-t", "reset:test", ctx); r.code != 0 {
		t.Fatalf("build: %+v", r)
	}
	if r := runProc(t, root, "", "run", "-d", "--name", "resetme", "--net", "none", bb, "sleep", "600"); r.code != 0 {
		t.Fatalf("run -d: %+v", r)
	}
	defer runProc(t, root, "", "rm", "-f", "resetme")
	if r := runProc(t, root, "", "system", "reset"); r.code == 0 || !strings.Contains(r.stderr, "running: resetme") {
		t.Errorf("system reset with a container running: %+v", r)
	}
	if r := runProc(t, root, "", "system", "reset", "--force"); r.code != 0 || !strings.Contains(r.stdout, "freed ") {
		t.Fatalf("system reset --force: %+v", r)
	}
	left, _ := os.ReadDir(root)
	for _, e := range left {
		t.Errorf("left under COVE_ROOT after system reset: %s", e.Name())
	}
}

// writeOwnedTar writes a tar archive with a 0700 directory and a file of
// uid 1000 (gid 1001).
func writeOwnedTar(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	tw.WriteHeader(&tar.Header{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o700, Uid: 1000, Gid: 1001})
	tw.WriteHeader(&tar.Header{Name: "d/f", Typeflag: tar.TypeReg, Mode: 0o640, Uid: 1000, Gid: 1001, Size: 3})
	tw.Write([]byte("hi\n"))
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
}

// pushTree pushes the tree at dir (tarDir) as a one-layer image to
// addr/repo and returns its reference.
func pushTree(dir, addr, repo string) (string, error) {
	l, err := treeLayer(dir)
	if err != nil {
		return "", err
	}
	img, err := testimage.Image(runtime.GOARCH, l)
	if err != nil {
		return "", err
	}
	ref, err := name.ParseReference(addr + "/" + repo)
	if err != nil {
		return "", err
	}
	if err := remote.Write(ref, img); err != nil {
		return "", fmt.Errorf("push the tree %s as %s: %w", dir, ref, err)
	}
	return ref.String(), nil
}
