package devimage

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFeatureContext: the build context and Dockerfile that install the
// Features, without building: each Feature's files staged with its
// options, the users and the install wrapper; its containerEnv (sorted,
// quoted) before its COPY and RUN; the base's USER set again at the end;
// a containerEnv cove cannot set refused; and the metadata entry holding
// only the keys that go into the merged metadata.
func TestFeatureContext(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	src := filepath.Join(tmp, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(src, "install.sh"), []byte("echo hi\n"), 0o755)
	f := &feature{id: "ghcr.io/x/features/go:1", bare: "ghcr.io/x/features/go", dir: src,
		options: map[string]string{"version": "1.22"},
		meta:    featureMeta{ID: "go", ContainerEnv: map[string]string{"PATH": "/usr/local/go/bin:${PATH}", "Q": `a"b\c`}},
		raw: map[string]json.RawMessage{"id": json.RawMessage(`"go"`), "capAdd": json.RawMessage(`["SYS_PTRACE"]`),
			"options": json.RawMessage(`{}`)}}
	fc := &featureContext{dir: filepath.Join(tmp, "context"), containerUser: "root", remoteUser: "dev", imageUser: "dev"}
	fc.df.WriteString("FROM base\nUSER root\n")
	if err := fc.add(0, f); err != nil {
		t.Fatal(err)
	}
	dockerfile, err := fc.finish(tmp)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(dockerfile)
	want := "FROM base\nUSER root\n" +
		"ENV PATH=\"/usr/local/go/bin:${PATH}\"\nENV Q=\"a\\\"b\\\\c\"\n" +
		"COPY 0-go /tmp/cove-features/0-go/\n" +
		"RUN cd /tmp/cove-features/0-go && sh ./cove-feature-install.sh && cd / && rm -rf /tmp/cove-features/0-go\n" +
		"USER dev\n"
	if string(got) != want {
		t.Errorf("Dockerfile\n%s\nwant\n%s", got, want)
	}
	staged := filepath.Join(fc.dir, "0-go")
	for name, want := range map[string]string{
		"install.sh":                        "echo hi\n",
		"devcontainer-features.env":         envLine("VERSION", "1.22"),
		"devcontainer-features.builtin.env": envLine("_CONTAINER_USER", "root") + envLine("_REMOTE_USER", "dev"),
		"cove-feature-install.sh":           installWrapper,
	} {
		if b, err := os.ReadFile(filepath.Join(staged, name)); err != nil || string(b) != want {
			t.Errorf("%s: %q %v, want %q", name, b, err, want)
		}
	}
	if m := string(featureMetadata(f)); m != `{"capAdd":["SYS_PTRACE"],"id":"go"}` {
		t.Errorf("metadata entry %s", m)
	}

	// A root image's USER is not set again; a containerEnv name the
	// shell could not take is refused.
	fc = &featureContext{dir: filepath.Join(tmp, "context2"), imageUser: "0"}
	bad := *f
	bad.meta.ContainerEnv = map[string]string{"A B": "x"}
	if err := fc.add(1, &bad); err == nil || !strings.Contains(err.Error(), `containerEnv "A B": not a variable cove can set`) {
		t.Errorf("containerEnv \"A B\": %v", err)
	}
	if dockerfile, err := fc.finish(filepath.Join(tmp, "context2")); err != nil {
		t.Fatal(err)
	} else if b, _ := os.ReadFile(dockerfile); strings.Contains(string(b), "USER") {
		t.Errorf("USER set again for a root image: %q", b)
	}
}
