package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"golang.org/x/sys/unix"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cove-sh/cove/internal/testimage"
	"github.com/cove-sh/cove/internal/testregistry"
	"github.com/cove-sh/cove/workspace"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// busyboxRef pushes the busybox test image and returns its reference.
func busyboxRef(t *testing.T) string {
	t.Helper()
	img, err := testimage.Busybox()
	if err != nil {
		t.Skip(err)
	}
	return testregistry.Push(t, testregistry.Addr(t), img)
}

// buildContext writes files (name → content; a name ending in "@" is a
// symlink to the content) into a fresh context directory.
func buildContext(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, strings.TrimRight(name, "@|"))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case strings.HasSuffix(name, "@"):
			err = os.Symlink(body, p)
		case strings.HasSuffix(name, "|"):
			err = unix.Mkfifo(p, 0o644)
		default:
			err = os.WriteFile(p, []byte(body), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// imageConfig reads the stored image's config through cove's store.
func imageConfig(t *testing.T, root, ref string) *v1.ConfigFile {
	t.Helper()
	r := runProc(t, root, "", "images", "--json")
	var list []struct{ Ref, Digest string }
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatalf("images --json: %v: %q", err, r.stdout)
	}
	for _, e := range list {
		if strings.HasSuffix(e.Ref, ref) {
			b, err := os.ReadFile(filepath.Join(root, "images", "images", strings.TrimPrefix(e.Digest, "sha256:"), "config.json"))
			if err != nil {
				t.Fatal(err)
			}
			var cf v1.ConfigFile
			if err := json.Unmarshal(b, &cf); err != nil {
				t.Fatal(err)
			}
			return &cf
		}
	}
	t.Fatalf("%s is not in cove images: %s", ref, r.stdout)
	return nil
}

