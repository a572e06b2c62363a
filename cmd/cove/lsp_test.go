package main

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"fmt"
	"go/format"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/cove-sh/cove/internal/testimage"
	"github.com/cove-sh/cove/internal/testregistry"
	"github.com/cove-sh/cove/workspace"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	v1tarball "github.com/google/go-containerregistry/pkg/v1/tarball"
)

// goplsDir holds gopls, built static from the Go proxy by scripts/test.sh
// (COVE_TEST_GOPLS overrides it).
func goplsPath(t *testing.T) string {
	t.Helper()
	p := os.Getenv("COVE_TEST_GOPLS")
	if p == "" {
		p = "/var/cache/cove-test/gopls/gopls"
	}
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no gopls at %s: scripts/test.sh installs it", p)
		}
		t.Skipf("no gopls at %s (scripts/test.sh builds it: CGO_ENABLED=0 GOBIN=/var/cache/cove-test/gopls go install golang.org/x/tools/gopls@v0.23.0)", p)
	}
	return p
}

// goImage is busybox with this machine's Go toolchain (the go command,
// the standard library's sources, no tests) and gopls: a workspace image
// for a Go project, made without a network.
func goImage(t *testing.T, gopls string) v1.Image {
	t.Helper()
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	goroot := strings.TrimSpace(string(out))
	l, err := v1tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(writeGoLayer(pw, goroot, gopls)) }()
		return pr, nil
	}, v1tarball.WithCompressionLevel(gzip.BestSpeed))
	if err != nil {
		t.Fatal(err)
	}
	base, err := testimage.BusyboxLayer()
	if err != nil {
		t.Fatal(err)
	}
	img, err := testimage.Image(runtime.GOARCH, base, l)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.DeepCopy()
	cfg.Config.Env = []string{"PATH=/usr/local/go/bin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "GOROOT=/usr/local/go", "GOTOOLCHAIN=local", "GOPROXY=off",
		"GOFLAGS=-mod=mod", "GOTELEMETRY=off", "CGO_ENABLED=0", "HOME=/root", "GOPATH=/tmp/gopath", "GOCACHE=/tmp/gocache", "XDG_CACHE_HOME=/tmp/cache"}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// writeGoLayer writes the layer's tar: goroot as /usr/local/go (bin/go,
// the tools, VERSION, go.env, src without tests), gopls as
// /usr/local/bin/gopls.
func writeGoLayer(w io.Writer, goroot, gopls string) error {
	tw := tar.NewWriter(w)
	add := func(name, src string, fi fs.FileInfo) error {
		hdr := &tar.Header{Name: name, Mode: int64(fi.Mode().Perm()), ModTime: fi.ModTime(), Typeflag: tar.TypeDir}
		if !fi.IsDir() {
			hdr.Typeflag, hdr.Size = tar.TypeReg, fi.Size()
		}
		if err := tw.WriteHeader(hdr); err != nil || fi.IsDir() {
			return err
		}
		f, err := os.Open(src)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	}
	for _, d := range []string{"usr/local", "usr/local/bin", "usr/local/go", "usr/local/go/bin", "usr/local/go/pkg"} {
		if err := tw.WriteHeader(&tar.Header{Name: d, Mode: 0o755, Typeflag: tar.TypeDir}); err != nil {
			return err
		}
	}
	// In order: the layer is read twice (its digest, then its upload),
	// the same bytes each time.
	for _, f := range [][2]string{{"usr/local/bin/gopls", gopls}, {"usr/local/go/bin/go", filepath.Join(goroot, "bin/go")},
		{"usr/local/go/VERSION", filepath.Join(goroot, "VERSION")}, {"usr/local/go/go.env", filepath.Join(goroot, "go.env")}} {
		name, src := f[0], f[1]
		fi, err := os.Stat(src)
		if err != nil {
			return err
		}
		if err := add(name, src, fi); err != nil {
			return err
		}
	}
	// The tools: go list asks each its version.
	if err := walkInto(filepath.Join(goroot, "pkg/tool"), goroot, add); err != nil {
		return err
	}
	if err := walkInto(filepath.Join(goroot, "src"), goroot, add); err != nil {
		return err
	}
	return tw.Close()
}

