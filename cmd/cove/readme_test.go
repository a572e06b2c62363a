package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// readmeCommands returns the cove command lines in the sh blocks of
// README.md and the docs beside it.
func readmeCommands(t *testing.T) [][]string {
	t.Helper()
	docs, _ := filepath.Glob("../../docs/*.md")
	var b []byte
	for _, f := range append([]string{"../../README.md"}, docs...) {
		d, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b = append(append(b, d...), '\n')
	}
	var out [][]string
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "```sh"):
			in = true
			continue
		case strings.HasPrefix(line, "```"):
			in = false
			continue
		}
		if !in {
			continue
		}
		line, _, _ = strings.Cut(line, " #")
		for _, part := range regexp.MustCompile(`&&|\|`).Split(line, -1) {
			f := strings.Fields(strings.TrimSpace(part))
			for len(f) > 0 && strings.Contains(f[0], "=") { // VAR=value cove …
				f = f[1:]
			}
			if len(f) > 0 && f[0] == "cove" {
				out = append(out, f[1:])
			}
		}
	}
	return out
}

// TestReadmeCommandsExist checks every cove command line of the README
// against the CLI: the command exists and so does every flag it uses. The
// ones that run offline and change nothing are run. (The install line is
// run end to end by scripts/installtest, through a loopback server.)
func TestReadmeCommandsExist(t *testing.T) {
	t.Parallel()
	app := newApp(nil, nil)
	lines := readmeCommands(t)
	if len(lines) < 15 {
		t.Fatalf("found only %d cove commands in README.md", len(lines))
	}
	flagNames := func(flags []cli.Flag) map[string]bool {
		m := map[string]bool{}
		for _, f := range flags {
			for _, n := range f.Names() {
				m[n] = true
			}
		}
		return m
	}
	global := flagNames(app.Flags)
	root := t.TempDir()
	for _, args := range lines {
		var cmd *cli.Command
		flags := global
		if len(args) > 0 && !strings.HasPrefix(args[0], "-") && !strings.HasPrefix(args[0], "[") {
			if cmd = app.Command(args[0]); cmd == nil {
				continue // cove DIR: the default command
			}
			flags = flagNames(cmd.Flags)
		}
		for _, a := range args {
			for _, opt := range regexp.MustCompile(`^\[?(--?[a-z][a-z0-9-]*)`).FindAllStringSubmatch(a, -1) {
				names := []string{strings.TrimLeft(opt[1], "-")}
				if !strings.HasPrefix(opt[1], "--") && len(names[0]) > 1 {
					names = strings.Split(names[0], "") // -it is -i -t
				}
				for _, name := range names {
					if !flags[name] && !global[name] {
						t.Errorf("README: cove %s: no flag %s", strings.Join(args, " "), opt[1])
					}
				}
			}
		}
		if cmd != nil && len(args) == 1 || cmd != nil && (cmd.Name == "images" || cmd.Name == "ps") && !strings.Contains(strings.Join(args, " "), "[") {
			switch cmd.Name {
			case "doctor", "version", "images", "ps":
				if r := cove(t, root, args...); r.code != 0 {
					t.Errorf("README: cove %s: %+v", strings.Join(args, " "), r)
				}
			}
		}
	}
}