func TestBuildFeatures(t *testing.T) {
	t.Parallel()
	needRoot(t)
	base := busyboxRef(t)
	root := t.TempDir()
	tests := []struct {
		name       string
		dockerfile string
		files      map[string]string
		args       []string // extra cove build flags
		run        string   // shell command run in the built image
		want       string   // its output
		check      func(t *testing.T, cf *v1.ConfigFile)
	}{
		{name: "run-shell", dockerfile: "FROM BASE\nRUN echo hi > /greeting && mkdir -p /a/b\n",
			run: "cat /greeting; ls -d /a/b", want: "hi\n/a/b\n"},
		{name: "run-exec", dockerfile: "FROM BASE\nRUN [\"/bin/sh\", \"-c\", \"echo $0 > /out\", \"exec\"]\n",
			run: "cat /out", want: "exec\n"},
		{name: "run-delete-is-whiteout", dockerfile: "FROM BASE\nRUN rm /etc/group && rm -r /root && mkdir /root && echo x > /root/new\n",
			run: "ls /etc/group 2>&1; ls /root", want: "ls: /etc/group: No such file or directory\nnew\n"},
		{name: "deep-stage", dockerfile: "FROM BASE\n" + strings.Repeat("RUN echo >> /count\n", 70),
			run: "wc -l < /count", want: "70\n"},
		{name: "tmp-kept", dockerfile: "FROM BASE\nRUN echo kept > /tmp/f\nRUN cat /tmp/f > /g\n",
			run: "cat /g", want: "kept\n"},
		{name: "heredocs", dockerfile: "FROM BASE\nRUN <<EOF\necho one > /h1\necho two >> /h1\nEOF\nRUN cat > /h2 <<EOF\nfed $((1+1))\nEOF\nCOPY <<EOF /etc/motd\nhello\nEOF\n",
			run: "cat /h1 /h2 /etc/motd; stat -c %a /etc/motd", want: "one\ntwo\nfed 2\nhello\n644\n"},
		{name: "heredoc-shebang", dockerfile: "FROM BASE\nRUN <<EOF\n#!/bin/sh -e\necho \"$0\" > /script\necho shebang >> /script\nEOF\n",
			run: "cat /script", want: "/dev/pipes/EOF\nshebang\n"},
		{name: "shell", dockerfile: "FROM BASE\nSHELL [\"/bin/sh\", \"-xc\"]\nRUN echo shell > /s\n", run: "cat /s", want: "shell\n"},
		{name: "env", dockerfile: "FROM BASE\nENV GREETING=hello WHO=world\nENV BOTH=\"$GREETING $WHO\"\nRUN echo $BOTH > /env\n",
			run: "cat /env; echo $BOTH", want: "hello world\nhello world\n",
			check: func(t *testing.T, cf *v1.ConfigFile) {
				cfg := cf.Config
				if !contains(cfg.Env, "BOTH=hello world") {
					t.Errorf("Env = %q", cfg.Env)
				}
			}},
		{name: "arg", dockerfile: "ARG TAGGED=BASE\nFROM $TAGGED\nARG WHO=nobody\nARG UNSET\nRUN echo \"$WHO${UNSET}\" > /who\n",
			args: []string{"--build-arg", "WHO=me"}, run: "cat /who; echo \"[$WHO]\"", want: "me\n[]\n"},
		{name: "platform-args", dockerfile: "ARG TARGETARCH\nFROM BASE\nARG TARGETOS\nARG TARGETARCH\nRUN echo $TARGETOS/$TARGETARCH > /p\n",
			run: "cat /p", want: "linux/amd64\n"},
		{name: "workdir", dockerfile: "FROM BASE\nWORKDIR /srv/app\nWORKDIR sub\nRUN pwd > here\n",
			run: "pwd; cat here", want: "/srv/app/sub\n/srv/app/sub\n",
			check: func(t *testing.T, cf *v1.ConfigFile) {
				cfg := cf.Config
				if cfg.WorkingDir != "/srv/app/sub" {
					t.Errorf("WorkingDir = %q", cfg.WorkingDir)
				}
				// WORKDIR makes a directory the stage lacks: a layer each, and the RUN's.
				var layers []string
				for _, h := range cf.History {
					if !h.EmptyLayer {
						layers = append(layers, strings.Fields(h.CreatedBy + " -")[0])
					}
				}
				if strings.Join(layers, " ") != "- WORKDIR WORKDIR RUN" || len(cf.RootFS.DiffIDs) != 4 {
					t.Errorf("layers from %q, %d diff ids; want WORKDIR WORKDIR RUN on the base's one", layers, len(cf.RootFS.DiffIDs))
				}
			}},
		{name: "user", dockerfile: "FROM BASE\nRUN echo 'app:x:1000:1000::/home/app:/bin/sh' >> /etc/passwd && mkdir -p /home/app && chown 1000 /home/app\nUSER app\nRUN id -u > /home/app/uid\n",
			run: "id -u; cat /home/app/uid; stat -c %u /home/app/uid", want: "1000\n1000\n1000\n",
			check: func(t *testing.T, cf *v1.ConfigFile) {
				cfg := cf.Config
				if cfg.User != "app" {
					t.Errorf("User = %q", cfg.User)
				}
			}},
		{name: "copy", dockerfile: "FROM BASE\nCOPY a.txt /dst/\nCOPY dir /tree\nCOPY *.sh /scripts/\n",
			files: map[string]string{"a.txt": "A\n", "dir/x": "X\n", "dir/sub/y": "Y\n", "one.sh": "1", "two.sh": "2", "no.txt": "n"},
			run:   "cat /dst/a.txt /tree/x /tree/sub/y; ls /scripts; stat -c '%a %u' /tmp", want: "A\nX\nY\none.sh\ntwo.sh\n1777 0\n"},
		{name: "copy-chown-chmod", dockerfile: "FROM BASE\nCOPY --chown=1234:5678 --chmod=0751 a /a\nCOPY --chown=nobody a /b\n",
			files: map[string]string{"a": "a\n"},
			run:   "stat -c '%u:%g %a' /a /b", want: "1234:5678 751\n65534:65534 644\n"},
		{name: "copy-symlink-inside", dockerfile: "FROM BASE\nCOPY link /via-link\nCOPY d /d\n",
			files: map[string]string{"target": "T\n", "link@": "target", "d/rel@": "../target"},
			run:   "cat /via-link; readlink /d/rel", want: "T\n../target\n"},
		{name: "dockerignore", dockerfile: "FROM BASE\nCOPY . /ctx\n",
			files: map[string]string{"keep": "k", "secret.key": "s", "logs/a.log": "l", ".dockerignore": "*.key\nlogs\n"},
			run:   "ls -A /ctx", want: ".dockerignore\nDockerfile\nkeep\n"},
		{name: "add-local", dockerfile: "FROM BASE\nADD a /added\n", files: map[string]string{"a": "added\n"},
			run: "cat /added", want: "added\n"},
		{name: "add-tar-unpacked", dockerfile: "FROM BASE\nADD app.tar.gz /opt/\nADD plain.tar /plain\nADD notatar.tgz /n.tgz\n",
			files: map[string]string{"app.tar.gz": tarball(true, "app/", "app/run.sh=echo run", "app/l->run.sh"),
				"plain.tar": tarball(false, "p=plain"), "notatar.tgz": "just text"},
			run: "cat /opt/app/run.sh; echo; readlink /opt/app/l; cat /plain/p; echo; cat /n.tgz", want: "echo run\nrun.sh\nplain\njust text"},
		{name: "config", dockerfile: "FROM BASE\nLABEL devcontainer.metadata='[{\"remoteUser\":\"root\"}]' team=cove\nEXPOSE 8080 53/udp\nENTRYPOINT [\"/bin/echo\", \"entry\"]\nCMD [\"default\"]\n",
			check: func(t *testing.T, cf *v1.ConfigFile) {
				cfg := cf.Config
				if cfg.Labels["devcontainer.metadata"] != `[{"remoteUser":"root"}]` || cfg.Labels["team"] != "cove" {
					t.Errorf("Labels = %q", cfg.Labels)
				}
				if _, ok := cfg.ExposedPorts["8080/tcp"]; !ok || len(cfg.ExposedPorts) != 2 {
					t.Errorf("ExposedPorts = %v", cfg.ExposedPorts)
				}
				if strings.Join(cfg.Entrypoint, " ") != "/bin/echo entry" || strings.Join(cfg.Cmd, " ") != "default" {
					t.Errorf("Entrypoint %q Cmd %q", cfg.Entrypoint, cfg.Cmd)
				}
				// One history entry per instruction, none with a layer.
				var got []string
				for _, h := range cf.History {
					got = append(got, fmt.Sprintf("%s %v", strings.Fields(h.CreatedBy + " -")[0], h.EmptyLayer))
				}
				if want := "LABEL true|EXPOSE true|ENTRYPOINT true|CMD true"; !strings.HasSuffix(strings.Join(got, "|"), want) || len(cf.RootFS.DiffIDs) != 1 {
					t.Errorf("history %q (want it to end %q), %d layers (want 1)", got, want, len(cf.RootFS.DiffIDs))
				}
			}},
		{name: "recorded", dockerfile: "FROM BASE\nMAINTAINER me\nVOLUME /data\nSTOPSIGNAL SIGINT\nHEALTHCHECK --interval=5s --retries=2 CMD true\nONBUILD RUN echo child\n",
			check: func(t *testing.T, cf *v1.ConfigFile) {
				cfg := cf.Config
				if _, ok := cfg.Volumes["/data"]; !ok || cfg.StopSignal != "SIGINT" || cf.Author != "me" ||
					cfg.Healthcheck == nil || strings.Join(cfg.Healthcheck.Test, " ") != "CMD-SHELL true" || cfg.Healthcheck.Interval != 5*time.Second ||
					cfg.Healthcheck.Retries != 2 || strings.Join(cfg.OnBuild, "|") != "RUN echo child" {
					t.Errorf("volumes %v stopsignal %q author %q healthcheck %+v onbuild %q", cfg.Volumes, cfg.StopSignal, cf.Author, cfg.Healthcheck, cfg.OnBuild)
				}
			}},
		{name: "cmd-shell-form", dockerfile: "FROM BASE\nCMD echo from cmd\n",
			check: func(t *testing.T, cf *v1.ConfigFile) {
				cfg := cf.Config
				if strings.Join(cfg.Cmd, "|") != "/bin/sh|-c|echo from cmd" {
					t.Errorf("Cmd = %q", cfg.Cmd)
				}
			}},
		{name: "multi-stage", dockerfile: "FROM BASE AS builder\nRUN mkdir /out && echo built > /out/artifact && rm /etc/passwd\n" +
			"FROM BASE AS unused\nRUN exit 1\n" +
			"FROM BASE\nCOPY --from=builder /out/artifact /artifact\nCOPY --from=0 /etc/group /g\n",
			run: "cat /artifact; cat /g | head -1", want: "built\nroot:x:0:\n"},
		{name: "copy-from-glob-and-opaque", dockerfile: "FROM BASE AS b\nRUN mkdir -p /out/d && echo 1 > /out/one.txt && echo 2 > /out/two.txt && echo old > /out/d/old\n" +
			"RUN rm -r /out/d && mkdir /out/d && echo new > /out/d/new\n" +
			"FROM BASE\nCOPY --from=b /out/*.txt /txt/\nCOPY --from=b /out/d /d\n",
			run: "ls /txt /d", want: "/d:\nnew\n\n/txt:\none.txt\ntwo.txt\n"},
		{name: "copy-from-through-stage-symlinks", dockerfile: "FROM BASE AS b\nRUN ln -s / /escape && mkdir -p /usr/lib/x && echo lib > /usr/lib/x/f && ln -s usr/lib /lib2\n" +
			"FROM BASE\nCOPY --from=b /escape/etc/group /g\nCOPY --from=b /lib2/x /x\n",
			run: "head -1 /g; cat /x/f", want: "root:x:0:\nlib\n"},
		{name: "from-scratch", dockerfile: "FROM BASE AS tools\nFROM scratch\nCOPY --from=tools /bin/busybox /bin/busybox\nCOPY --from=tools /bin/sh /bin/sh\nENV PATH=/bin\n",
			run: "busybox ls /bin", want: "busybox\nsh\n"},
		{name: "from-stage", dockerfile: "FROM BASE AS one\nENV STAGE=one\nRUN echo 1 > /one\nFROM one\nRUN echo 2 > /two\n",
			run: "cat /one /two; echo $STAGE", want: "1\n2\none\n"},
		{name: "target", dockerfile: "FROM BASE AS first\nRUN echo first > /f\nFROM BASE\nRUN exit 3\n",
			args: []string{"--target", "first"}, run: "cat /f", want: "first\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // one store, a ref each: as builds in parallel are
			files := map[string]string{}
			if tc.dockerfile != "" {
				files["Dockerfile"] = strings.ReplaceAll(tc.dockerfile, "BASE", base)
			}
			if strings.Contains(tc.dockerfile, "ARG TAGGED=BASE") {
				files["Dockerfile"] = strings.Replace(tc.dockerfile, "BASE", base, 1)
			}
			for k, v := range tc.files {
				files[k] = v
			}
			dir := buildContext(t, files)
			ref := "built/" + tc.name + ":test"
			r := runProc(t, root, "", append(append([]string{"build", "-t", ref}, tc.args...), dir)...)
			if r.code != 0 {
				t.Fatalf("build: %+v", r)
			}
			if !digestLine.MatchString(r.stdout) {
				t.Errorf("build's stdout should be the digest alone: %q", r.stdout)
			}
			if tc.run != "" {
				got := runProc(t, root, "", "run", "--rm", ref, "/bin/sh", "-c", tc.run)
				if got.code != 0 || got.stdout != tc.want {
					t.Errorf("run %q: got %q (code %d, stderr %q), want %q", tc.run, got.stdout, got.code, got.stderr, tc.want)
				}
			}
			if tc.check != nil {
				tc.check(t, imageConfig(t, root, ref))
			}
		})
	}
}