// walkInto adds the tree at dir, under usr/local/go as it is under
// goroot, leaving out tests and their data.
func walkInto(dir, goroot string, add func(name, src string, fi fs.FileInfo) error) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" || strings.HasSuffix(p, "_test.go") || d.Type()&fs.ModeSymlink != 0 {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(goroot, p)
		return add("usr/local/go/"+rel, p, fi)
	})
}

// TestBrowserLanguageServerGo: real Chromium, the real launcher, a real
// workspace image with gopls and a Go project (ide/web/test/lsp.mjs): a
// type error typed in the editor shows as a diagnostic, in the editor and
// the Problems panel, and goes when fixed; completion after "p." offers
// the struct's fields; F12 opens the other file at the definition's
// line; F2 renames the type in both files, on disk. As root, and
// rootless (covetest, with subordinate ids).
func TestBrowserLanguageServerGo(t *testing.T) {
	needRoot(t)
	gopls := goplsPath(t)
	addr := testregistry.Addr(t)
	node := browserTestTools(t)
	ref := testregistry.Push(t, addr, goImage(t, gopls))
	eachNetUser(t, "cove-gopls-browser-", func(t *testing.T, u netUser, project string) {
		for name, body := range map[string]string{
			"go.mod":   "module example.com/shapes\n\ngo 1.22\n",
			"types.go": "package main\n\n// A place on the plane.\ntype Point struct {\n\tX, Y int\n}\n\n// Origin is where the axes cross.\nfunc Origin() Point { return Point{} }\n",
			"main.go":  "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tp := Origin()\n\tvar q Point = p\n\tfmt.Println(p.X, q.Y)\n}\n",
		} {
			os.WriteFile(filepath.Join(project, name), []byte(body), 0o644)
		}
		// The project is the user's (covetest's, rootless), as its directory is.
		giveToProjectOwner(project)
		url, upLog := upAs(t, u, "--image", ref, project)
		cmd := exec.Command(node, "../../ide/web/test/lsp.mjs", url)
		out, err := cmd.CombinedOutput()
		t.Logf("%s", out)
		if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "ok") {
			t.Fatalf("lsp.mjs: %v\nlauncher: %s", err, upLog)
		}
		types, _ := os.ReadFile(filepath.Join(project, "types.go"))
		main, _ := os.ReadFile(filepath.Join(project, "main.go"))
		if !strings.Contains(string(types), "type Place struct") || !strings.Contains(string(types), "func Origin() Place { return Place{} }") ||
			!strings.Contains(string(main), "var q Place = p") || strings.Contains(string(types)+string(main), "Point") {
			t.Errorf("after the rename, on disk:\ntypes.go:\n%s\nmain.go:\n%s", types, main)
		}
		// What the rename wrote is the user's, not root's.
		if fi, err := os.Stat(filepath.Join(project, "types.go")); err == nil {
			if want, _ := os.Stat(project); fi.Sys().(*syscall.Stat_t).Uid != want.Sys().(*syscall.Stat_t).Uid {
				t.Errorf("types.go after the rename is owned by %d, the project by %d", fi.Sys().(*syscall.Stat_t).Uid, want.Sys().(*syscall.Stat_t).Uid)
			}
		}
	})
}

// tslsPath is the directory whose node_modules hold
// typescript-language-server and typescript, installed from npm by
// scripts/test.sh (COVE_TEST_TYPESCRIPT_LS overrides it).
func tslsPath(t *testing.T) string {
	t.Helper()
	p := os.Getenv("COVE_TEST_TYPESCRIPT_LS")
	if p == "" {
		p = "/var/cache/cove-test/typescript-language-server"
	}
	_, err1 := os.Stat(filepath.Join(p, "node_modules/typescript-language-server/lib/cli.mjs"))
	_, err2 := os.Stat(filepath.Join(p, "node_modules/typescript/lib/tsserver.js"))
	if err1 != nil || err2 != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no typescript-language-server or typescript under %s: scripts/test.sh installs them", p)
		}
		t.Skipf("no typescript-language-server or typescript under %s (scripts/test.sh installs them from npm)", p)
	}
	return p
}

