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
	"strings"
	"syscall"
	"testing"

	"github.com/cove-sh/cove/internal/testimage"
	"github.com/cove-sh/cove/internal/testregistry"
	"github.com/cove-sh/cove/internal/userns"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
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

// ownersListing is treeListing with each owner as the image sees it: the
// host ids of a rootless store mapped back through m (nil: as they are).
// With content false, files are compared by type, mode and owner only.
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
	img, err := testimage.Image("amd64", bb, l)
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
	l, err := v1tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(tarDir(dir, pw)) }()
		return pr, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	img, err := testimage.Image("amd64", l)
	if err != nil {
		t.Fatal(err)
	}
	return testregistry.Push(t, addr, img)
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
	content := map[string]bool{"useradd": true, "user-base": true, "private-dir": true}
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
			ctx := filepath.Join(filepath.Dir(userRoot), "ctx-"+name)
			os.Mkdir(ctx, 0o755)
			os.WriteFile(filepath.Join(ctx, "Dockerfile"), []byte(df), 0o644)
			os.WriteFile(filepath.Join(ctx, "f"), []byte("copied\n"), 0o644)
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