// tarball makes a tar archive (gzip'd if zipped) of entries: "dir/",
// "name=content" or "name->target".
func tarball(zipped bool, entries ...string) string {
	var buf strings.Builder
	var w io.Writer = &buf
	var zw *gzip.Writer
	if zipped {
		zw = gzip.NewWriter(&buf)
		w = zw
	}
	tw := tar.NewWriter(w)
	for _, e := range entries {
		hdr := &tar.Header{Name: e, Mode: 0o755, Typeflag: tar.TypeDir, ModTime: time.Unix(1700000000, 0)}
		if name, body, ok := strings.Cut(e, "="); ok {
			hdr.Name, hdr.Typeflag, hdr.Size, hdr.Mode = name, tar.TypeReg, int64(len(body)), 0o644
			tw.WriteHeader(hdr)
			tw.Write([]byte(body))
			continue
		}
		if name, target, ok := strings.Cut(e, "->"); ok {
			hdr.Name, hdr.Typeflag, hdr.Linkname = name, tar.TypeSymlink, target
		}
		tw.WriteHeader(hdr)
	}
	tw.Close()
	if zw != nil {
		zw.Close()
	}
	return buf.String()
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

var cachedLine = regexp.MustCompile(`stored \S+ \((\d+) of (\d+) layer steps cached\)`)

// buildCached builds dir and returns the digest and "HITS/STEPS".
func buildCached(t *testing.T, root, dir, ref string, extra ...string) (digest, hits string) {
	t.Helper()
	r := runProc(t, root, "", append(append([]string{"build", "-t", ref}, extra...), dir)...)
	m := cachedLine.FindStringSubmatch(r.stderr)
	if r.code != 0 || m == nil {
		t.Fatalf("build: %+v", r)
	}
	return strings.TrimSpace(r.stdout), m[1] + "/" + m[2]
}

func TestBuildCache(t *testing.T) {
	t.Parallel()
	needRoot(t)
	base := busyboxRef(t)
	root := t.TempDir()
	dir := buildContext(t, map[string]string{
		"Dockerfile": "FROM " + base + "\nRUN echo one > /one\nENV X=1\nCOPY a /a\nRUN cat /a > /b\nCMD [\"cat\", \"/b\"]\n",
		"a":          "first\n",
	})
	cold := time.Now()
	d1, hits := buildCached(t, root, dir, "cache:test")
	coldTime := time.Since(cold)
	if hits != "0/3" {
		t.Errorf("first build: %s layer steps cached, want 0/3", hits)
	}
	warm := time.Now()
	d2, hits := buildCached(t, root, dir, "cache:test")
	warmTime := time.Since(warm)
	if hits != "3/3" || d2 != d1 {
		t.Errorf("unchanged rebuild: %s cached, digest %s then %s; want 3/3 and the same image", hits, d1, d2)
	}
	t.Logf("cold build %v, warm (fully cached) build %v", coldTime.Round(time.Millisecond), warmTime.Round(time.Millisecond))

	// A touched but unchanged file still hits; a changed one reruns from
	// its COPY on, and the RUN before it stays cached.
	later := time.Now().Add(time.Hour)
	os.Chtimes(filepath.Join(dir, "a"), later, later)
	if _, hits := buildCached(t, root, dir, "cache:test"); hits != "3/3" {
		t.Errorf("after touching a: %s cached, want 3/3", hits)
	}
	os.WriteFile(filepath.Join(dir, "a"), []byte("second\n"), 0o644)
	d3, hits := buildCached(t, root, dir, "cache:test")
	if hits != "1/3" || d3 == d1 {
		t.Errorf("after changing a: %s cached (want 1/3), digest %s (want a new one)", hits, d3)
	}
	if r := runProc(t, root, "", "run", "--rm", "cache:test"); r.stdout != "second\n" {
		t.Errorf("the rebuilt image's CMD printed %q, want second", r.stdout)
	}
	if _, hits := buildCached(t, root, dir, "cache:test", "--no-cache"); hits != "0/3" {
		t.Errorf("--no-cache: %s cached, want 0/3", hits)
	}
	// A heredoc's text is part of its RUN's key.
	os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM "+base+"\nRUN <<EOF\necho 1 > /h\nEOF\n"), 0o644)
	buildCached(t, root, dir, "cache:heredoc")
	os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM "+base+"\nRUN <<EOF\necho 2 > /h\nEOF\n"), 0o644)
	if _, hits := buildCached(t, root, dir, "cache:heredoc"); hits != "0/1" {
		t.Errorf("a changed heredoc: %s cached, want 0/1", hits)
	}
	if r := runProc(t, root, "", "run", "--rm", "cache:heredoc", "cat", "/h"); r.stdout != "2\n" {
		t.Errorf("after the heredoc changed the image has %q", r.stdout)
	}
	// A build arg the RUN sees is part of its key.
	os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM "+base+"\nARG V\nRUN echo $V > /v\n"), 0o644)
	buildCached(t, root, dir, "cache:arg", "--build-arg", "V=1")
	if _, hits := buildCached(t, root, dir, "cache:arg", "--build-arg", "V=2"); hits != "0/1" {
		t.Errorf("a changed build arg: %s cached, want 0/1", hits)
	}
	if r := runProc(t, root, "", "run", "--rm", "cache:arg", "cat", "/v"); r.stdout != "2\n" {
		t.Errorf("with V=2 the image has %q", r.stdout)
	}
}

// TestBuildConcurrent runs two builds of one Dockerfile at once on a cold
// cache, then a --no-cache one while a cached one runs: all succeed, and
// the images run.
func TestBuildConcurrent(t *testing.T) {
	t.Parallel()
	needRoot(t)
	base := busyboxRef(t)
	root := t.TempDir()
	dir := buildContext(t, map[string]string{
		"Dockerfile": "FROM " + base + "\nRUN sleep 0.5 && echo one > /one\nCOPY a /a\nRUN sleep 0.5 && cat /a /one > /b\n",
		"a":          "a\n",
	})
	for round, flags := range [][2]string{{"", ""}, {"--no-cache", ""}} {
		var cmds []*exec.Cmd
		var errs []*bytes.Buffer
		for i, f := range flags {
			args := []string{"build", "-t", fmt.Sprintf("conc:%d", i)}
			if f != "" {
				args = append(args, f)
			}
			cmd, _, errb := coveProc(root, append(args, dir)...)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			cmds, errs = append(cmds, cmd), append(errs, errb)
		}
		for i, cmd := range cmds {
			if err := cmd.Wait(); err != nil {
				t.Errorf("round %d: build %d: %v: %s", round, i, err, errs[i])
			}
		}
		for i := range cmds {
			if r := runProc(t, root, "", "run", "--rm", fmt.Sprintf("conc:%d", i), "cat", "/b"); r.stdout != "a\none\n" {
				t.Errorf("round %d: image %d: %+v", round, i, r)
			}
		}
	}
}

// TestBuildPull: FROM uses the stored image of its name; --pull asks the
// registry, and a new base reruns every step.
func TestBuildPull(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	bb, err := testimage.Busybox()
	if err != nil {
		t.Skip(err)
	}
	ref := testregistry.Push(t, addr, bb)
	root := t.TempDir()
	dir := buildContext(t, map[string]string{"Dockerfile": "FROM " + ref + "\nRUN cat /base 2>/dev/null > /seen; true\n"})
	buildCached(t, root, dir, "pull:test")
	l, err := testimage.Layer(testimage.File("base", "second\n", 0o644))
	if err != nil {
		t.Fatal(err)
	}
	newer, err := mutate.AppendLayers(bb, l)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := name.ParseReference(ref)
	if err := remote.Write(r, newer); err != nil {
		t.Fatal(err)
	}
	if _, hits := buildCached(t, root, dir, "pull:test"); hits != "1/1" {
		t.Errorf("without --pull: %s cached, want 1/1 (the stored base)", hits)
	}
	if _, hits := buildCached(t, root, dir, "pull:test", "--pull"); hits != "0/1" {
		t.Errorf("--pull with a new base: %s cached, want 0/1", hits)
	}
	if r := runProc(t, root, "", "run", "--rm", "pull:test", "cat", "/seen"); r.stdout != "second\n" {
		t.Errorf("the image built on the new base: %+v", r)
	}
}

func TestBuildRefusals(t *testing.T) {
	t.Parallel()
	needRoot(t)
	base := busyboxRef(t)
	root := t.TempDir()
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("host secret\n"), 0o600)
	// A host file a planted Dockerfile symlink would show the first
	// word of, in the parse error.
	hostKey := filepath.Join(t.TempDir(), "id_rsa")
	os.WriteFile(hostKey, []byte("hostkeybytes-4f2a\n"), 0o600)
	tests := []struct {
		name, dockerfile string
		files            map[string]string
		want             string // in the one error line
	}{
		// As the reference says, ../ is removed from a source: the
		// context's own secret is meant (there is none), never the one
		// beside the context.
		{"copy-dotdot", "FROM BASE\nCOPY ../secret /s\n", nil, "line 2: COPY: secret: not found in the build context"},
		{"symlink-out", "FROM BASE\nCOPY link /s\n", map[string]string{"link@": filepath.Join(outside, "secret")}, "line 2: COPY: link: a symlink that leads out of the build context"},
		{"symlink-dir-out", "FROM BASE\nCOPY d/secret /s\n", map[string]string{"d@": outside}, "leads out of the build context"},
		{"ignored-everything", "FROM BASE\nCOPY a /a\n", map[string]string{"a": "a", ".dockerignore": "*\n"}, "line 2: COPY: a: excluded by .dockerignore"},
		{"unsupported", "FROM BASE\nENV A=1\nRUN --mount=type=ssh true\n", nil, "line 3: RUN: --mount=type=ssh is not supported: cove build forwards no SSH agent"},
		{"unknown", "FROM BASE\nFROBNICATE x\n", nil, "line 2: unknown instruction FROBNICATE"},
		{"run-fails", "FROM BASE\nRUN exit 7\n", nil, "line 2: RUN: the command exited with status 7"},
		// A symlink the COPY itself puts in the layer is not written
		// through by a later source of the same COPY: the directory
		// replaces it ("" = the build succeeds; nothing lands outside).
		{"write-through-copied-symlink", "FROM BASE\nCOPY a b /x/\n",
			map[string]string{"a/sub@": outside, "b/sub/evil": "pwned"}, ""},
		{"copy-from-deleted", "FROM BASE AS b\nRUN rm /etc/passwd\nFROM BASE\nCOPY --from=b /etc/passwd /p\n", nil,
			"line 4: COPY: etc/passwd: not found in --from=b"},
		{"add-tar-dotdot", "FROM BASE\nADD evil.tar /x/\n", map[string]string{"evil.tar": tarball(false, "../../evil=x")},
			"line 2: ADD: evil.tar: unpack: entry \"../../evil\""},
		{"bad-tag", "FROM BASE\n", nil, "-t: parse reference"},
		// The context may be a workspace's to write: its Dockerfile is
		// read from it alone, and nothing in it blocks the build.
		{"dockerfile-symlink-out", "", map[string]string{"Dockerfile@": hostKey},
			"the Dockerfile Dockerfile is a symlink that leads out of the build context"},
		{"dockerfile-fifo", "", map[string]string{"Dockerfile|": ""}, "read the Dockerfile"},
		{"dockerignore-fifo", "FROM BASE\n", map[string]string{".dockerignore|": ""}, ".dockerignore: not a regular file"},
		// A FIFO is no file to copy: left out, as before, and never opened.
		{"copy-fifo", "FROM BASE\nCOPY d /d\n", map[string]string{"d/f|": ""}, ""},
		{"add-fifo", "FROM BASE\nADD f /f\n", map[string]string{"f|": ""}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{}
			if tc.dockerfile != "" {
				files["Dockerfile"] = strings.ReplaceAll(tc.dockerfile, "BASE", base)
			}
			for k, v := range tc.files {
				files[k] = v
			}
			tag := "refused:" + tc.name
			if tc.name == "bad-tag" {
				tag = "Not A Tag"
			}
			r := runProc(t, root, "", "build", "-t", tag, buildContext(t, files))
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			last := lines[len(lines)-1]
			t.Log(last)
			if tc.want == "" {
				if r.code != 0 {
					t.Errorf("build: %+v", r)
				}
			} else if r.code != 1 || !strings.Contains(last, tc.want) || !strings.HasPrefix(last, "cove: build ") {
				t.Errorf("got code %d, last line %q; want 1 and %q", r.code, last, tc.want)
			}
			if strings.Contains(r.stderr+r.stdout, "host secret") || strings.Contains(r.stderr+r.stdout, "hostkeybytes") {
				t.Errorf("the secret outside the context leaked: %q", r.stderr)
			}
			if names, _ := os.ReadDir(outside); len(names) != 1 {
				t.Errorf("the build wrote outside its context and layer: %v", names)
			}
		})
	}
}