// nodeModulesEntries are the files under dir/node_modules as
// opt/tsls/node_modules (no .bin: its links are the packages' own files),
// and /usr/bin/typescript-language-server running it with node.
func nodeModulesEntries(t *testing.T, dir string) []testimage.Entry {
	t.Helper()
	es := []testimage.Entry{testimage.Dir("opt", 0o755), testimage.Dir("opt/tsls", 0o755),
		testimage.File("usr/bin/typescript-language-server", "#!/bin/sh\nexec node /opt/tsls/node_modules/typescript-language-server/lib/cli.mjs \"$@\"\n", 0o755)}
	err := filepath.WalkDir(filepath.Join(dir, "node_modules"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Name() == ".bin" || d.Type()&fs.ModeSymlink != 0 {
			if err == nil && d.IsDir() {
				return filepath.SkipDir
			}
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			es = append(es, testimage.Dir("opt/tsls/"+rel, 0o755))
			return nil
		}
		body, err := os.ReadFile(p)
		es = append(es, testimage.Entry{Name: "opt/tsls/" + rel, Type: tar.TypeReg, Body: body, Mode: 0o644})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// TestBrowserLanguageServerTypeScript: real Chromium, the real launcher,
// a workspace image with this machine's node and typescript-language-server
// and typescript from npm, and a TypeScript project
// (ide/web/test/tslsp.mjs): a type error typed in the editor shows as a
// diagnostic, in the editor and the Problems panel, and goes when fixed;
// completion after "p." offers the interface's fields. As root, and
// rootless (covetest, with subordinate ids).
func TestBrowserLanguageServerTypeScript(t *testing.T) {
	needRoot(t)
	tsls := tslsPath(t)
	addr := testregistry.Addr(t)
	node := browserTestTools(t)
	ref := testregistry.Push(t, addr, hostToolImage(t, node, nodeModulesEntries(t, tsls)...))
	eachNetUser(t, "cove-tsls-browser-", func(t *testing.T, u netUser, project string) {
		for name, body := range map[string]string{
			"tsconfig.json": `{"compilerOptions": {"strict": true, "target": "es2022", "module": "esnext", "moduleResolution": "bundler", "noEmit": true, "lib": ["es2022"], "types": [], "skipLibCheck": true}}` + "\n",
			"types.ts":      "// A place on the plane.\nexport interface Point {\n  x: number;\n  y: number;\n}\n\n// Where the axes cross.\nexport function origin(): Point {\n  return { x: 0, y: 0 };\n}\n",
			"main.ts":       "import { origin, type Point } from \"./types\";\n\nconst p: Point = origin();\nexport const sum = p.x + p.y;\n",
		} {
			os.WriteFile(filepath.Join(project, name), []byte(body), 0o644)
		}
		giveToProjectOwner(project)
		url, upLog := upAs(t, u, "--image", ref, project)
		out, err := exec.Command(node, "../../ide/web/test/tslsp.mjs", url).CombinedOutput()
		t.Logf("%s", out)
		if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "ok") {
			t.Fatalf("tslsp.mjs: %v\nlauncher: %s", err, upLog)
		}
	})
}

// hostGitImage is busybox with this machine's git and the libraries it
// loads, at the same paths: a workspace image with git, made without a
// network.
func hostGitImage(t *testing.T) v1.Image {
	t.Helper()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git on this machine to put in the image")
	}
	return hostToolImage(t, git)
}

// hostToolImage is busybox with this machine's program bin and the
// libraries it loads, at the same paths, and then extra (its own
// directories, none of those): a workspace image made without a network.
func hostToolImage(t *testing.T, bin string, extra ...testimage.Entry) v1.Image {
	t.Helper()
	out, err := exec.Command("ldd", bin).Output()
	if err != nil {
		t.Fatalf("ldd %s: %v", bin, err)
	}
	files := []string{bin}
	for _, f := range strings.Fields(string(out)) {
		if strings.HasPrefix(f, "/") {
			files = append(files, f)
		}
	}
	var dirs, names []testimage.Entry
	seen := map[string]bool{"usr": true, "usr/bin": true, "bin": true} // busybox's
	for _, f := range files {
		body, err := os.ReadFile(f) // through a symlink: the library itself, under the name it is loaded by
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(f, "/")
		var up []string
		for d := filepath.Dir(name); d != "." && !seen[d]; d = filepath.Dir(d) {
			seen[d] = true
			up = append([]string{d}, up...)
		}
		for _, d := range up {
			dirs = append(dirs, testimage.Dir(d, 0o755))
		}
		names = append(names, testimage.Entry{Name: name, Type: tar.TypeReg, Body: body, Mode: 0o755})
	}
	l, err := testimage.Layer(append(append(dirs, names...), extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	base, err := testimage.BusyboxLayer()
	if err != nil {
		t.Fatal(err)
	}
	img, err := testimage.Image(runtime.GOARCH, base, l)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// TestBrowserSourceControl: real Chromium, the real launcher, git in the
// workspace (ide/web/test/scm.mjs): a change made in the IDE's terminal
// shows in the Source Control view, its diff in the merge view; a file is
// staged and unstaged, another's change discarded after a confirmation;
// of a file with two changed hunks, both are staged one by one from the
// merge view and the first unstaged again; a commit with a message; a new
// branch is made and switched to. Then git inside the workspace shows
// that commit, with the file's change and only the second hunk, the first
// still in git diff, on the branch, and the discarded file as it was. Along the way: the
// user's editor settings (font size, tab size) apply, and a change to
// the file applies to the open editor without a reload. As root, and
// rootless (covetest, with subordinate ids).
func TestBrowserSourceControl(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	node := browserTestTools(t)
	ref := testregistry.Push(t, addr, hostGitImage(t))
	eachNetUser(t, "cove-scm-browser-", func(t *testing.T, u netUser, project string) {
		browserSourceControl(t, node, ref, u, project)
	})
}

// browserSourceControl is TestBrowserSourceControl with cove run by u
// (root, or covetest with its subordinate ids), on project.
func browserSourceControl(t *testing.T, node, ref string, u netUser, project string) {
	os.WriteFile(filepath.Join(project, "hello.txt"), []byte("hello\n"), 0o644)
	os.WriteFile(filepath.Join(project, "other.txt"), []byte("other\n"), 0o644)
	var long strings.Builder
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&long, "line %d\n", i)
	}
	os.WriteFile(filepath.Join(project, "long.txt"), []byte(long.String()), 0o644)
	// The fixture's repository (the test's own doing, before the
	// workspace starts).
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"config", "user.name", "Cove Test"}, {"config", "user.email", "test@cove.invalid"},
		{"add", "."}, {"commit", "-q", "-m", "first"}} {
		hostGit(t, project, args...)
	}
	// The user's editor settings, changed while the window is open: in a
	// directory of the user's (covetest's, rootless, as the project is).
	config := filepath.Join(u.root, "config")
	os.MkdirAll(filepath.Join(config, "cove"), 0o700)
	settingsFile := filepath.Join(config, "cove", "settings.json")
	os.WriteFile(settingsFile, []byte(`{"editor": {"fontSize": 19, "tabSize": 3}}`), 0o600)
	giveToProjectOwner(project, config)
	launcher := u
	launcher.env = append(launcher.env, "XDG_CONFIG_HOME="+config)
	url, upLog := upAs(t, launcher, "--image", ref, project)
	cmd := exec.Command(node, "../../ide/web/test/scm.mjs", url)
	var errb strings.Builder
	cmd.Stderr = &errb
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if sc.Text() == "cove-test: settings" {
			// Written in place: the file stays the user's.
			os.WriteFile(settingsFile, []byte(`{"editor": {"fontSize": 23, "tabSize": 3, "wordWrap": true}}`), 0o600)
		}
	}
	if err := cmd.Wait(); err != nil || len(lines) == 0 || lines[len(lines)-1] != "ok" {
		t.Fatalf("scm.mjs: %v\n%s\n%s\nlauncher: %s", err, strings.Join(lines, "\n"), errb.String(), upLog)
	}
	name := workspace.Name(project)
	log := u.cove(t, "", "exec", name, "git", "-C", "/workspace", "log", "-p", "-1")
	if log.code != 0 || !strings.Contains(log.stdout, "Change hello from the IDE") || !strings.Contains(log.stdout, "+changed-in-terminal") ||
		strings.Contains(log.stdout, "new.txt") || !strings.Contains(log.stdout, "+SECOND CHANGE") || strings.Contains(log.stdout, "FIRST CHANGE") {
		t.Errorf("git log -p in the workspace: %+v", log)
	}
	if d := u.cove(t, "", "exec", name, "git", "-C", "/workspace", "diff"); !strings.Contains(d.stdout, "+FIRST CHANGE") || strings.Contains(d.stdout, "SECOND") {
		t.Errorf("git diff in the workspace, the hunk not staged: %+v", d)
	}
	if b := u.cove(t, "", "exec", name, "git", "-C", "/workspace", "branch", "--show-current"); strings.TrimSpace(b.stdout) != "feature-x" {
		t.Errorf("the branch in the workspace: %+v", b)
	}
	if b, _ := os.ReadFile(filepath.Join(project, "other.txt")); string(b) != "other\n" {
		t.Errorf("other.txt after the discard: %q", b)
	}
	if _, err := os.Stat(filepath.Join(project, "new.txt")); err != nil {
		t.Errorf("new.txt, unstaged, is gone: %v", err)
	}
}

