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

// The corpus is devcontainer.json files written for this test from the
// specification (containers.dev: the JSON reference, its variables,
// Features, lifecycle scripts, Docker Compose) and what README.md says
// cove does with each key: one file for each thing real projects write
// (comments, trailing commas, variables, every form of a key), the keys
// cove refuses, and hostile ones (paths out of the project, host paths,
// the host's secrets). None is copied from a project. A file NAME.json is
// the project's .devcontainer/devcontainer.json; NAME__PATH-WITH-__ is at
// PATH (root-dotfile__.devcontainer.json is .devcontainer.json). The test
// reads them from testdata/corpus, or from COVE_DEVCONTAINER_CORPUS (a
// larger corpus tried locally, named the same way).

// corpusWant is what cove does with each file of the corpus: "starts"
// (with a local image in place of the registry's), or "refused: KEY"
// (before anything starts, the error naming KEY and what to do). A change
// of behaviour is a failure here, and so is a file of the corpus not in
// the table or a line of the table with no file. "starts" is the file's
// part: a Feature's own metadata is read when it is fetched (the
// docker-in-docker Feature asks for a privileged container, which
// devcontainer/devimage refuses then, before anything starts), and an image
// that is a file on this host, named by an untrusted file, stops the start
// at CheckImage (the trusted read starts it).
var corpusWant = map[string]string{
	"app-port-list.json":                                             "starts",
	"build-args-from-host-env.json":                                  "starts",
	"build-dockerfile-beside.json":                                   "starts",
	"build-dockerfile-context-args-target.json":                      "starts",
	"build-options-and-cachefrom.json":                               "starts",
	"build-without-dockerfile.json":                                  "refused: build", // a build section with no dockerfile
	"capadd-and-securityopt.json":                                    "starts",
	"compose-several-files-run-services.json":                        "starts", // Docker Compose: the services beside the workspace (workspace/compose)
	"compose-single-file.json":                                       "starts",
	"customizations-cove-kube-true.json":                             "starts",
	"customizations-cove-kube.json":                                  "starts",
	"customizations-cove-not-object.json":                            "refused: customizations", // customizations.cove is not an object
	"customizations-vscode.json":                                     "starts",
	"env-container-and-remote.json":                                  "starts",
	"env-from-host.json":                                             "starts",
	"features-install-order.json":                                    "starts",
	"features-legacy-short-names.json":                               "starts",
	"features-local-folder.json":                                     "starts",
	"features-local-parent-folder.json":                              "starts",
	"features-numeric-options.json":                                  "starts",
	"features-tarball-url.json":                                      "starts",
	"host-requirements-and-editor-keys.json":                         "starts",
	"capadd-all.json":                                                "refused: capAdd",                     // capability ALL: a privileged workspace, trusted or not
	"securityopt-profile-file.json":                                  "refused: securityOpt",                // a seccomp profile file: cove's filter is Docker's default
	"hostile-build-absolute-dockerfile.json":                         "refused: build",                      // a Dockerfile outside the project
	"hostile-build-context-outside-project.json":                     "refused: build",                      // a build context outside the project
	"hostile-build-dockerfile-outside-project.json":                  "refused: build",                      // a Dockerfile outside the project
	"hostile-env-copies-host-secrets.json":                           "starts",                              // ${localEnv:…} empty until trusted
	"hostile-image-host-archive.json":                                "starts",                              // trusted; untrusted, CheckImage stops the start
	"hostile-initialize-command-exfiltrates.json":                    "starts | refused: initializeCommand", // held back untrusted; trusted, shell syntax cannot be pinned
	"hostile-mounts-host-paths.json":                                 "starts",                              // the binds held back until trusted
	"hostile-workspace-mount-host-dir.json":                          "starts",                              // the bind held back until trusted
	"image-only.json":                                                "starts",
	"image-with-features.json":                                       "starts",
	"image-with-schema-and-user.json":                                "starts",
	"initialize-command-array-and-object.json":                       "starts | refused: initializeCommand", // ${…} in the commands: trust cannot pin what they run
	"initialize-command-script.json":                                 "starts",
	"legacy-dockerfile-top-level-context.json":                       "starts",
	"lifecycle-array-forms.json":                                     "starts",
	"lifecycle-container-variables.json":                             "starts",
	"lifecycle-null-left-from-template.json":                         "starts",
	"lifecycle-object-forms.json":                                    "starts",
	"lifecycle-string-forms.json":                                    "starts",
	"lifecycle-wrong-type.json":                                      "refused: postCreateCommand", // a number, not a command
	"mount-unsupported-type.json":                                    "refused: mounts",            // a Windows named pipe
	"mounts-object-forms.json":                                       "starts",
	"mounts-string-forms.json":                                       "starts",
	"named-config-subfolder__.devcontainer__docs__devcontainer.json": "starts",
	"override-command-false.json":                                    "starts",
	"ports-compose-style-host.json":                                  "starts",
	"ports-forward-and-attributes.json":                              "starts",
	"privileged-false.json":                                          "starts",
	"privileged-key.json":                                            "refused: privileged",
	"root-dotfile__.devcontainer.json":                               "starts",
	"runargs-inside-the-workspace.json":                              "starts",
	"runargs-privileged.json":                                        "refused: runArgs", // --privileged
	"runargs-reaching-outside.json":                                  "starts",
	"runargs-unsupported-flags.json":                                 "starts",
	"template-option-in-feature.json":                                "refused: features", // a Template's source: ${templateOption:…} in a Feature's options
	"template-option-in-image.json":                                  "refused: image",    // a Template's source: ${templateOption:…} in the image
	"unknown-keys.json":                                              "starts",
	"unknown-variable-left-as-written.json":                          "starts",
	"users-and-uid-update.json":                                      "starts",
	"workspace-mount-and-folder.json":                                "starts",
	"workspace-mount-tmpfs.json":                                     "refused: workspaceMount", // a tmpfs where the project goes
	"workspace-mount-volume.json":                                    "starts",
}