// TestBuildRootless builds as covetest: RUN runs in a user namespace, and
// the layer records owners as root inside saw them (the user's own ids as
// 0, subordinate ids as 1…N), not the host's ids.
func TestBuildRootless(t *testing.T) {
	t.Parallel()
	needRoot(t)
	u, uid, gid := testUser(t)
	ref := busyboxRef(t)
	base := rootlessBase(t, "cove-rootless-build-")
	ctx, root := filepath.Join(base, "ctx"), filepath.Join(base, "root")
	os.Mkdir(ctx, 0o755)
	os.Mkdir(root, 0o755)
	os.Chown(root, uid, gid)
	os.WriteFile(filepath.Join(ctx, "Dockerfile"), []byte("FROM "+ref+"\nCOPY f /f\nCOPY --chown=1234:5678 f /owned/g\nCOPY --chown=7:7 f /h\n"+
		"RUN echo made > /made && mkdir /home && touch /home/u1000 && chown 1000:1001 /home/u1000 && rm /etc/group && chown 9:9 /h\n"+
		"RUN --mount=type=cache,target=/var/cache/x --mount=type=secret,id=s,required --mount=type=bind,source=f,target=/bound "+
		"echo cached >> /var/cache/x/log && wc -l < /var/cache/x/log > /mounts && wc -c < /run/secrets/s >> /mounts && cat /bound >> /mounts\n"), 0o644)
	os.WriteFile(filepath.Join(ctx, "secret"), []byte("rootless-secret"), 0o600)
	os.Chown(filepath.Join(ctx, "secret"), uid, gid)
	os.WriteFile(filepath.Join(ctx, "f"), []byte("copied\n"), 0o644)
	as := func(args ...string) result {
		cmd, out, errb := coveProc(root, args...)
		asTestUser(cmd, u, uid, gid)
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return result{out.String(), errb.String(), code}
	}
	if r := as("build", "-t", "rootless:test", "--secret", "id=s,src="+filepath.Join(ctx, "secret"), ctx); r.code != 0 {
		t.Fatalf("rootless build: %+v", r)
	}
	r := as("run", "--rm", "rootless:test", "sh", "-c", "cat /f /made; ls /etc/group 2>&1; cat /mounts; ls /run/secrets /var/cache/x /bound 2>&1 | wc -l; true")
	want := "copied\nmade\nls: /etc/group: No such file or directory\n1\n15\ncopied\n3\n"
	if r.code != 0 || r.stdout != want {
		t.Errorf("rootless image: got %q (%+v), want %q", r.stdout, r, want)
	}
	// A rootless store flattens every file as the user's, so the owners
	// are checked where they are kept: in the layers.
	owners := map[string]string{} // name → its owners in the layers that have it
	blobs, _ := filepath.Glob(filepath.Join(root, "*", "build", "steps", "*", "layer.tar.gz"))
	for _, b := range blobs {
		f, err := os.Open(b)
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(zr)
		for {
			hdr, err := tr.Next()
			if err != nil {
				break
			}
			if owners[hdr.Name] != "" {
				owners[hdr.Name] += " "
			}
			owners[hdr.Name] += fmt.Sprintf("%d:%d", hdr.Uid, hdr.Gid)
		}
		f.Close()
	}
	for _, n := range []string{".cove/", "proc/", "sys/", "dev/", "etc/resolv.conf", "etc/hosts"} {
		if _, ok := owners[n]; ok {
			t.Errorf("the RUN's layer holds the runtime's mount point %s", n)
		}
	}
	for name, want := range map[string]string{"f": "0:0", "made": "0:0", "home/u1000": "1000:1001", "etc/.wh.group": "0:0",
		"owned/": "1234:5678", "owned/g": "1234:5678"} {
		if owners[name] != want {
			t.Errorf("in the layers, %s is owned by %q, want %s (all: %v)", name, owners[name], want, owners)
		}
	}
	// COPY --chown=7:7 /h, then a RUN's chown 9:9: each layer says its own.
	if h := owners["h"]; h != "7:7 9:9" && h != "9:9 7:7" {
		t.Errorf("/h in the layers: %q, want 7:7 (the COPY's) and 9:9 (the RUN's)", h)
	}
}

// TestBuildThenUp: cove up --image finds a built image by its tag, with
// no registry, and the workspace runs it.
func TestBuildThenUp(t *testing.T) {
	t.Parallel()
	needRoot(t)
	base := busyboxRef(t)
	root := t.TempDir()
	dir := buildContext(t, map[string]string{"Dockerfile": "FROM " + base + "\nRUN echo built > /built\n"})
	if r := runProc(t, root, "", "build", "-t", "workspace:built", dir); r.code != 0 {
		t.Fatalf("build: %+v", r)
	}
	project := t.TempDir()
	startUp(t, root, "workspace:built", project)
	if r := runProc(t, root, "", "exec", workspace.Name(project), "cat", "/built"); r.code != 0 || r.stdout != "built\n" {
		t.Errorf("exec in the workspace: %+v", r)
	}
}