// TestBrowserFormatOutlineSplit: real Chromium, the real launcher, gopls
// in a real workspace image (ide/web/test/format.mjs): the Outline lists
// a file's symbols from gopls, the struct's fields under it, and a click
// on one puts the cursor on its name; with "formatOnSave" in the user's
// settings, badly formatted Go saved with Ctrl+S is on disk as gofmt
// makes it; Ctrl+\ shows two editor groups side by side, Ctrl+1 and
// Ctrl+2 move between them (the Outline following), and the second
// goes with its last file; a file renamed in the tree is known to gopls
// by its new URI (a type error in it is listed under its new name).
// Alone, as the other language-server tests: beside three others under
// CI's load its page once waited past 60 s for its first shell.
func TestBrowserFormatOutlineSplit(t *testing.T) {
	needRoot(t)
	gopls := goplsPath(t)
	addr := testregistry.Addr(t)
	node := browserTestTools(t)
	ref := testregistry.Push(t, addr, goImage(t, gopls))
	project := t.TempDir()
	for name, body := range map[string]string{
		"go.mod":   "module example.com/shapes\n\ngo 1.22\n",
		"types.go": "package main\n\n// A place on the plane.\ntype Point struct {\n\tX, Y int\n}\n\n// Origin is where the axes cross.\nfunc Origin() Point { return Point{} }\n",
		"main.go":  "package main\n\nfunc main() {}\n",
	} {
		os.WriteFile(filepath.Join(project, name), []byte(body), 0o644)
	}
	config := t.TempDir()
	os.MkdirAll(filepath.Join(config, "cove"), 0o700)
	os.WriteFile(filepath.Join(config, "cove", "settings.json"), []byte(`{"editor": {"formatOnSave": true}}`), 0o600)
	bad := "package main\nimport \"fmt\"\nfunc main(){\np:=Origin()\n      var q Point=p\nfmt.Println( p.X,q.Y )}\n"
	want, err := format.Source([]byte(bad))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	_, url := startUpEnv(t, root, ref, project, []string{"XDG_CONFIG_HOME=" + config})
	out, err := exec.Command(node, "../../ide/web/test/format.mjs", url, bad).CombinedOutput()
	t.Logf("%s", out)
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "ok") {
		t.Fatalf("format.mjs: %v\nlauncher: %s", err, upErr(t))
	}
	if got, _ := os.ReadFile(filepath.Join(project, "main.go")); string(got) != string(want) {
		t.Errorf("main.go on disk:\n%s\nwant gofmt's:\n%s", got, want)
	}
}
