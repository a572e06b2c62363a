// Package hostilerepo builds, for tests, a project as a hostile workspace
// leaves it: a real git repository whose .git/config and .gitattributes
// name programs for git to run (fsmonitor, hooks, ssh, pager, external
// diff, filters), each of which would write a canary into a directory
// only the host sees. A host-side route passes when, after it ran, no
// canary exists and its answer still honours the ignore rules.
package hostilerepo

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Repo is a hostile project and the host-only directory its planted
// programs would write to.
type Repo struct {
	Dir      string // the project, a git repository
	Canaries string // host-only: a file here means git ran a planted program
}

// Tree is the project's files (path → contents) before .git is made:
// nested .gitignore files, negations, anchored and directory-only rules,
// ** and .git/info/exclude (which holds "*.key") each decide something.
var Tree = map[string]string{
	".gitignore":            "# comment\n*.log\n!keep.log\n/build/\nvendor/\ndocs/**/*.tmp\n",
	".gitattributes":        "* filter=x diff=x\n",
	"main.go":               "package main // needle\n",
	"app.log":               "needle in an ignored log\n",
	"keep.log":              "needle kept by a negation\n",
	"build/out.go":          "needle in the anchored build/\n",
	"sub/build/x.go":        "needle in sub/build: /build/ is anchored at the top\n",
	"sub/.gitignore":        "local.txt\n!important.log\n",
	"sub/local.txt":         "needle ignored by the nested .gitignore\n",
	"sub/important.log":     "needle re-included by the nested .gitignore\n",
	"sub/vendor/v.go":       "needle in a vendor/ directory\n",
	"lib/vendor":            "needle in a file named vendor (vendor/ is for directories)\n",
	"docs/x.md":             "needle in docs\n",
	"docs/a/b/c.tmp":        "needle in docs/**/*.tmp\n",
	"secret.key":            "needle excluded by .git/info/exclude\n",
	"deep/er/still/here.go": "needle deep down\n",
}

// Want is what `git ls-files --cached --others --exclude-standard` lists
// for Tree, sorted.
var Want = []string{
	".gitattributes", ".gitignore", "deep/er/still/here.go", "docs/x.md", "keep.log", "lib/vendor",
	"main.go", "sub/.gitignore", "sub/build/x.go", "sub/important.log",
}

// Programs are the git settings that run a program, each written into the
// project's .git/config pointing at a script that leaves a canary.
var Programs = []string{
	"core.fsmonitor", "core.hooksPath", "core.sshCommand", "core.pager", "core.editor",
	"diff.external", "diff.x.textconv", "filter.x.clean", "filter.x.smudge", "filter.x.process",
	"pager.ls-files", "alias.ls-files",
}

// hooks are the hooks planted in core.hooksPath.
var hooks = []string{"pre-commit", "post-checkout", "post-index-change", "reference-transaction", "fsmonitor-watchman"}

// New writes Tree into a fresh project, makes it a repository with one
// commit of the files git would add, then plants the programs. As root,
// the project is handed to covetest when that user exists (a root
// launcher on a user's project).
func New(t testing.TB) *Repo {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs git to build the hostile repository")
	}
	r := &Repo{Dir: t.TempDir(), Canaries: t.TempDir()}
	for name, body := range Tree {
		p := filepath.Join(r.Dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r.git(t, "init", "-q", ".")
	if err := os.WriteFile(filepath.Join(r.Dir, ".git/info/exclude"), []byte("*.key\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.git(t, "add", "-A")
	r.git(t, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "init")

	bin := filepath.Join(r.Dir, ".git", "planted")
	if err := os.MkdirAll(filepath.Join(bin, "hooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	plant := func(path, name string) string {
		// cat: a filter or pager that passes its input on still works,
		// so nothing but the canary tells that it ran.
		script := "#!/bin/sh\ntouch '" + filepath.Join(r.Canaries, name) + "'\ncat\n"
		if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, key := range Programs {
		value := plant(filepath.Join(bin, key), key)
		switch key {
		case "core.hooksPath":
			value = filepath.Join(bin, "hooks")
		case "alias.ls-files":
			value = "!" + value
		}
		r.git(t, "config", key, value)
	}
	for _, h := range hooks {
		plant(filepath.Join(bin, "hooks", h), "hook."+h)
	}
	if os.Geteuid() == 0 {
		if out, err := exec.Command("chown", "-R", "covetest:covetest", r.Dir).CombinedOutput(); err != nil {
			t.Logf("the project stays root's (no covetest user?): %v %s", err, out)
		}
	}
	return r
}

func (r *Repo) git(t testing.TB, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = r.Dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v %s", strings.Join(args, " "), err, out)
	}
}

// Ran lists the canaries: the planted programs that ran, sorted.
func (r *Repo) Ran(t testing.TB) []string {
	t.Helper()
	entries, err := os.ReadDir(r.Canaries)
	if err != nil {
		t.Fatal(err)
	}
	var ran []string
	for _, e := range entries {
		ran = append(ran, e.Name())
	}
	slices.Sort(ran)
	return ran
}