// TestBuildRunMounts: RUN --mount of each type, and --network=none. A
// cache mount keeps its files across builds (and is in no layer); a bind
// shows the context read-only, its content in the cache key; a tmpfs and
// a secret are in no layer; a secret reaches the RUN as a file and as an
// environment variable and never the store, the cache or the output.
func TestBuildRunMounts(t *testing.T) {
	t.Parallel()
	needRoot(t)
	base := busyboxRef(t)
	root := t.TempDir()
	const secret = "s3cret-value-7f1d"
	secretFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(secretFile, []byte(secret), 0o600)
	df := "FROM " + base + " AS builder\nRUN mkdir /out && echo artifact > /out/a\n" +
		"FROM " + base + "\n" +
		"RUN --mount=type=cache,target=/var/cache/app echo run >> /var/cache/app/log && wc -l < /var/cache/app/log > /cache-count\n" +
		"RUN --mount=type=cache,id=shared,target=/c1 --mount=type=cache,id=shared,target=/c2,sharing=locked echo x > /c1/f && cat /c2/f > /shared\n" +
		"RUN --mount=type=bind,source=src,target=/src cat /src/a > /bound && (touch /src/new 2>/dev/null && echo rw || echo ro) > /bind-mode\n" +
		"RUN --mount=type=bind,target=/ctx,rw touch /ctx/written && ls /ctx > /ctx-list\n" +
		"RUN --mount=type=bind,from=builder,source=/out,target=/in cp /in/a /from-stage\n" +
		"RUN --mount=type=tmpfs,target=/scratch echo t > /scratch/t && cat /scratch/t > /tmpfs-saw\n" +
		"RUN --mount=type=secret,id=tok wc -c < /run/secrets/tok > /secret-len && stat -c %a /run/secrets/tok > /secret-mode\n" +
		"RUN --mount=type=secret,id=tok,env=TOK,required echo ${#TOK} > /env-len\n" +
		"RUN --mount=type=secret,id=absent test ! -e /run/secrets/absent && echo skipped > /absent\n" +
		"RUN --network=none ls /sys/class/net > /nets\n"
	dir := buildContext(t, map[string]string{"Dockerfile": df, "src/a": "from the context\n"})
	build := func(extra ...string) (string, string) {
		return buildCached(t, root, dir, "mounts:test", append([]string{"--secret", "id=tok,src=" + secretFile}, extra...)...)
	}
	_, hits := build()
	if hits != "0/11" {
		t.Errorf("first build: %s layer steps cached, want 0/11", hits)
	}
	check := "cat /cache-count /shared /bound /bind-mode /ctx-list /from-stage /tmpfs-saw /secret-len /secret-mode /env-len /absent /nets; " +
		"ls -d /var/cache/app /c1 /c2 /src /ctx /in /scratch /run/secrets /run 2>&1 | sed 's/.*: //'"
	want := "1\nx\nfrom the context\nro\nDockerfile\nsrc\nwritten\nartifact\nt\n17\n400\n17\nskipped\nlo\n" + strings.Repeat("No such file or directory\n", 9)
	if r := runProc(t, root, "", "run", "--rm", "mounts:test", "sh", "-c", check); r.stdout != want {
		t.Errorf("the built image shows\n%s\nwant\n%s(%+v)", r.stdout, want, r)
	}
	if _, err := os.Stat(filepath.Join(dir, "written")); err == nil {
		t.Errorf("a rw bind of the context wrote into the context")
	}
	// An unchanged rebuild hits, a changed secret still hits (it is not in
	// the key), and --no-cache runs the cache mount's RUN again on the
	// files it left: the count goes to 2.
	os.WriteFile(secretFile, []byte(secret), 0o600)
	if _, hits := build(); hits != "11/11" {
		t.Errorf("unchanged rebuild: %s cached, want 11/11", hits)
	}
	build("--no-cache")
	if r := runProc(t, root, "", "run", "--rm", "mounts:test", "cat", "/cache-count"); r.stdout != "2\n" {
		t.Errorf("after a second run the cache mount had %q lines, want 2", r.stdout)
	}
	// The bound file's content is in its RUN's key: a change reruns it.
	os.WriteFile(filepath.Join(dir, "src", "a"), []byte("changed\n"), 0o644)
	build()
	if r := runProc(t, root, "", "run", "--rm", "mounts:test", "cat", "/bound"); r.stdout != "changed\n" {
		t.Errorf("after src/a changed, /bound is %q", r.stdout)
	}
	// The secret is nowhere in cove's state: layers (uncompressed too),
	// step directories, the cache, the stored images.
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		data, _ := os.ReadFile(p)
		if strings.HasSuffix(p, ".tar.gz") {
			if zr, err := gzip.NewReader(bytes.NewReader(data)); err == nil {
				data, _ = io.ReadAll(zr)
			}
		}
		if bytes.Contains(data, []byte(secret)) {
			t.Errorf("the secret is in %s", p)
		}
		return nil
	})
	// A required secret not given fails with its line.
	os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM "+base+"\nRUN --mount=type=secret,id=missing,required true\n"), 0o644)
	r := runProc(t, root, "", "build", "-t", "mounts:missing", dir)
	if r.code != 1 || !strings.Contains(r.stderr, "line 2: RUN: --mount=type=secret,id=missing: no such secret (give it with cove build --secret id=missing,src=FILE)") {
		t.Errorf("a missing required secret: %+v", r)
	}
	if strings.Contains(r.stderr, secret) {
		t.Errorf("the secret is in the build's output")
	}
}

// TestBuildCopyAdd: COPY into a destination through the stage's symlinks
// (followed inside the stage, never out to the host), --link, --parents,
// --exclude, and ADD of a URL from a real HTTP server on loopback (fetched
// by the host side), with --checksum and --chmod; and their refusals.
func TestBuildCopyAdd(t *testing.T) {
	t.Parallel()
	needRoot(t)
	base := busyboxRef(t)
	root := t.TempDir()
	// A stage's symlink points at this host path (not under /tmp, which
	// cove run mounts afresh): it must stay empty.
	hostDir, err := os.MkdirTemp("/var/tmp", "cove-copy-host-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(hostDir)
	const body = "downloaded\n"
	lastMod := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	requests := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests++
		if r.URL.Path != "/files/file.bin" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Last-Modified", lastMod.Format(http.TimeFormat))
		io.WriteString(w, body)
	}))
	defer srv.Close()
	sum := sha256.Sum256([]byte(body))
	good := "sha256:" + hex.EncodeToString(sum[:])
	u := srv.URL + "/files/file.bin"
	df := "FROM " + base + "\n" +
		"RUN mkdir -p /real/sub && ln -s /real /link && ln -s sub /real/rel && ln -s " + hostDir + " /host && mkdir -p " + hostDir + "\n" +
		"COPY a.txt /link/\n" +
		"COPY a.txt /link/rel/b.txt\n" +
		"COPY a.txt /host/\n" +
		"COPY a.txt /real\n" +
		"COPY --link a.txt /linked/a.txt\n" +
		"COPY --parents src/x/*.go ./src/./y/z/w.go /p/\n" +
		"COPY --exclude=*.log --exclude=skip logs /logs\n" +
		"ADD " + u + " /dl/\n" +
		"ADD --checksum=" + good + " " + u + " /dl/checked\n" +
		"ADD --chmod=0644 " + u + " /dl/mode\n"
	dir := buildContext(t, map[string]string{"Dockerfile": df, "a.txt": "A\n",
		"src/x/one.go": "1", "src/x/two.go": "2", "src/x/no.txt": "n", "src/y/z/w.go": "w",
		"logs/a.txt": "a", "logs/b.log": "b", "logs/skip/c.txt": "c", "logs/sub/d.log": "d"})
	if r := runProc(t, root, "", "build", "-t", "copyadd:test", dir); r.code != 0 {
		t.Fatalf("build: %+v", r)
	}
	check := "cat /real/a.txt /real/sub/b.txt; readlink /link; readlink /real/rel; ls " + hostDir + "; cat /linked/a.txt; find /p /logs | sort; " +
		"stat -c '%a %Y' /dl/file.bin; cat /dl/file.bin /dl/checked; stat -c %a /dl/mode"
	want := "A\nA\n/real\nsub\na.txt\nA\n/logs\n/logs/a.txt\n/logs/sub\n/logs/sub/d.log\n/p\n/p/src\n/p/src/x\n/p/src/x/one.go\n/p/src/x/two.go\n/p/y\n/p/y/z\n/p/y/z/w.go\n" +
		fmt.Sprintf("600 %d\n", lastMod.Unix()) + body + body + "644\n"
	if r := runProc(t, root, "", "run", "--rm", "copyadd:test", "sh", "-c", check); r.stdout != want {
		t.Errorf("the built image shows\n%s\nwant\n%s(%+v)", r.stdout, want, r)
	}
	if names, _ := os.ReadDir(hostDir); len(names) != 0 {
		t.Errorf("COPY through the stage's symlink wrote on the host: %v", names)
	}
	// An unchanged URL still hits the cache (it is fetched and hashed).
	before := requests
	if _, hits := buildCached(t, root, dir, "copyadd:test"); hits != "11/11" || requests == before {
		t.Errorf("rebuild: %s cached (want 11/11), %d fetches (want some)", hits, requests-before)
	}
	for _, tc := range []struct{ name, line, want string }{
		{"checksum-mismatch", "ADD --checksum=sha256:" + strings.Repeat("0", 64) + " " + u + " /x", "line 2: ADD: fetch " + u + ": checksum mismatch: the content is " + good},
		{"not-found", "ADD " + srv.URL + "/nothing /x", "line 2: ADD: fetch " + srv.URL + "/nothing: the server answered 404 Not Found"},
		{"git", "ADD https://example.com/repo.git /src", "line 2: ADD: https://example.com/repo.git: ADD of a git repository is not supported: clone it in a RUN"},
		{"checksum-local", "ADD --checksum=" + good + " a.txt /x", "line 2: ADD: --checksum is only for a URL source, and a.txt is not one"},
	} {
		os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM "+base+"\n"+tc.line+"\n"), 0o644)
		r := runProc(t, root, "", "build", "-t", "copyadd:"+tc.name, dir)
		if r.code != 1 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s: code %d, stderr %q; want 1 and %q", tc.name, r.code, r.stderr, tc.want)
		}
	}
}

