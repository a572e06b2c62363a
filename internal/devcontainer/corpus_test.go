package devcontainer

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/tailscale/hujson"
)

// The corpus is devcontainer.json files as public projects wrote them
// (the devcontainers templates, the older vscode-dev-containers
// definitions, well-known repositories), kept verbatim: comments,
// trailing commas and all. Each file is named
// OWNER__REPO__PATH-WITH-__ (SOURCES.md says where and at which commit it
// was read). It is third-party data, so it is not in this repository: the
// test reads it from COVE_DEVCONTAINER_CORPUS, else testdata/corpus, else
// the shared/devcontainer-corpus folder beside the checkout (where CI has
// the project's shared data).

// corpusWant is what cove does with each file of the corpus: "starts"
// (with a local image in place of the registry's), or "refused: KEY"
// (before anything starts, the error naming KEY and what to do). A change
// of behaviour is a failure here, and so is a file of the corpus not in
// the table or a line of the table with no file. "starts" is the file's
// part: a Feature's own metadata is read when it is fetched (the
// docker-in-docker Feature, in three of them, asks for a privileged
// container, which internal/devimage refuses then, before anything
// starts).
var corpusWant = map[string]string{
	"apache__airflow__.devcontainer__devcontainer.json":                                                             "refused: dockerComposeFile,service", // Docker Compose: cove runs one container
	"dapr__dapr__.devcontainer__devcontainer.json":                                                                  "refused: runArgs",                   // --privileged
	"denoland__deno__.devcontainer__devcontainer.json":                                                              "starts",
	"devcontainers__templates__.devcontainer__devcontainer.json":                                                    "starts",
	"devcontainers__templates__src__anaconda__.devcontainer__devcontainer.json":                                     "starts",
	"devcontainers__templates__src__cpp__.devcontainer__devcontainer.json":                                          "starts",
	"devcontainers__templates__src__docker-existing-dockerfile__.devcontainer__devcontainer.json":                   "starts",
	"devcontainers__templates__src__docker-in-docker__.devcontainer__devcontainer.json":                             "refused: features",                  // a Template's source: ${templateOption:…} in a Feature's options
	"devcontainers__templates__src__docker-outside-of-docker-compose__.devcontainer__devcontainer.json":             "refused: dockerComposeFile,service", // Docker Compose: cove runs one container
	"devcontainers__templates__src__docker-outside-of-docker__.devcontainer__devcontainer.json":                     "refused: features",                  // a Template's source: ${templateOption:…} in a Feature's options
	"devcontainers__templates__src__go-postgres__.devcontainer__devcontainer.json":                                  "refused: dockerComposeFile,service", // Docker Compose: cove runs one container
	"devcontainers__templates__src__go__.devcontainer__devcontainer.json":                                           "refused: image",                     // a Template's source: ${templateOption:…} in the image
	"devcontainers__templates__src__java__.devcontainer__devcontainer.json":                                         "refused: features",                  // a Template's source: ${templateOption:…} in a Feature's options
	"devcontainers__templates__src__javascript-node-mongo__.devcontainer__devcontainer.json":                        "refused: dockerComposeFile,service", // Docker Compose: cove runs one container
	"devcontainers__templates__src__jekyll__.devcontainer__devcontainer.json":                                       "refused: image",                     // a Template's source: ${templateOption:…} in the image
	"devcontainers__templates__src__kubernetes-helm-minikube__.devcontainer__devcontainer.json":                     "starts",
	"devcontainers__templates__src__php__.devcontainer__devcontainer.json":                                          "refused: image",                     // a Template's source: ${templateOption:…} in the image
	"devcontainers__templates__src__python__.devcontainer__devcontainer.json":                                       "refused: image",                     // a Template's source: ${templateOption:…} in the image
	"devcontainers__templates__src__rust-postgres__.devcontainer__devcontainer.json":                                "refused: dockerComposeFile,service", // Docker Compose: cove runs one container
	"devcontainers__templates__src__ubuntu__.devcontainer__devcontainer.json":                                       "refused: image",                     // a Template's source: ${templateOption:…} in the image
	"devcontainers__templates__src__universal__.devcontainer__devcontainer.json":                                    "starts",
	"django__django__.devcontainer__devcontainer.json":                                                              "starts",
	"dotnet__aspnetcore__.devcontainer__devcontainer.json":                                                          "starts",
	"dotnet__runtime__.devcontainer__devcontainer.json":                                                             "starts",
	"dotnet__runtime__.devcontainer__wasm__devcontainer.json":                                                       "starts",
	"github__docs__.devcontainer__devcontainer.json":                                                                "starts",
	"grafana__grafana__.devcontainer__devcontainer.json":                                                            "starts",
	"home-assistant__core__.devcontainer__devcontainer.json":                                                        "starts",
	"kubernetes__kubernetes__.devcontainer__devcontainer.json":                                                      "starts",
	"microsoft__TypeScript__.devcontainer__devcontainer.json":                                                       "starts",
	"microsoft__playwright__.devcontainer__devcontainer.json":                                                       "starts",
	"microsoft__vscode-dev-containers__containers__azure-functions-node__.devcontainer__devcontainer.json":          "starts",
	"microsoft__vscode-dev-containers__containers__bazel__.devcontainer__devcontainer.json":                         "starts",
	"microsoft__vscode-dev-containers__containers__codespaces-linux__.devcontainer__devcontainer.json":              "refused: runArgs", // --privileged
	"microsoft__vscode-dev-containers__containers__cpp__.devcontainer__devcontainer.json":                           "starts",
	"microsoft__vscode-dev-containers__containers__dapr-dotnet__.devcontainer__devcontainer.json":                   "refused: dockerComposeFile,service", // Docker Compose: cove runs one container
	"microsoft__vscode-dev-containers__containers__deno__.devcontainer__devcontainer.json":                          "starts",
	"microsoft__vscode-dev-containers__containers__docker-from-docker__.devcontainer__devcontainer.json":            "starts",
	"microsoft__vscode-dev-containers__containers__docker-in-docker__.devcontainer__devcontainer.json":              "refused: runArgs", // --privileged
	"microsoft__vscode-dev-containers__containers__dotnet__.devcontainer__devcontainer.json":                        "starts",
	"microsoft__vscode-dev-containers__containers__elixir-phoenix-postgres__.devcontainer__devcontainer.json":       "refused: dockerComposeFile,service", // Docker Compose: cove runs one container
	"microsoft__vscode-dev-containers__containers__go__.devcontainer__devcontainer.json":                            "starts",
	"microsoft__vscode-dev-containers__containers__haskell__.devcontainer__devcontainer.json":                       "starts",
	"microsoft__vscode-dev-containers__containers__javascript-node__.devcontainer__devcontainer.json":               "starts",
	"microsoft__vscode-dev-containers__containers__julia__.devcontainer__devcontainer.json":                         "starts",
	"microsoft__vscode-dev-containers__containers__jupyter-datascience-notebooks__.devcontainer__devcontainer.json": "starts",
	"microsoft__vscode-dev-containers__containers__kubernetes-helm-minikube__.devcontainer__devcontainer.json":      "refused: runArgs", // --privileged
	"microsoft__vscode-dev-containers__containers__php__.devcontainer__devcontainer.json":                           "starts",
	"microsoft__vscode-dev-containers__containers__python-3__.devcontainer__devcontainer.json":                      "starts",
	"microsoft__vscode-dev-containers__containers__r__.devcontainer__devcontainer.json":                             "starts",
	"microsoft__vscode-dev-containers__containers__ruby-rails__.devcontainer__devcontainer.json":                    "starts",
	"microsoft__vscode-dev-containers__containers__rust__.devcontainer__devcontainer.json":                          "starts",
	"microsoft__vscode-dev-containers__containers__swift__.devcontainer__devcontainer.json":                         "starts",
	"microsoft__vscode-dev-containers__containers__typescript-node__.devcontainer__devcontainer.json":               "starts",
	"microsoft__vscode__.devcontainer__devcontainer.json":                                                           "starts",
	"nodejs__node__.devcontainer__base__devcontainer.json":                                                          "starts",
	"nodejs__node__.devcontainer__devcontainer.json":                                                                "starts",
	"python__cpython__.devcontainer__devcontainer.json":                                                             "starts",
	"python__cpython__.devcontainer__wasi__devcontainer.json":                                                       "starts",
	"pytorch__pytorch__.devcontainer__cuda__devcontainer.json":                                                      "starts",
	"rust-lang__rust__.devcontainer__devcontainer.json":                                                             "starts",
	"withastro__astro__.devcontainer__devcontainer.json":                                                            "starts",
}

