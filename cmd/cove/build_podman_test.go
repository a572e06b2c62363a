package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// treeListing describes every entry under dir on one line: path, type,
// mode, owner, and a symlink's target or a file's content hash.
func treeListing(t *testing.T, dir string) map[string]string {
	t.Helper()
	return ownersListing(t, dir, nil, true)
}

// buildahMountPoints are what buildah leaves in a RUN's layer where the
// image had no mount point: empty directories and empty 0755 files. Cove
// drops them (they are the runtime's, not the command's); a choice.
var buildahMountPoints = map[string]bool{"dev": true, "proc": true, "sys": true, "run": true,
	"etc/hostname": true, "etc/hosts": true, "etc/resolv.conf": true}

// TestBuildSameAsPodman builds Dockerfiles with cove and with podman
// (Debian's, buildah inside, runc) and compares the root filesystems
// (paths, types, modes, owners, symlink targets, contents) and the
// configs. Documented differences: buildahMountPoints; the label
// io.buildah.version podman adds; WORKDIR makes its directory even when no
// later step writes there, as BuildKit does (buildah makes it lazily).
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
	pod := t.TempDir()
	podman := func(args ...string) (string, error) {
		cmd := exec.Command("podman", append([]string{"--root", filepath.Join(pod, "storage"), "--runroot", filepath.Join(pod, "run"),
			"--storage-driver", "vfs", "--cgroup-manager", "cgroupfs", "--events-backend", "file", "--runtime", "runc"}, args...)...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		if err != nil {
			return out.String(), fmt.Errorf("podman %v: %v: %s", args, err, errb.String())
		}
		return out.String(), nil
	}
	dockerfiles := map[string]string{
		"run":          "FROM BASE\nRUN mkdir -p /srv/a && echo hi > /srv/a/f && chmod 0640 /srv/a/f && chown 1000:1000 /srv/a/f && ln -s a/f /srv/link && rm /etc/group && chmod 4755 /bin/busybox\n",
		"copy":         "FROM BASE\nCOPY --chown=1234:5678 --chmod=0751 f /opt/f\nCOPY d /opt/d/\nWORKDIR /work\nRUN echo x > x\n",
		"symlink-dest": "FROM BASE\nRUN mkdir -p /real/sub && ln -s /real /link && ln -s sub /real/rel\nCOPY f /link/\nCOPY d /link/rel/d\nCOPY f /real\nCOPY f /link/rel/g\n",
		"config":       "FROM BASE\nENV A=1 B=\"two words\"\nWORKDIR /w\nUSER 1000:1000\nLABEL a=b devcontainer.metadata='[{}]'\nEXPOSE 80 53/udp\nENTRYPOINT [\"/bin/sh\", \"-c\"]\nCMD [\"echo hi\"]\n",
	}
	files := map[string]string{"f": "file\n", "d/x": "x\n", "d/sub/y": "y\n", "d/l@": "x"}
	for name, df := range dockerfiles {
		t.Run(name, func(t *testing.T) {
			// Apart: a context, a ref and a podman tag each (the times
			// logged are then those of builds side by side).
			t.Parallel()
			ctx := buildContext(t, merge(files, map[string]string{"Dockerfile": strings.ReplaceAll(df, "BASE", base)}))
			ref := "same/" + name + ":test"
			var times []string
			for _, pass := range []string{"cold", "warm"} {
				start := time.Now()
				r := runProc(t, root, "", "build", "-t", ref, ctx)
				if r.code != 0 {
					t.Fatalf("cove build: %+v", r)
				}
				coveTime := time.Since(start)
				start = time.Now()
				if _, err := podman("build", "--tls-verify=false", "--network", "host", "-t", "localhost/same-"+name, ctx); err != nil {
					t.Fatal(err)
				}
				times = append(times, fmt.Sprintf("%s: cove %v, podman %v", pass, coveTime.Round(time.Millisecond), time.Since(start).Round(time.Millisecond)))
			}
			t.Log(strings.Join(times, "; "))
			r := runProc(t, root, "", "build", "-t", ref, ctx)
			mnt, err := podman("image", "mount", "localhost/same-"+name)
			if err != nil {
				t.Fatal(err)
			}
			defer podman("image", "unmount", "localhost/same-"+name)
			cove := treeListing(t, filepath.Join(root, "images", "images", strings.TrimPrefix(strings.TrimSpace(r.stdout), "sha256:"), "rootfs"))
			peer := treeListing(t, strings.TrimSpace(mnt))
			var diffs []string
			for _, p := range sortedUnion(cove, peer) {
				if cove[p] == "" && buildahMountPoints[p] || p == "w" && name == "config" {
					continue
				}
				if cove[p] != peer[p] {
					diffs = append(diffs, fmt.Sprintf("%s: cove %q, podman %q", p, cove[p], peer[p]))
				}
			}
			if len(diffs) > 0 {
				t.Errorf("root filesystems differ:\n%s", strings.Join(diffs, "\n"))
			}
			raw, err := podman("image", "inspect", "--format", "{{json .Config}}", "localhost/same-"+name)
			if err != nil {
				t.Fatal(err)
			}
			var peerCfg v1.Config
			if err := json.Unmarshal([]byte(raw), &peerCfg); err != nil {
				t.Fatal(err)
			}
			delete(peerCfg.Labels, "io.buildah.version")
			if len(peerCfg.Labels) == 0 {
				peerCfg.Labels = nil
			}
			coveCfg := imageConfig(t, root, ref).Config
			for _, f := range []struct {
				what      string
				cove, pod any
			}{
				{"Env", coveCfg.Env, peerCfg.Env}, {"Cmd", coveCfg.Cmd, peerCfg.Cmd}, {"Entrypoint", coveCfg.Entrypoint, peerCfg.Entrypoint},
				{"WorkingDir", coveCfg.WorkingDir, peerCfg.WorkingDir}, {"User", coveCfg.User, peerCfg.User},
				{"Labels", coveCfg.Labels, peerCfg.Labels}, {"ExposedPorts", coveCfg.ExposedPorts, peerCfg.ExposedPorts},
			} {
				if fmt.Sprint(f.cove) != fmt.Sprint(f.pod) {
					t.Errorf("config %s: cove %v, podman %v", f.what, f.cove, f.pod)
				}
			}
		})
	}
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
