package devcontainer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/cove-sh/cove/internal/dirs"
	"github.com/cove-sh/cove/internal/projectfs"
	"github.com/cove-sh/cove/internal/trustrecord"
	"github.com/tailscale/hujson"
)

// The user trusts a devcontainer.json on the host (cove up --trust): the
// record lives in the user's own config directory, keyed by the file's
// path and bound to its content and that of the project's files its
// initializeCommand names (a script beside it), so a change the workspace
// makes to any of them afterwards is untrusted again.

// TrustPath is the record of trusted devcontainer.json files.
func TrustPath(home string) string {
	return filepath.Join(dirs.ConfigDir(home), "trusted-devcontainer.json")
}

func trustFile(home string) trustrecord.File { return trustrecord.File{Path: TrustPath(home)} }

func contentHash(b []byte) string { return trustrecord.Hash(b) }

// Trusted says whether the user trusted the config at path, of the
// project in dir, with content raw (and the files its initializeCommand
// names as they are now). A record for an initializeCommand of a form
// cove no longer trusts (see checkInitialize) holds nothing.
func Trusted(home, dir, path string, raw []byte) bool {
	if raw == nil || checkInitialize(dir, raw) != nil {
		return false
	}
	return trustFile(home).Get(path) == trustKey(dir, path, raw)
}