// corpusDir finds the corpus, "" when there is none here.
func corpusDir(t *testing.T) string {
	t.Helper()
	cands := []string{os.Getenv("COVE_DEVCONTAINER_CORPUS"), "testdata/corpus", filepath.Join("..", "..", "..", "shared", "devcontainer-corpus")}
	for _, d := range cands {
		if d == "" {
			continue
		}
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			return d
		}
	}
	return ""
}

// corpusFiles are the corpus's configs, by name.
func corpusFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".json") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names
}

// corpusLayout is where a corpus file goes in a project: its path in its
// repository, less what comes before .devcontainer (a template's src/go/
// is the project's root once applied).
func corpusLayout(name string) string {
	parts := strings.SplitN(name, "__", 3)
	rel := strings.ReplaceAll(parts[2], "__", "/")
	if i := strings.Index(rel, ".devcontainer"); i > 0 {
		rel = rel[i:]
	}
	return rel
}

// handledKeys are the top-level keys cove applies, each with how the test
// sees that it was taken (or, read untrusted, held back and said). It is
// the test's own list, not the parser's: a key the parser lets through
// without applying it is found here.
var handledKeys = map[string]func(c *Config, v any) bool{
	"name":          func(*Config, any) bool { return true }, // descriptive
	"$schema":       func(*Config, any) bool { return true },
	"image":         func(c *Config, v any) bool { return c.Image == v },
	"containerEnv":  func(c *Config, v any) bool { return len(c.ContainerEnv) == len(v.(map[string]any)) },
	"remoteEnv":     func(c *Config, v any) bool { return len(c.RemoteEnv) == len(v.(map[string]any)) },
	"containerUser": func(c *Config, v any) bool { return c.ContainerUser == v },
	"remoteUser":    func(c *Config, v any) bool { return c.RemoteUser == v },
	"workspaceFolder": func(c *Config, v any) bool {
		return c.WorkspaceFolder != "" && !strings.Contains(c.WorkspaceFolder, "${")
	},
	"workspaceMount": func(c *Config, v any) bool {
		return c.WorkspaceMount != "" || mentions(c.Untrusted, "workspaceMount")
	},
	"mounts": func(c *Config, v any) bool {
		return len(c.Mounts)+strings.Count(strings.Join(c.Untrusted, "\n"), "mounts:") == len(v.([]any))
	},
	"build":      func(c *Config, v any) bool { ib, err := c.ImageBuild(); return err == nil && ib != nil },
	"dockerFile": func(c *Config, v any) bool { ib, err := c.ImageBuild(); return err == nil && ib != nil },
	"context": func(c *Config, v any) bool {
		if c.DockerFile == "" { // the build section's context is the one
			return mentions(c.Notes, "context")
		}
		ib, err := c.ImageBuild()
		return err == nil && ib != nil && ib.Context == filepath.Clean(filepath.Join(relFolder(c), v.(string)))
	},
	"features": func(c *Config, v any) bool {
		f, err := c.Features()
		return err == nil && len(f) == len(v.(map[string]any))
	},
	"runArgs": func(c *Config, v any) bool {
		return len(c.RunArgs) == len(v.([]any)) || mentions(c.Untrusted, "runArgs")
	},
	"capAdd":      func(c *Config, v any) bool { return len(c.CapAdd) > 0 || mentions(c.Untrusted, "capAdd") },
	"securityOpt": func(c *Config, v any) bool { return len(c.SecurityOpt) > 0 || mentions(c.Untrusted, "securityOpt") },
	"init":        func(c *Config, v any) bool { return c.Init != nil },
	"overrideCommand": func(c *Config, v any) bool {
		return c.OverrideCommand != nil && *c.OverrideCommand == v
	},
	"updateRemoteUserUID": func(c *Config, v any) bool { return c.UpdateRemoteUserUID != nil },
	"forwardPorts": func(c *Config, v any) bool {
		specs, notes, err := c.PortSpecs()
		return err == nil && len(specs)+len(notes) >= len(v.([]any))
	},
	"appPort": func(c *Config, v any) bool { specs, _, err := c.PortSpecs(); return err == nil && len(specs) > 0 },
	"initializeCommand": func(c *Config, v any) bool {
		return len(c.Steps("initializeCommand", nil)) > 0 || mentions(c.Untrusted, "initializeCommand")
	},
	OnCreate:                      func(c *Config, v any) bool { return len(c.Steps(OnCreate, nil)) > 0 },
	UpdateContent:                 func(c *Config, v any) bool { return len(c.Steps(UpdateContent, nil)) > 0 },
	PostCreate:                    func(c *Config, v any) bool { return len(c.Steps(PostCreate, nil)) > 0 },
	PostStart:                     func(c *Config, v any) bool { return len(c.Steps(PostStart, nil)) > 0 },
	PostAttach:                    func(c *Config, v any) bool { return len(c.Steps(PostAttach, nil)) > 0 },
	"overrideFeatureInstallOrder": func(c *Config, v any) bool { return len(c.OverrideFeatureInstallOrder) > 0 },
	// Cove's own are read; the other tools' are named (see accounted).
	"customizations": func(c *Config, v any) bool {
		for k := range v.(map[string]any) {
			if k != "cove" && !mentions(c.Notes, k) {
				return false
			}
		}
		return true
	},
}