// TestBuildReproducible: with SOURCE_DATE_EPOCH (the environment's, or a
// build arg), two builds that run every step, in two stores, give the
// same digest; the image's and its history's times are the epoch and no
// file is newer. Without it the same two builds differ (the RUN's files
// have the time they were made). Also --quiet and --platform.
func TestBuildReproducible(t *testing.T) {
	t.Parallel()
	needRoot(t)
	base := busyboxRef(t)
	dir := buildContext(t, map[string]string{
		"Dockerfile": "FROM " + base + "\nRUN echo x > /f && mkdir /d && touch /d/e\nCOPY a /a\nENV E=1\n",
		"a":          "a\n",
	})
	const epoch = 1700000000
	build := func(root string, env []string, args ...string) result {
		cmd, out, errb := coveProc(root, append(append([]string{"build", "-t", "repro:test"}, args...), dir)...)
		cmd.Env = append(cmd.Env, env...)
		code := 0
		if err := cmd.Run(); err != nil {
			ee, ok := err.(*exec.ExitError)
			if !ok {
				t.Fatal(err)
			}
			code = ee.ExitCode()
		}
		return result{out.String(), errb.String(), code}
	}
	rootA, rootB := t.TempDir(), t.TempDir()
	withEpoch := []string{fmt.Sprintf("SOURCE_DATE_EPOCH=%d", epoch)}
	a := build(rootA, withEpoch, "--quiet")
	time.Sleep(1100 * time.Millisecond) // a second later: every time the RUN sets differs
	b := build(rootB, nil, "--build-arg", fmt.Sprintf("SOURCE_DATE_EPOCH=%d", epoch), "--no-cache")
	if a.code != 0 || b.code != 0 || !digestLine.MatchString(a.stdout) || a.stdout != b.stdout {
		t.Errorf("two builds with SOURCE_DATE_EPOCH: %q and %q, want one digest (%+v %+v)", a.stdout, b.stdout, a, b)
	}
	if a.stderr != "" {
		t.Errorf("--quiet printed on stderr: %q", a.stderr)
	}
	cf := imageConfig(t, rootA, "repro:test")
	if !cf.Created.Time.Equal(time.Unix(epoch, 0)) {
		t.Errorf("config created %v, want the epoch", cf.Created.Time)
	}
	for _, h := range cf.History[len(cf.History)-3:] {
		if !h.Created.Time.Equal(time.Unix(epoch, 0)) {
			t.Errorf("history %q created %v, want the epoch", h.CreatedBy, h.Created.Time)
		}
	}
	if r := runProc(t, rootA, "", "run", "--rm", "repro:test", "stat", "-c", "%Y", "/f", "/d", "/d/e"); r.stdout != strings.Repeat(fmt.Sprintf("%d\n", epoch), 3) {
		t.Errorf("mtimes of the RUN's files: %q, want the epoch", r.stdout)
	}
	// The control: without the epoch, the same two builds differ.
	c := build(rootA, nil, "--no-cache", "-q")
	time.Sleep(1100 * time.Millisecond)
	d := build(rootA, nil, "--no-cache", "-q")
	if c.stdout == d.stdout || c.stdout == a.stdout {
		t.Errorf("builds without SOURCE_DATE_EPOCH: %q, %q (with it %q): want three digests", c.stdout, d.stdout, a.stdout)
	}
	// --platform: this machine's, or refused.
	if r := build(rootA, nil, "-q", "--platform", "linux/"+runtime.GOARCH); r.code != 0 {
		t.Errorf("--platform linux/%s: %+v", runtime.GOARCH, r)
	}
	other := "linux/arm64"
	if runtime.GOARCH == "arm64" {
		other = "linux/amd64"
	}
	if r := build(rootA, nil, "--platform", other); r.code != 1 || !strings.Contains(r.stderr, "--platform "+other+": cove build builds only for this machine's platform, linux/"+runtime.GOARCH) {
		t.Errorf("--platform %s: %+v", other, r)
	}
	os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM --platform="+other+" "+base+"\n"), 0o644)
	if r := build(rootA, nil); r.code != 1 || !strings.Contains(r.stderr, "line 1: FROM --platform="+other+": cove build builds only") {
		t.Errorf("FROM --platform=%s: %+v", other, r)
	}
}