// corpusDir is the corpus: COVE_DEVCONTAINER_CORPUS, else the one in
// testdata. A missing corpus fails the test (corpusFiles), never skips it.
func corpusDir() string {
	if d := os.Getenv("COVE_DEVCONTAINER_CORPUS"); d != "" {
		return d
	}
	return filepath.Join("testdata", "corpus")
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

// corpusLayout is where a corpus file goes in a project: NAME.json is
// .devcontainer/devcontainer.json, NAME__PATH-WITH-__ is PATH.
func corpusLayout(name string) string {
	_, rest, ok := strings.Cut(name, "__")
	if !ok {
		return filepath.Join(".devcontainer", "devcontainer.json")
	}
	return filepath.FromSlash(strings.ReplaceAll(rest, "__", "/"))
}

// handledKeys are the top-level keys cove applies, each with how the test
// sees that it was taken (or, read untrusted, held back and said). It is
// the test's own list, not the parser's: a key the parser lets through
// without applying it is found here.
var handledKeys = map[string]func(c *Config, v any) bool{
	"name":              func(*Config, any) bool { return true }, // descriptive
	"$schema":           func(*Config, any) bool { return true },
	"image":             func(c *Config, v any) bool { return c.Image == v },
	"dockerComposeFile": func(c *Config, v any) bool { return len(c.ComposeFiles()) == len(stringList(v)) },
	"service":           func(c *Config, v any) bool { return c.Service == v },
	"runServices":       func(c *Config, v any) bool { return len(c.RunServices) == len(v.([]any)) },
	"shutdownAction":    func(c *Config, v any) bool { return c.ShutdownAction == v },
	"containerEnv":      func(c *Config, v any) bool { return len(c.ContainerEnv) == len(v.(map[string]any)) },
	"remoteEnv":         func(c *Config, v any) bool { return len(c.RemoteEnv) == len(v.(map[string]any)) },
	"containerUser":     func(c *Config, v any) bool { return c.ContainerUser == v },
	"remoteUser":        func(c *Config, v any) bool { return c.RemoteUser == v },
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
	// true is refused before this (refuse); false is what cove does.
	"privileged": func(c *Config, v any) bool { return c.Privileged != nil && !*c.Privileged },
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
	src := corpusDir()
	names := corpusFiles(t, src)
	if len(names) == 0 {
		t.Fatalf("no devcontainer.json files in the corpus %s", src)
	}
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
			// "UNTRUSTED | TRUSTED" where the two differ: a key that
			// trust would have to run and cannot pin (initializeCommand
			// in shell syntax) is refused only when trust is asked.
			want, ok := corpusWant[name]
			wantUntrusted, wantTrusted, split := strings.Cut(want, " | ")
			if !split {
				wantUntrusted, wantTrusted = want, want
			}
			if !ok {
				t.Errorf("not in corpusWant; it does: %q, trusted %q", got[0], got[1])
			} else if got[0] != wantUntrusted || got[1] != wantTrusted {
				t.Errorf("untrusted: %q, trusted: %q; want %q", got[0], got[1], want)
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
		// As devcontainer/devimage reads them: ./NAME and ../NAME are the
		// project's.
		if strings.HasPrefix(f.ID, "./") || strings.HasPrefix(f.ID, "../") {
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
	// The keys are looked for in what the error says besides the file's
	// path (a folder's name could hold a key's).
	said := strings.ReplaceAll(msg, path, "")
	var keys []string
	for k := range tree {
		if k == "name" { // a word of every message, and no key to refuse
			continue
		}
		if regexp.MustCompile(`(^|[^A-Za-z])` + regexp.QuoteMeta(k) + `\b`).MatchString(said) {
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