// relFolder is the file's folder, relative to the project.
func relFolder(c *Config) string {
	rel, _ := filepath.Rel(c.project, filepath.Dir(c.Path))
	return rel
}

// mentions says whether a line of lines names key.
func mentions(lines []string, key string) bool {
	for _, l := range lines {
		if strings.Contains(l, key) {
			return true
		}
	}
	return false
}

// unaccounted are the top-level keys of tree that the loaded c dropped:
// a key of handled that it did not take (as handled says) or hold back
// for trust, and any other key its notes do not name.
func unaccounted(tree map[string]any, c *Config, handled map[string]func(*Config, any) bool) []string {
	var out []string
	for k, v := range tree {
		took, ok := handled[k]
		switch {
		case ok && v == nil: // null: nothing asked
		case ok:
			// A key cove applies must be applied (or held back, for
			// trust): a note that it was ignored is a key dropped.
			if took(c, v) || mentions(c.Untrusted, k) {
				continue
			}
			out = append(out, k)
		case !mentions(c.Notes, k) && !mentions(c.Untrusted, k):
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// doWords are what a refusal says to do; one of them must be in it.
var doWords = regexp.MustCompile(`\b(remove|use|give|write|name|choose|move|start|replace|apply)\b`)

// bareParse is a parser's own error, which says neither the key in
// terms the user wrote nor what to do.
var bareParse = regexp.MustCompile(`(^|: )json: |invalid character|cannot unmarshal|unexpected end of JSON|hujson`)

// leftVar is a variable still in a value cove applies.
var leftVar = regexp.MustCompile(`\$\{[^}]*\}`)

// loadCorpus loads the config rel of the project dir, with a home of its
// own that trusts it (as cove up --trust does) when trusted.
func loadCorpus(t *testing.T, dir, rel string, trusted bool) (*Config, error) {
	t.Helper()
	home := t.TempDir()
	opts := Options{ConfigPath: rel, Home: home, Getenv: func(k string) string {
		return map[string]string{"HOME": "/home/someone", "USER": "someone"}[k]
	}}
	if trusted {
		if _, _, err := Trust(dir, opts); err != nil {
			return nil, err
		}
	}
	c, err := Load(dir, opts)
	if err == nil && c.Trusted != trusted {
		t.Fatalf("trusted %v, want %v", c.Trusted, trusted)
	}
	return c, err
}

// TestCorpus holds every config of the corpus to the contract: it starts
// with its environment as the spec says, or is refused before anything
// starts with an error that names the file, the key and what to do; and
// nothing in it is dropped without a word.
func TestCorpus(t *testing.T) {
	src := corpusDir(t)
	if src == "" {
		t.Skip("no devcontainer corpus here (COVE_DEVCONTAINER_CORPUS, testdata/corpus or ../shared/devcontainer-corpus)")
	}
	names := corpusFiles(t, src)
	for name := range corpusWant {
		if !slices.Contains(names, name) {
			t.Errorf("%s: in the table, not in the corpus %s", name, src)
		}
	}
	starts, refused := 0, map[string]int{}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(src, name))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, trusted := range []bool{false, true} {
				dir := t.TempDir()
				rel := corpusLayout(name)
				write(t, dir, rel, string(raw))
				outcome := checkCorpusFile(t, dir, rel, raw, trusted)
				got = append(got, outcome)
			}
			if got[0] != got[1] {
				t.Errorf("untrusted: %s, trusted: %s", got[0], got[1])
			}
			want, ok := corpusWant[name]
			if !ok {
				t.Errorf("not in corpusWant; it does: %q", got[1])
			} else if got[1] != want {
				t.Errorf("got %q, want %q", got[1], want)
			}
			if got[1] == "starts" {
				starts++
			} else {
				refused[got[1]]++
			}
		})
	}
	t.Logf("corpus of %d: %d start, refused: %v", len(names), starts, refused)
}