// trustKey is what a trust record binds: the file's bytes and, for each
// word of its initializeCommand that could name a path in the project
// (sh .devcontainer/init.sh), what is there: that file's bytes, a
// directory, or nothing. The command runs on the host, and the workspace
// can write the script as it can the file: trusting the file alone would
// let the workspace choose what runs, and a script absent at the trust
// may not appear later either. With no initializeCommand it is the
// file's sha256 alone, as records made before had it.
func trustKey(dir, path string, raw []byte) string {
	scripts := initializeFiles(dir, raw)
	// The Compose files are bound as files: nothing runs them, so what
	// lies beside them is not theirs.
	named := append(slices.Clone(scripts), composeFiles(dir, path, raw)...)
	if len(named) == 0 {
		return contentHash(raw)
	}
	h := sha256.New()
	h.Write(raw)
	d, err := projectfs.Open(dir)
	if err != nil {
		return "unreadable"
	}
	defer d.Close()
	for _, rel := range named {
		kind, b, err := pinned(d, rel)
		switch {
		case err != nil:
			fmt.Fprintf(h, "\x00%s\x00unreadable: %v", rel, err)
		case kind == "file":
			fmt.Fprintf(h, "\x00%s\x00%s", rel, contentHash(b))
		default:
			fmt.Fprintf(h, "\x00%s\x00%s", rel, kind)
		}
	}
	for _, tree := range pinnedTrees(d, scripts) {
		fmt.Fprintf(h, "\x00tree %s\x00", tree)
		if err := hashTree(d, tree, h); err != nil {
			fmt.Fprintf(h, "unreadable: %v", err)
		}
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// pinnedTrees are the directories whose whole content a trust binds: each
// named directory (go run ./tools/init), and the directory of each named
// file but the project's top (.devcontainer for sh .devcontainer/init.sh),
// since a script runs what lies beside it (. "$(dirname "$0")/lib.sh",
// Python's imports from the script's directory).
func pinnedTrees(d *projectfs.Dir, named []string) []string {
	var trees []string
	for _, rel := range named {
		kind, _, err := pinned(d, rel)
		if err != nil {
			continue
		}
		tree := ""
		switch kind {
		case "dir":
			tree = rel
		case "file":
			tree = filepath.Dir(rel)
		}
		if tree != "" && tree != "." && !slices.Contains(trees, tree) {
			trees = append(trees, tree)
		}
	}
	slices.Sort(trees)
	return trees
}

// Bounds of a pinned tree: a trust binds a script's directory, not a
// source tree; a larger one is refused (see checkTree).
const (
	maxTreeEntries = 2000
	maxTreeBytes   = 32 << 20
)

// hashTree writes into h the names, kinds, permissions and contents of
// everything under tree, in order, following no symlink.
func hashTree(d *projectfs.Dir, tree string, h io.Writer) error {
	n, size := 0, int64(0)
	return fs.WalkDir(d.FS(), filepath.ToSlash(tree), func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if n++; n > maxTreeEntries {
			return fmt.Errorf("%s holds more than %d entries", tree, maxTreeEntries)
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%v\x00", p, fi.Mode())
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			return fmt.Errorf("%s is a symlink", p)
		case fi.IsDir():
			return nil
		case !fi.Mode().IsRegular():
			return fmt.Errorf("%s is not a file or directory", p)
		}
		if size += fi.Size(); size > maxTreeBytes {
			return fmt.Errorf("%s holds more than %d MiB", tree, maxTreeBytes>>20)
		}
		b, err := d.ReadFileLimit(filepath.FromSlash(p), maxTreeBytes)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00", contentHash(b))
		return nil
	})
}

// pinned says what the project path rel is, without following a symlink
// anywhere on the way: "absent", "dir", "file" (with its bytes), or
// "symlink" (which the trust refuses: what it points to can change
// without the link changing, /proc/self/cwd/… among them).
func pinned(d *projectfs.Dir, rel string) (kind string, b []byte, err error) {
	parts := strings.Split(rel, string(filepath.Separator))
	for i := range parts {
		fi, err := d.Lstat(filepath.Join(parts[:i+1]...))
		switch {
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
			return "absent", nil, nil
		case err != nil:
			return "", nil, err
		case fi.Mode()&fs.ModeSymlink != 0:
			return "symlink", nil, nil
		case i < len(parts)-1 && !fi.IsDir():
			return "absent", nil, nil
		case i == len(parts)-1 && fi.IsDir():
			return "dir", nil, nil
		case i == len(parts)-1 && !fi.Mode().IsRegular():
			return "special", nil, nil
		}
	}
	b, err = d.ReadFileLimit(rel, 1<<20)
	return "file", b, err
}

// safeWord is what a word of a trusted initializeCommand may hold: no
// shell syntax at all (no $, `, quotes, globs, ~, ;, &, |, <, >, (, ),
// braces, backslashes), so that every file it may run is one of its
// words, which the trust pins, and none is chosen by an expansion, a cd,
// a glob or a variable of the shell at the time it runs.
var safeWord = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]*$`) })

// coveVars are the variables cove substitutes itself before anything
// runs (a default, if given, of the same safe characters).
var coveVars = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`\$\{(localWorkspaceFolder|localWorkspaceFolderBasename|containerWorkspaceFolder|containerWorkspaceFolderBasename|devcontainerId|(localEnv|env):[A-Za-z_][A-Za-z0-9_]*(:[A-Za-z0-9_@%+=:,./-]*)?)\}`)
})

// checkInitialize refuses an initializeCommand whose files cove cannot
// pin: shell syntax in any form (the string, or an array's word, as in
// ["sh", "-c", "cd x && sh y"]), a path under /proc or /dev/fd (which
// can lead back into the project), or a word that names a symlink or
// something not a file or directory in the project.
func checkInitialize(dir string, raw []byte) error {
	cmd, ok := initializeValue(raw)
	if !ok {
		return nil
	}
	const form = `name its script as a plain path, e.g. "initializeCommand": "sh .devcontainer/init.sh" (or ["sh", ".devcontainer/init.sh"]), and put the rest in the script`
	var words []string
	var walk func(v any) error
	walk = func(v any) error {
		switch v := v.(type) {
		case string:
			for _, w := range strings.Fields(v) {
				if !safeWord().MatchString(coveVars().ReplaceAllString(w, "x")) {
					return fmt.Errorf("initializeCommand %q: %q has shell syntax (an expansion, a glob, quotes, cd && …, a redirection): the script it runs would not be the one you trusted; %s", v, w, form)
				}
				words = append(words, w)
			}
		case []any:
			for _, e := range v {
				if err := walk(e); err != nil {
					return err
				}
			}
		case map[string]any:
			for _, e := range v {
				if err := walk(e); err != nil {
					return err
				}
			}
		case nil:
		default:
			return fmt.Errorf("initializeCommand: %v is not a command", v)
		}
		return nil
	}
	if err := walk(cmd); err != nil {
		return err
	}
	for _, w := range words {
		w = strings.ReplaceAll(w, "${localWorkspaceFolder}", dir)
		for _, p := range wordPaths(w) {
			if c := filepath.Clean(p); c == "/proc" || strings.HasPrefix(c, "/proc/") || c == "/dev/fd" || strings.HasPrefix(c, "/dev/fd/") || strings.HasPrefix(c, "/dev/std") {
				return fmt.Errorf("initializeCommand: %s is a process's view of files (it can lead back into the project, where the workspace writes); %s", p, form)
			}
		}
	}
	if err := checkPrograms(cmd, form); err != nil {
		return err
	}
	d, err := projectfs.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	named := initializeFiles(dir, raw)
	for _, tree := range pinnedTrees(d, named) {
		if err := hashTree(d, tree, io.Discard); err != nil {
			return fmt.Errorf("initializeCommand: cove pins the whole of %s, beside what it runs, and cannot: %w; keep the script in a small directory of plain files of its own, and %s", tree, err, form)
		}
	}
	for _, rel := range named {
		kind, _, err := pinned(d, rel)
		if err != nil {
			return fmt.Errorf("initializeCommand: %s: %w", rel, err)
		}
		if kind == "symlink" || kind == "special" {
			return fmt.Errorf("initializeCommand: %s in the project is a %s: what it leads to can change without the trust seeing it; %s", rel, kind, form)
		}
	}
	return nil
}

// projectDriven are programs that take what they do from files in the
// directory they run in (a Makefile, package.json's scripts, .git/config's
// core.fsmonitor and hooks, a compose file's privileged service), which
// the workspace can write after the trust: a trusted initializeCommand
// cannot pin those, so it may not run them on the host. The same work
// belongs in postCreateCommand, inside the workspace.
var projectDriven = []string{
	"git", "make", "gmake", "cmake", "npm", "npx", "yarn", "pnpm", "bun", "deno", "node",
	"docker", "docker-compose", "podman", "podman-compose", "nerdctl", "kubectl", "helm", "skaffold", "tilt",
	"just", "task", "rake", "bundle", "cargo", "go", "mvn", "gradle", "ant", "sbt",
	"pip", "pip3", "poetry", "pipenv", "uv", "tox", "nox", "composer", "mise", "asdf", "direnv", "nix", "devbox",
}

// wrappers run the word after their options and assignments.
var wrappers = []string{"env", "nice", "nohup", "time", "command", "exec", "sudo", "doas", "stdbuf", "timeout", "ionice", "setsid"}

// checkPrograms refuses each command of an initializeCommand (a string, an
// array, or an object of either) whose program is one of projectDriven.
func checkPrograms(cmd any, form string) error {
	var commands [][]string
	switch v := cmd.(type) {
	case string:
		commands = append(commands, strings.Fields(v))
	case []any:
		var argv []string
		for _, w := range v {
			s, _ := w.(string)
			argv = append(argv, s)
		}
		commands = append(commands, argv)
	case map[string]any:
		for _, e := range v {
			if err := checkPrograms(e, form); err != nil {
				return err
			}
		}
	}
	for _, argv := range commands {
		prog := program(argv)
		if slices.Contains(projectDriven, prog) {
			return fmt.Errorf("initializeCommand: %s takes what it runs from the project's files (which the workspace can change after you trust it), so cove does not run it on this host: run it in postCreateCommand, inside the workspace, or %s", prog, form)
		}
	}
	return nil
}

// program is the program argv runs: past wrappers, their options and
// VAR=value assignments, by its base name.
func program(argv []string) string {
	for i := 0; i < len(argv); i++ {
		w := filepath.Base(argv[i])
		switch {
		case strings.HasPrefix(argv[i], "-"), strings.Contains(argv[i], "=") && !strings.Contains(argv[i], "/"):
			continue
		case slices.Contains(wrappers, w):
			if w == "timeout" && i+1 < len(argv) && !strings.HasPrefix(argv[i+1], "-") {
				i++ // its duration
			}
			continue
		}
		return w
	}
	return ""
}

// initializeValue is raw's initializeCommand, if it has one.
func initializeValue(raw []byte) (any, bool) {
	std, err := hujson.Standardize(raw)
	if err != nil {
		return nil, false
	}
	var f struct {
		InitializeCommand any `json:"initializeCommand"`
	}
	if json.Unmarshal(std, &f) != nil || f.InitializeCommand == nil {
		return nil, false
	}
	return f.InitializeCommand, true
}

// wordPaths are the paths a word may name: itself, and what follows an
// = or a : in it (--file=x, PATH-like lists).
func wordPaths(w string) []string {
	out := []string{w}
	for _, sep := range []string{"=", ":"} {
		out = append(out, strings.Split(w, sep)[1:]...)
	}
	return out
}

// initializeFiles are the words of raw's initializeCommand (any form) that
// could name a path in the project dir, relative to it (the command runs
// there), sorted.
func initializeFiles(dir string, raw []byte) []string {
	cmd, ok := initializeValue(raw)
	if !ok {
		return nil
	}
	var words []string
	var collect func(v any)
	collect = func(v any) {
		switch v := v.(type) {
		case string:
			v = strings.ReplaceAll(v, "${localWorkspaceFolder}", dir)
			// Whole, too: an array's word is one argument, spaces and all.
			words = append(words, wordPaths(v)...)
			for _, w := range strings.FieldsFunc(v, func(r rune) bool {
				return strings.ContainsRune(" \t\n;&|<>()`'\"", r)
			}) {
				words = append(words, wordPaths(w)...)
			}
		case []any:
			for _, e := range v {
				collect(e)
			}
		case map[string]any:
			for _, e := range v {
				collect(e)
			}
		}
	}
	collect(cmd)
	var out []string
	for _, w := range words {
		if w == "" {
			continue
		}
		if filepath.IsAbs(w) {
			r, err := filepath.Rel(dir, w)
			if err != nil {
				continue
			}
			w = r
		}
		w = filepath.Clean(w)
		if filepath.IsLocal(w) && !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	slices.Sort(out)
	return out
}