// stepDirs lists the build cache's step entries under root.
func stepDirs(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	entries, _ := os.ReadDir(filepath.Join(root, "data", "build", "steps"))
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestBuildPrune: cove prune removes the build steps no stored image has
// (a stage the image only copied from), keeps the rest (a rebuild hits
// them), removes all once the image is gone, and --build-cache removes
// the RUN --mount caches too. A build running meanwhile is waited for.
func TestBuildPrune(t *testing.T) {
	t.Parallel()
	needRoot(t)
	base := busyboxRef(t)
	root := t.TempDir()
	dir := buildContext(t, map[string]string{"Dockerfile": "FROM " + base + " AS b\nRUN echo b > /b && echo not copied > /extra\n" +
		"FROM " + base + "\nCOPY --from=b /b /b\nRUN --mount=type=cache,target=/c echo c > /c/x && cat /b > /final\n"})
	buildCached(t, root, dir, "prune:a")
	if n := len(stepDirs(t, root)); n != 3 {
		t.Fatalf("%d steps cached, want 3", n)
	}
	r := runProc(t, root, "", "prune")
	if r.code != 0 || !strings.Contains(r.stdout, "removed 1 build steps and 0 build cache mounts") {
		t.Errorf("prune: %+v", r)
	}
	if r := runProc(t, root, "", "run", "--rm", "prune:a", "cat", "/final"); r.stdout != "b\n" {
		t.Errorf("the image after prune: %+v", r)
	}
	if _, hits := buildCached(t, root, dir, "prune:a"); hits != "2/3" {
		t.Errorf("rebuild after prune: %s cached, want 2/3 (the unused stage's step ran again)", hits)
	}
	runProc(t, root, "", "rmi", "prune:a")
	if r := runProc(t, root, "", "prune"); r.code != 0 || len(stepDirs(t, root)) != 0 {
		t.Errorf("prune after rmi: %+v; steps left %v", r, stepDirs(t, root))
	}
	mounts := filepath.Join(root, "data", "build", "mounts")
	if names, _ := os.ReadDir(mounts); len(names) != 1 {
		t.Errorf("the cache mount should stay without --build-cache: %v", names)
	}
	if r := runProc(t, root, "", "prune", "--build-cache"); r.code != 0 || !strings.Contains(r.stdout, "1 build cache mounts") {
		t.Errorf("prune --build-cache: %+v", r)
	}
	if names, _ := os.ReadDir(mounts); len(names) != 0 {
		t.Errorf("cache mounts left after --build-cache: %v", names)
	}
	// A prune while a build runs waits for it: the build's steps (in
	// scratch directories until done) are not taken from under it.
	os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM "+base+"\nRUN sleep 1 && echo one > /one\nRUN cat /one > /two\n"), 0o644)
	cmd, _, errb := coveProc(root, "build", "-t", "prune:during", dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	pr := runProc(t, root, "", "prune", "--build-cache")
	if err := cmd.Wait(); err != nil {
		t.Errorf("the build during a prune: %v: %s", err, errb)
	}
	if r := runProc(t, root, "", "run", "--rm", "prune:during", "cat", "/two"); r.stdout != "one\n" || pr.code != 0 {
		t.Errorf("after a build during a prune: %+v (prune %+v)", r, pr)
	}
}

// TestBuildOutputs: --output writes the built image as an OCI layout, an
// OCI archive and a docker archive, and --push sends it to the registry,
// the base image's layers fetched from where FROM took them (the store
// keeps only their files). Each, pulled into a fresh store, is the same
// image (the same digest, but for the docker archive's own manifest) and
// runs.
func TestBuildOutputs(t *testing.T) {
	t.Parallel()
	needRoot(t)
	base := busyboxRef(t)
	addr := testregistry.Addr(t)
	root := t.TempDir()
	out := t.TempDir()
	dir := buildContext(t, map[string]string{"Dockerfile": "FROM " + base + "\nRUN echo built > /f\nCOPY a /a\n", "a": "a\n"})
	ref := addr + "/built/out:v1"
	layoutDir, ociTar, dockerTar := filepath.Join(out, "layout"), filepath.Join(out, "img.tar"), filepath.Join(out, "docker.tar")
	r := runProc(t, root, "", "build", "-t", ref, "--push", "-o", "type=oci,dest="+layoutDir,
		"-o", "type=oci-archive,dest="+ociTar, "-o", "type=docker,dest="+dockerTar, dir)
	if r.code != 0 {
		t.Fatalf("build: %+v", r)
	}
	digest := strings.TrimSpace(r.stdout)
	for _, src := range []string{"oci:" + layoutDir + ":v1", "oci-archive:" + ociTar + ":v1", "docker-archive:" + dockerTar, ref} {
		fresh := t.TempDir()
		p := runProc(t, fresh, "", "pull", "-q", src)
		if p.code != 0 {
			t.Errorf("pull %s: %+v", src, p)
			continue
		}
		if got := strings.TrimSpace(p.stdout); got != digest && !strings.HasPrefix(src, "docker-archive:") {
			t.Errorf("pull %s: digest %s, want the built %s", src, got, digest)
		}
		if run := runProc(t, fresh, "", "run", "--rm", src, "cat", "/f", "/a"); run.stdout != "built\na\n" {
			t.Errorf("run %s: %+v", src, run)
		}
	}
	// A second build into the same layout replaces its v1, and adds v2.
	buildCached(t, root, dir, addr+"/built/out:v2", "-o", "type=oci,dest="+layoutDir)
	idx, err := os.ReadFile(filepath.Join(layoutDir, "index.json"))
	if err != nil || strings.Count(string(idx), `"org.opencontainers.image.ref.name"`) != 2 {
		t.Errorf("the layout's index after two builds: %s (%v), want v1 and v2", idx, err)
	}
	for _, bad := range []struct{ flag, want string }{
		{"type=local,dest=x", "--output type=local is not supported"},
		{"type=oci", "no dest="},
		{"dest=x", "no type="},
	} {
		if r := runProc(t, root, "", "build", "-o", bad.flag, dir); r.code != 1 || !strings.Contains(r.stderr, bad.want) {
			t.Errorf("-o %s: %+v, want %q", bad.flag, r, bad.want)
		}
	}
}

// BenchmarkBuild times cove build of a COPY-heavy context (2000 files in
// 100 directories, 11 MB, then a RUN) on the busybox test image: cold
// (a fresh store holding only the base) and warm (every step cached). The
// side-by-side comparison with podman is scripts/bench/build.sh.
//
//	export $(scripts/registry.sh start | grep COVE_)
//	go test ./cmd/cove -run '^$' -bench Build -benchtime 5x
func BenchmarkBuild(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	img, err := testimage.Busybox()
	if err != nil {
		b.Skip(err)
	}
	base := testregistry.Push(b, testregistry.Addr(b), img)
	dir := b.TempDir()
	for i := range 2000 {
		p := filepath.Join(dir, "src", fmt.Sprintf("pkg%03d", i%100), fmt.Sprintf("file%05d.txt", i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, bytes.Repeat([]byte(fmt.Sprintf("line %d of a source file\n", i)), 20+i%200), 0o644)
	}
	os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM "+base+"\nWORKDIR /app\nCOPY . .\nRUN find /app/src -type f | wc -l > /app/count\n"), 0o644)
	build := func(b *testing.B, root string) {
		cmd, _, errb := coveProc(root, "build", "-q", "-t", "bench:build", dir)
		if err := cmd.Run(); err != nil {
			b.Fatalf("build: %v: %s", err, errb)
		}
	}
	b.Run("cold", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			root := b.TempDir()
			if r, _, errb := coveProc(root, "pull", "-q", base); r.Run() != nil {
				b.Fatalf("pull: %s", errb)
			}
			b.StartTimer()
			build(b, root)
		}
	})
	b.Run("warm", func(b *testing.B) {
		root := b.TempDir()
		build(b, root)
		b.ResetTimer()
		for range b.N {
			build(b, root)
		}
	})
}

// TestPush: cove push sends a built image (its layers from the build
// cache, its base's from the registry it was pulled from) and a pulled
// one to the registry as the same images: pulled into a fresh store they
// have the stored digests and run.
func TestPush(t *testing.T) {
	t.Parallel()
	needRoot(t)
	base := busyboxRef(t)
	addr := testregistry.Addr(t)
	root := t.TempDir()
	dir := buildContext(t, map[string]string{"Dockerfile": "FROM " + base + "\nRUN echo pushed > /p\nCOPY a /a\nENV X=1\n", "a": "a\n"})
	built, _ := buildCached(t, root, dir, "local/pushme:v1")
	baseDigest := strings.TrimSpace(runProc(t, root, "", "pull", "-q", base).stdout)
	for _, tc := range []struct{ src, dest, digest, check string }{
		{"local/pushme:v1", addr + "/pushed/built:v1", built, "pushed\na\n"},
		{base, addr + "/pushed/base:v1", baseDigest, ""},
	} {
		r := runProc(t, root, "", "push", tc.src, tc.dest)
		if r.code != 0 || strings.TrimSpace(r.stdout) != tc.digest {
			t.Errorf("push %s: %+v, want the digest %s", tc.src, r, tc.digest)
			continue
		}
		fresh := t.TempDir()
		if p := runProc(t, fresh, "", "pull", "-q", tc.dest); strings.TrimSpace(p.stdout) != tc.digest {
			t.Errorf("pull %s: %+v, want %s", tc.dest, p, tc.digest)
		}
		if tc.check != "" {
			if run := runProc(t, fresh, "", "run", "--rm", tc.dest, "cat", "/p", "/a"); run.stdout != tc.check {
				t.Errorf("run %s: %+v", tc.dest, run)
			}
		}
	}
	// Without the build cache the built layers are nowhere: said so.
	runProc(t, root, "", "prune", "--build-cache")
	if r := runProc(t, root, "", "push", "local/pushme:v1", addr+"/pushed/again:v1"); r.code != 1 || !strings.Contains(r.stderr, "not in the build cache, nor in any stored image") {
		t.Errorf("push after the build cache went: %+v", r)
	}
}

// TestBuildConfined: with --confined (an untrusted Dockerfile, as
// devcontainer.json's build), RUN cannot reach the host's loopback (it
// can without), ADD will not fetch from it, --network=host is refused,
// and a cache mount is the context's own, not another project's.
func TestBuildConfined(t *testing.T) {
	t.Parallel()
	needRoot(t)
	if _, err := exec.LookPath("pasta"); err != nil {
		t.Skip("pasta is not installed (apt-get install passt)")
	}
	base := busyboxRef(t)
	root := t.TempDir()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "host secret\n") }))
	defer srv.Close()
	df := "FROM " + base + "\nRUN (wget -q -O - " + srv.URL + "/x || echo unreachable) > /got; grep -c nameserver /etc/resolv.conf > /ns; grep -o 169.254.1.1 /etc/resolv.conf >> /ns; true\n"
	dir := buildContext(t, map[string]string{"Dockerfile": df})
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{nil, "host secret\n"},
		{[]string{"--confined"}, "unreachable\n1\n169.254.1.1\n"},
	} {
		r := runProc(t, root, "", append(append([]string{"build", "-t", "confined:test"}, tc.flags...), dir)...)
		if r.code != 0 {
			t.Fatalf("build %v: %+v", tc.flags, r)
		}
		got := runProc(t, root, "", "run", "--rm", "confined:test", "sh", "-c", "cat /got; test -n \"$(grep -v 169.254 /etc/hosts)\" && grep -q 169.254.1.1 /ns && cat /ns; true")
		if !strings.HasPrefix(got.stdout, tc.want) {
			t.Errorf("build %v: the RUN saw %q, want %q", tc.flags, got.stdout, tc.want)
		}
	}
	for _, tc := range []struct{ line, want string }{
		{"ADD " + srv.URL + "/x /x", "127.0.0.1 is this machine's or local: a confined build fetches only from elsewhere"},
		{"RUN --network=host true", "line 2: RUN: RUN --network=host: a confined build (an untrusted Dockerfile) does not get the host's network"},
	} {
		os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM "+base+"\n"+tc.line+"\n"), 0o644)
		if r := runProc(t, root, "", "build", "--confined", "-t", "confined:refused", dir); r.code != 1 || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, "host secret") {
			t.Errorf("%s: %+v, want %q", tc.line, r, tc.want)
		}
	}
	// Two projects' caches of one id: shared by default, each its own
	// when confined.
	write := buildContext(t, map[string]string{"Dockerfile": "FROM " + base + "\nRUN --mount=type=cache,id=pip,target=/c echo poisoned > /c/f\n"})
	read := buildContext(t, map[string]string{"Dockerfile": "FROM " + base + "\nRUN --mount=type=cache,id=pip,target=/c (cat /c/f 2>/dev/null || echo clean) > /saw\n"})
	for _, tc := range []struct {
		flag, want string
	}{{"--no-cache", "poisoned\n"}, {"--confined", "clean\n"}} {
		buildCached(t, root, write, "cache:write", "--no-cache", tc.flag)
		buildCached(t, root, read, "cache:read", "--no-cache", tc.flag)
		if r := runProc(t, root, "", "run", "--rm", "cache:read", "cat", "/saw"); r.stdout != tc.want {
			t.Errorf("%s: the second project's cache held %q, want %q", tc.flag, r.stdout, tc.want)
		}
	}
}