// checkCorpusFile loads the config at rel in the project dir and checks
// every step a start takes; it returns "starts" or "refused: KEY".
func checkCorpusFile(t *testing.T, dir, rel string, raw []byte, trusted bool) string {
	t.Helper()
	who := "untrusted"
	if trusted {
		who = "trusted"
	}
	refused := func(err error, path string, tree map[string]any) string {
		outcome, problems := refusal(err, path, tree)
		for _, p := range problems {
			t.Errorf("%s: %s", who, p)
		}
		return outcome
	}
	std, err := hujson.Standardize(append([]byte(nil), raw...))
	if err != nil {
		t.Fatalf("the corpus file is not JSONC: %v", err)
	}
	var tree map[string]any
	if err := json.Unmarshal(std, &tree); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, rel)
	c, err := loadCorpus(t, dir, rel, trusted)
	if err != nil {
		return refused(err, path, tree)
	}
	if c == nil {
		t.Fatalf("%s: no config found at %s", who, rel)
	}
	// Every other step the start takes works, or is a refusal.
	steps := []func() error{
		func() error { _, err := c.Runtime(); return err },
		func() error { _, err := c.Features(); return err },
		func() error { _, _, err := c.PortSpecs(); return err },
		func() error { _, err := c.ImageBuild(); return err },
		func() error { _, err := c.Kube(); return err },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return refused(err, path, tree)
		}
	}
	feats, _ := c.Features()
	for _, f := range feats {
		if strings.HasPrefix(f.ID, "./") {
			if _, err := c.LocalFeature(f.ID); err != nil {
				return refused(err, path, tree)
			}
		}
	}
	if k := unaccounted(tree, c, handledKeys); len(k) > 0 {
		t.Errorf("%s: dropped (neither applied, held back for trust, nor said): %v (notes: %q)", who, k, c.Notes)
	}
	// What the start applies holds no variable left as written, unless
	// the notes say so.
	base := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/root"}
	md, err := c.MergeMetadata("")
	if err != nil {
		t.Fatalf("%s: MergeMetadata(\"\"): %v", who, err)
	}
	set, _ := md.Env(base)
	applied := append([]string{md.Image, md.WorkspaceFolder, md.WorkspaceMount}, set...)
	for _, m := range md.Mounts {
		applied = append(applied, m.Source, m.Target)
	}
	for _, key := range []string{"initializeCommand", OnCreate, UpdateContent, PostCreate, PostStart, PostAttach} {
		for _, g := range md.Lifecycle(key, set) {
			for _, s := range g {
				if len(s.Argv) == 0 || s.Argv[0] == "" {
					t.Errorf("%s: %s: an empty command: %+v", who, key, s)
				}
				applied = append(applied, s.Argv...)
			}
		}
	}
	if ib, _ := md.ImageBuild(); ib != nil {
		applied = append(applied, ib.Dockerfile, ib.Context)
		for k, v := range ib.Args {
			applied = append(applied, k+"="+v)
		}
	}
	for _, f := range feats {
		for _, v := range f.Options {
			applied = append(applied, v)
		}
	}
	for _, a := range applied {
		for _, ref := range leftVar.FindAllString(a, -1) {
			if !mentions(md.Notes, ref) {
				t.Errorf("%s: %s is left as written in %q, without a note", who, ref, a)
			}
		}
	}
	// ${containerEnv:PATH} is the image's PATH, not lost.
	for _, kv := range set {
		if strings.HasPrefix(kv, "PATH=") && !strings.Contains(kv, "/usr/bin") {
			t.Errorf("%s: %s: the image's PATH is lost", who, kv)
		}
	}
	return "starts"
}