// composeFiles are the project's Compose files a devcontainer.json at
// path names (dockerComposeFile) and the .env beside the first, relative
// to dir: trusting the file trusts them as they are (the workspace can
// write them too, and trusted they may bind the host's paths).
func composeFiles(dir, path string, raw []byte) []string {
	std, err := hujson.Standardize(append([]byte(nil), raw...))
	if err != nil {
		return nil
	}
	var tree map[string]any
	if json.Unmarshal(std, &tree) != nil {
		return nil
	}
	files := stringList(tree["dockerComposeFile"])
	if len(files) > 0 {
		files = append(files, filepath.Join(filepath.Dir(files[0]), ".env"))
	}
	var out []string
	for _, f := range files {
		if !filepath.IsAbs(f) {
			f = filepath.Join(filepath.Dir(path), f)
		}
		if r, err := filepath.Rel(dir, f); err == nil && filepath.IsLocal(r) && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// Trust records that the user trusts the project's devcontainer.json (the
// one opts chooses) as it is now, and returns its path and what trusting
// it lets take effect (what an untrusted read holds back: the command run
// on the host, the host paths, capabilities, run arguments, host
// variables), for the user to see: each exactly as it will be applied,
// read as the trusted file is (host paths with ${localEnv:HOME} and the
// like filled in from opts.Getenv), the host variables by name only (a
// value may be a secret). A project without one has nothing to trust.
func Trust(dir string, opts Options) (path string, grants []string, err error) {
	c, err := Load(dir, Options{ConfigPath: opts.ConfigPath})
	if err != nil {
		return "", nil, err
	}
	if c == nil {
		return "", nil, fmt.Errorf("%s has no devcontainer.json to trust", dir)
	}
	if err := checkInitialize(dir, c.Raw); err != nil {
		return "", nil, fmt.Errorf("%s: not trusted: %w", c.Path, err)
	}
	if err := trustFile(opts.Home).Set(c.Path, trustKey(dir, c.Path, c.Raw)); err != nil {
		return "", nil, err
	}
	// Read again as the start will read it, trusted: what holdBack would
	// take from that is what the trust gives.
	t, err := Load(dir, opts)
	if err != nil {
		return "", nil, err
	}
	if t == nil || t.Path != c.Path || !t.Trusted {
		return "", nil, fmt.Errorf("%s changed while it was being trusted: read it again, then cove up --trust", c.Path)
	}
	held := *t
	held.Untrusted = nil
	held.holdBack(dir, &vars{})
	grants = held.Untrusted
	if len(c.vars.heldEnv) > 0 {
		grants = append(grants, "${localEnv:…}: this host's environment ("+strings.Join(c.vars.heldEnv, ", ")+")")
	}
	return c.Path, grants, nil
}
