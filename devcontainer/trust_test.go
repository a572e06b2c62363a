package devcontainer

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTrustPinsWhatInitializeCommandRuns: after the user trusts a
// devcontainer.json, the workspace (which writes the project) must not be
// able to change what its initializeCommand runs on the host and keep the
// trust. Forms that name the script other than as a plain word (a cd
// before it, $PWD, a glob, a symlink to /proc/self/cwd/…, a shell string
// inside an array) are refused at the trust, saying what form to use; the
// forms kept are pinned: a change to the script, one created where there
// was none, or a symlink put in its place, is untrusted again. On the
// code before, every refused form was trusted and stayed trusted after
// the workspace rewrote what it ran.
func TestTrustPinsWhatInitializeCommandRuns(t *testing.T) {
	t.Parallel()
	type variant struct {
		name    string
		command string            // the initializeCommand, as JSON
		files   map[string]string // project files at the trust
		links   map[string]string // symlinks at the trust
		refused string            // what the refusal says; "" if trusted
		change  func(dir string)  // what the workspace does after the trust
	}
	rewrite := func(rel string) func(string) {
		return func(dir string) {
			os.WriteFile(filepath.Join(dir, rel), []byte("touch /tmp/planted\n"), 0o644)
		}
	}
	script := map[string]string{".devcontainer/init.sh": "echo trusted\n"}
	variants := []variant{
		{name: "cd then script", command: `"cd .devcontainer && sh init.sh"`, files: map[string]string{".devcontainer/init.sh": "echo trusted\n"}, refused: "shell syntax"},
		{name: "cd then script (semicolon)", command: `"cd .devcontainer; sh init.sh"`, files: script, refused: "shell syntax"},
		{name: "$PWD", command: `"sh $PWD/.devcontainer/b.sh"`, files: map[string]string{".devcontainer/b.sh": "echo trusted\n"}, refused: "shell syntax"},
		{name: "glob", command: `"sh .devcontainer/*.sh"`, files: script, refused: "shell syntax"},
		{name: "quotes", command: `"sh '.devcontainer/init.sh'"`, files: script, refused: "shell syntax"},
		{name: "shell string in an array", command: `["sh", "-c", "cd .devcontainer && sh init.sh"]`, files: script, refused: "shell syntax"},
		{name: "object form", command: `{"a": "sh .devcontainer/init.sh", "b": "sh ~/x.sh"}`, files: script, refused: "shell syntax"},
		{name: "symlink to /proc/self/cwd", command: `"sh .devcontainer/c.sh"`, files: map[string]string{".devcontainer/c-real.sh": "echo trusted\n"},
			links: map[string]string{".devcontainer/c.sh": "/proc/self/cwd/.devcontainer/c-real.sh"}, refused: "symlink"},
		{name: "symlinked directory", command: `"sh d/init.sh"`, files: script, links: map[string]string{"d": ".devcontainer"}, refused: "symlink"},
		{name: "/proc/self/cwd", command: `"sh /proc/self/cwd/.devcontainer/init.sh"`, files: script, refused: "process's view"},
		{name: "/dev/fd", command: `"sh /dev/fd/3"`, files: script, refused: "process's view"},

		{name: "plain word, script rewritten", command: `"sh .devcontainer/init.sh"`, files: script, change: rewrite(".devcontainer/init.sh")},
		{name: "array, script rewritten", command: `["sh", ".devcontainer/init.sh"]`, files: script, change: rewrite(".devcontainer/init.sh")},
		{name: "localWorkspaceFolder, script rewritten", command: `"sh ${localWorkspaceFolder}/.devcontainer/init.sh"`, files: script, change: rewrite(".devcontainer/init.sh")},
		{name: "option=path, script rewritten", command: `"env --file=.devcontainer/init.sh true"`, files: script, change: rewrite(".devcontainer/init.sh")},
		{name: "script absent at the trust, created", command: `"sh .devcontainer/later.sh"`, files: script, change: rewrite(".devcontainer/later.sh")},
		{name: "script replaced by a symlink", command: `"sh .devcontainer/init.sh"`, files: map[string]string{".devcontainer/init.sh": "echo trusted\n", ".devcontainer/other.sh": "echo trusted\n"},
			change: func(dir string) {
				p := filepath.Join(dir, ".devcontainer/init.sh")
				os.Remove(p)
				os.Symlink("/proc/self/cwd/.devcontainer/other.sh", p)
			}},
		{name: "git (reads .git/config)", command: `"git submodule update --init"`, files: script, refused: "takes what it runs"},
		{name: "make behind env", command: `"env FOO=1 make init"`, files: script, refused: "takes what it runs"},
		{name: "docker compose in an array", command: `["docker", "compose", "pull"]`, files: script, refused: "takes what it runs"},
		{name: "npm behind timeout", command: `{"a": "sh .devcontainer/init.sh", "b": "timeout 10 /usr/bin/npm ci"}`, files: script, refused: "takes what it runs"},
		{name: "symlink beside the script", command: `"sh .devcontainer/init.sh"`, files: script, links: map[string]string{".devcontainer/lib.sh": "../lib.sh"}, refused: "is a symlink"},
		{name: "sourced file rewritten", command: `"sh .devcontainer/init.sh"`, files: map[string]string{".devcontainer/init.sh": ". .devcontainer/lib.sh\n", ".devcontainer/lib.sh": "echo trusted\n"},
			change: rewrite(".devcontainer/lib.sh")},
		{name: "file added beside the script", command: `"sh .devcontainer/init.sh"`, files: script, change: rewrite(".devcontainer/new.sh")},
		{name: "named directory, a file in it rewritten", command: `"python3 .devcontainer/setup"`, files: map[string]string{".devcontainer/setup/__main__.py": "import helper\n", ".devcontainer/setup/helper.py": "print('trusted')\n"},
			change: rewrite(".devcontainer/setup/helper.py")},
		{name: "directory where the script was", command: `"sh .devcontainer/init.sh"`, files: script,
			change: func(dir string) {
				p := filepath.Join(dir, ".devcontainer/init.sh")
				os.Remove(p)
				os.Mkdir(p, 0o755)
			}},
	}
	crowded := map[string]string{"tools/init.sh": "echo trusted\n"}
	for i := range maxTreeEntries {
		crowded[fmt.Sprintf("tools/f%d", i)] = ""
	}
	variants = append(variants, variant{name: "script in a crowded directory", command: `"sh tools/init.sh"`, files: crowded, refused: "more than"})
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			dir, home := t.TempDir(), t.TempDir()
			write(t, dir, ".devcontainer/devcontainer.json", `{"image": "debian", "initializeCommand": `+v.command+`}`)
			for rel, body := range v.files {
				write(t, dir, rel, body)
			}
			for rel, target := range v.links {
				if err := os.Symlink(target, filepath.Join(dir, rel)); err != nil {
					t.Fatal(err)
				}
			}
			path, _, err := Trust(dir, Options{Home: home})
			if v.refused != "" {
				if err == nil || !strings.Contains(err.Error(), v.refused) || !strings.Contains(err.Error(), `"initializeCommand": "sh .devcontainer/init.sh"`) {
					t.Fatalf("trust of %s: %v, want a refusal saying %q and the form to use", v.command, err, v.refused)
				}
				// Nor does a record made before (by an older cove) count.
				raw, _ := os.ReadFile(filepath.Join(dir, ".devcontainer/devcontainer.json"))
				rec, _ := json.Marshal(map[string]string{filepath.Join(dir, ".devcontainer/devcontainer.json"): trustKey(dir, filepath.Join(dir, ".devcontainer/devcontainer.json"), raw)})
				os.MkdirAll(filepath.Dir(TrustPath(home)), 0o700)
				os.WriteFile(TrustPath(home), rec, 0o600)
				if Trusted(home, dir, filepath.Join(dir, ".devcontainer/devcontainer.json"), raw) {
					t.Errorf("a record for a form cove refuses is trusted")
				}
				return
			}
			if err != nil {
				t.Fatalf("trust: %v", err)
			}
			raw, _ := os.ReadFile(path)
			if !Trusted(home, dir, path, raw) {
				t.Fatal("not trusted right after the trust")
			}
			v.change(dir)
			if Trusted(home, dir, path, raw) {
				t.Errorf("%s: still trusted after the workspace changed what it runs", v.command)
			}
		})
	}
}