// refusal checks that err is a refusal as the contract has it: it names
// the file, a top-level key of tree, and what to do, and is more than a
// parser's error. It returns "refused: KEYS" (the keys it names) and what
// is wrong with it.
func refusal(err error, path string, tree map[string]any) (outcome string, problems []string) {
	msg := err.Error()
	if !strings.Contains(msg, path) {
		problems = append(problems, fmt.Sprintf("the error does not name the file %s: %s", path, msg))
	}
	var keys []string
	for k := range tree {
		if k == "name" { // a word of every message, and no key to refuse
			continue
		}
		if regexp.MustCompile(`(^|[^A-Za-z])` + regexp.QuoteMeta(k) + `\b`).MatchString(msg) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	if len(keys) == 0 {
		problems = append(problems, "the error names no key of the file: "+msg)
	}
	if bareParse.MatchString(msg) {
		problems = append(problems, "a bare parse error: "+msg)
	}
	if !doWords.MatchString(msg) {
		problems = append(problems, "the error does not say what to do: "+msg)
	}
	return "refused: " + strings.Join(keys, ","), problems
}

// TestCorpusChecksCanFail: the corpus's checks find what they are for. A
// key the test's list does not know, and the notes do not name, is
// dropped without a word; a refusal that is a parser's error, or does
// not say what to do, is not one the contract accepts.
func TestCorpusChecksCanFail(t *testing.T) {
	dir := t.TempDir()
	body := `{"image": "debian:bookworm", "remoteUser": "dev", "runArgs": ["--init"], "portsAttributes": {"3000": {"label": "web"}}}`
	write(t, dir, ".devcontainer/devcontainer.json", body)
	c, err := Load(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var tree map[string]any
	if err := json.Unmarshal([]byte(body), &tree); err != nil {
		t.Fatal(err)
	}
	if got := unaccounted(tree, c, handledKeys); len(got) != 0 {
		t.Fatalf("with the whole list: %v", got)
	}
	less := map[string]func(*Config, any) bool{}
	for k, f := range handledKeys {
		if k != "remoteUser" {
			less[k] = f
		}
	}
	if got := unaccounted(tree, c, less); strings.Join(got, ",") != "remoteUser" {
		t.Errorf("remoteUser off the list: unaccounted %v, want [remoteUser]", got)
	}
	// A key the parser lets through, untaken and unsaid, is found.
	c.Notes = nil
	if got := unaccounted(tree, c, handledKeys); strings.Join(got, ",") != "portsAttributes" {
		t.Errorf("portsAttributes unsaid: unaccounted %v, want [portsAttributes]", got)
	}
	// A key the list has, which the parser did not take, is found too.
	c.RemoteUser = ""
	if got := unaccounted(tree, c, handledKeys); strings.Join(got, ",") != "portsAttributes,remoteUser" {
		t.Errorf("remoteUser not taken: unaccounted %v", got)
	}
	path := filepath.Join(dir, ".devcontainer/devcontainer.json")
	for _, bad := range []error{
		fmt.Errorf("%s: json: cannot unmarshal string into Go struct field Config.runArgs of type []string", path),
		fmt.Errorf("%s: runArgs: not supported", path),
		fmt.Errorf("image: remove it"),
		fmt.Errorf("%s: something is wrong; remove it", path),
	} {
		if _, problems := refusal(bad, path, tree); len(problems) == 0 {
			t.Errorf("accepted as a refusal: %v", bad)
		}
	}
	good := fmt.Errorf("%s: runArgs --privileged: cove does not run privileged workspaces; remove it", path)
	if outcome, problems := refusal(good, path, tree); outcome != "refused: runArgs" || len(problems) > 0 {
		t.Errorf("%v: %s %v", good, outcome, problems)
	}
}
