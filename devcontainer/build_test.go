package devcontainer

import (
	"strings"
	"testing"
)

// TestImageBuildForms: the older dockerFile takes the build section's
// other keys and a top-level context over build.context; a top-level
// context is noted as ignored beside a build section, or with no
// Dockerfile at all; options take --target and --pull, a value after =
// or as the next word, and a trailing flag with no value is left alone.
func TestImageBuildForms(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		body, want, note string
	}{
		{`{"dockerFile": "Dockerfile", "context": "..", "build": {"context": "x", "target": "t", "args": {"A": "1"}}}`,
			"Dockerfile=.devcontainer/Dockerfile Context=. Target=t Args=map[A:1] NoCache=false Pull=false", ""},
		{`{"build": {"dockerfile": "Dockerfile"}, "context": ".."}`,
			"Dockerfile=.devcontainer/Dockerfile Context=.devcontainer Target= Args=map[] NoCache=false Pull=false",
			"context is the build context of the older dockerFile"},
		{`{"image": "x", "context": ".."}`, "<nil>", "context is the build context of dockerFile, which this file does not name"},
		{`{"build": {"dockerfile": "Dockerfile", "options": ["--target", "dev", "--pull", "--build-arg=K=v=w", "--build-arg"]}}`,
			"Dockerfile=.devcontainer/Dockerfile Context=.devcontainer Target=dev Args=map[K:v=w] NoCache=false Pull=true", ""},
	} {
		write(t, dir, ".devcontainer/devcontainer.json", tc.body)
		c, err := Load(dir, Options{})
		if err != nil {
			t.Fatalf("%s: %v", tc.body, err)
		}
		b, notes, err := c.imageBuild()
		got := "<nil>"
		if b != nil {
			got = "Dockerfile=" + b.Dockerfile + " Context=" + b.Context + " Target=" + b.Target + " Args=" + fmtMap(b.Args) +
				" NoCache=" + fmtBool(b.NoCache) + " Pull=" + fmtBool(b.Pull)
		}
		if err != nil || got != tc.want {
			t.Errorf("%s:\n got %s (%v)\nwant %s", tc.body, got, err, tc.want)
		}
		if all := strings.Join(notes, "\n"); tc.note != "" && !strings.Contains(all, tc.note) || tc.note == "" && all != "" {
			t.Errorf("%s: notes %q, want %q", tc.body, all, tc.note)
		}
	}
}

func fmtBool(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func fmtMap(m map[string]string) string {
	var kv []string
	for k, v := range m {
		kv = append(kv, k+":"+v)
	}
	return "map[" + strings.Join(kv, " ") + "]"
}