// TestBuildCacheMountSharing: two builds at once on one cache mount. With
// sharing=locked the second RUN waits for the first, and with private it
// gets a cache of its own: neither sees the other's RUN in progress. With
// shared (the default) they overlap, which shows the check detects it.
// Each RUN marks itself busy with a file of its own: with one name for
// both, the two rm's of an overlap raced (busybox rm -f fails when the
// file goes between its lstat and its unlink).
func TestBuildCacheMountSharing(t *testing.T) {
	t.Parallel()
	needRoot(t)
	base := busyboxRef(t)
	root := t.TempDir()
	for _, tc := range []struct {
		sharing string
		overlap bool
	}{{"locked", false}, {"private", false}, {"shared", true}} {
		target := "/c-" + tc.sharing
		run := "RUN --mount=type=cache,target=" + target + ",sharing=" + tc.sharing + " "
		dir := buildContext(t, map[string]string{"Dockerfile": "FROM " + base + "\n" + run +
			"set -- " + target + "/busy.*; if [ -e \"$1\" ]; then touch " + target + "/overlap; fi; " +
			"b=$(mktemp " + target + "/busy.XXXXXX); sleep 2; rm \"$b\"\n"})
		var cmds []*exec.Cmd
		var errs []*bytes.Buffer
		for i := range 2 {
			cmd, _, errb := coveProc(root, "build", "--no-cache", "-t", fmt.Sprintf("sharing:%s%d", tc.sharing, i), dir)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			cmds, errs = append(cmds, cmd), append(errs, errb)
		}
		for i, c := range cmds {
			if err := c.Wait(); err != nil {
				t.Errorf("%s build: %v: %s", tc.sharing, err, errs[i])
			}
		}
		check := buildContext(t, map[string]string{"Dockerfile": "FROM " + base + "\nRUN --mount=type=cache,target=" + target + " ls " + target + " > /list\n"})
		buildCached(t, root, check, "sharing:check", "--no-cache")
		got := runProc(t, root, "", "run", "--rm", "sharing:check", "cat", "/list")
		switch overlap := strings.Contains(got.stdout, "overlap"); {
		case overlap && !tc.overlap:
			t.Errorf("sharing=%s: the two RUNs used the cache at once (it holds %q)", tc.sharing, got.stdout)
		case !overlap && tc.overlap:
			// Shared is the control that the check can see an overlap;
			// on a loaded machine the two may just not have met.
			t.Logf("sharing=%s: no overlap seen (the builds did not run at once)", tc.sharing)
		}
	}
}

// TestSliceFlagsKeepCommas: a repeated flag's value is taken whole, as
// docker and podman take it: --build-arg V=a,b and -e A=1,2 (urfave/cli
// would split them at the comma).
func TestSliceFlagsKeepCommas(t *testing.T) {
	t.Parallel()
	needRoot(t)
	base := busyboxRef(t)
	root := t.TempDir()
	dir := buildContext(t, map[string]string{"Dockerfile": "FROM " + base + "\nARG V\nRUN echo \"$V\" > /v\n"})
	buildCached(t, root, dir, "commas:test", "--build-arg", "V=a,b")
	if r := runProc(t, root, "", "run", "--rm", "-e", "A=1,2", "commas:test", "sh", "-c", "cat /v; echo \"$A\""); r.stdout != "a,b\n1,2\n" {
		t.Errorf("got %+v, want a,b and 1,2", r)
	}
}

// TestBuildRunOutputIsShownNotObeyed: what a RUN prints is the
// Dockerfile's to choose (a project's may be a workspace's): cove build
// shows its escape sequences as pictures (an OSC 52 would set the
// clipboard) and gives the RUN a pipe, never its own stderr (here a file:
// the RUN could open it again through /proc/self/fd and read it).
func TestBuildRunOutputIsShownNotObeyed(t *testing.T) {
	t.Parallel()
	needRoot(t)
	base := busyboxRef(t)
	root := t.TempDir()
	dir := buildContext(t, map[string]string{"Dockerfile": "FROM " + base + "\n" +
		"RUN printf 'clip\\033]52;c;cm0gLXJmIH4K\\007board\\n'; readlink /proc/self/fd/2\n" +
		"RUN true '\x1b]0;retitled\x07'\n"})
	logPath := filepath.Join(t.TempDir(), "build.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd, _, _ := coveProc(root, "build", "--no-cache", "-t", "shown:test", dir)
	cmd.Stderr = logFile
	err = cmd.Run()
	logFile.Close()
	b, _ := os.ReadFile(logPath)
	if err != nil {
		t.Fatalf("build: %v: %s", err, b)
	}
	out := string(b)
	if strings.Contains(out, "\x1b") || !strings.Contains(out, "clip␛]52;c;cm0gLXJmIH4K␇board") || !strings.Contains(out, "RUN true '␛]0;retitled␇'") {
		t.Errorf("the RUN's escape sequence reached the terminal as it was: %q", out)
	}
	if strings.Contains(out, logPath) || !strings.Contains(out, "pipe:") {
		t.Errorf("the RUN was handed cove's own stderr: %q", out)
	}
}

// TestBuildIIDFileAndContext: cove build --iidfile writes the image's ID
// as printed (sha256:…, no newline), --label sets a label, and
// --build-context NAME=DIR is what FROM NAME, COPY --from=NAME and RUN
// --mount from=NAME read, as root and rootless alike; a context that is a
// URL is refused before anything is built.
func TestBuildIIDFileAndContext(t *testing.T) {
	t.Parallel()
	ru := needRangedUser(t)
	bb := busyboxRef(t)
	base := rootlessBase(t, "cove-build-iid-")
	ctx, shared := filepath.Join(base, "ctx"), filepath.Join(base, "shared")
	for dir, files := range map[string]map[string]string{
		ctx: {"Dockerfile": "FROM shared AS files\nFROM " + bb + "\nCOPY --from=shared f /copied\nCOPY --from=files /f /staged\n" +
			"RUN --mount=type=bind,from=shared,target=/m cat /m/f > /mounted\n"},
		shared: {"f": "shared\n"},
	} {
		os.Mkdir(dir, 0o755)
		for name, body := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	userRoot := filepath.Join(base, "user-root")
	os.Mkdir(userRoot, 0o700)
	os.Chown(userRoot, ru.uid, ru.gid)
	rootRoot := t.TempDir()
	for who, run := range map[string]func(args ...string) result{
		"root":     func(args ...string) result { return runProc(t, rootRoot, "", args...) },
		"rootless": func(args ...string) result { return ru.run(t, userRoot, args...) },
	} {
		t.Run(who, func(t *testing.T) {
			iid := filepath.Join(base, "iid-root")
			if who == "rootless" {
				iid = filepath.Join(userRoot, "iid") // a directory the user may write
			}
			r := run("build", "-q", "-t", "ctx/"+who+":test", "--iidfile", iid, "--label", "org.example=yes",
				"--build-context", "shared="+shared, ctx)
			if r.code != 0 {
				t.Fatalf("build: %+v", r)
			}
			if got, err := os.ReadFile(iid); err != nil || string(got) != strings.TrimSpace(r.stdout) || !strings.HasPrefix(string(got), "sha256:") {
				t.Errorf("--iidfile: %q (%v), stdout %q", got, err, r.stdout)
			}
			r = run("run", "--rm", "ctx/"+who+":test", "cat", "/copied", "/staged", "/mounted")
			if r.stdout != "shared\nshared\nshared\n" {
				t.Errorf("the context's file in the image: %+v", r)
			}
			if who == "root" {
				if l := imageConfig(t, rootRoot, "ctx/root:test").Config.Labels["org.example"]; l != "yes" {
					t.Errorf("--label: org.example=%q", l)
				}
			}
		})
	}
	r := runProc(t, t.TempDir(), "", "build", "-q", "--build-context", "shared=https://example.com/x.tar", ctx)
	if r.code == 0 || !strings.Contains(r.stderr, "fetches no URL") {
		t.Errorf("a URL context: %+v", r)
	}
}
