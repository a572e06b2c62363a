package devcontainer

import (
	"strings"
	"testing"
)

// TestMergeMetadataOrder: the label's entries merge in order under the
// file: the last user set, the file's over them; the environment key by
// key, the file's winning; every entry's lifecycle commands kept, in
// order; an untrusted file's bind mount held back and said; the keys cove
// does not apply named, sorted; a single entry (no array) read as one; a
// label that is not metadata refused; no file (nil) a Config of its own.
func TestMergeMetadataOrder(t *testing.T) {
	dir, home := t.TempDir(), t.TempDir()
	write(t, dir, ".devcontainer.json", `{"image": "x", "containerUser": "fileuser", "containerEnv": {"A": "file"}}`)
	c, err := Load(dir, Options{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	c, err = c.MergeMetadata(`[{"containerUser": "u1", "remoteUser": "r1", "containerEnv": {"A": "img", "B": "img"}, "remoteEnv": {"R": "1"}, "postCreateCommand": "one"},
		{"id": "feat", "remoteUser": "r2", "containerEnv": {"B": "feat"}, "postCreateCommand": "two", "onCreateCommand": "first",
		 "mounts": [{"source": "/host", "target": "/x", "type": "bind"}, {"source": "vol", "target": "/v", "type": "volume"}],
		 "zeta": 1, "hostRequirements": {"cpus": 2}}]`)
	if err != nil {
		t.Fatal(err)
	}
	if c.ContainerUser != "fileuser" || c.RemoteUser != "r2" {
		t.Errorf("users %q %q, want the file's and the last entry's", c.ContainerUser, c.RemoteUser)
	}
	if val(c.ContainerEnv["A"]) != "file" || val(c.ContainerEnv["B"]) != "feat" || val(c.RemoteEnv["R"]) != "1" {
		t.Errorf("env %v remote %v", c.ContainerEnv, c.RemoteEnv)
	}
	if len(c.imageCommands) != 2 || c.imageCommands[0][PostCreate] == nil || c.imageCommands[1][PostCreate] == nil ||
		c.imageCommands[0][OnCreate] != nil || c.imageCommands[1][OnCreate] == nil {
		t.Errorf("image commands %+v", c.imageCommands)
	}
	if len(c.Mounts) != 1 || c.Mounts[0].Source != "vol" {
		t.Errorf("mounts %+v, want the volume only", c.Mounts)
	}
	notes := strings.Join(c.Notes, "\n")
	for _, n := range []string{"the Feature feat asks for the bind mount of /host: not applied, as the file is not trusted",
		"the image's devcontainer.metadata asks for hostRequirements, zeta: cove does not apply these"} {
		if !strings.Contains(notes, n) {
			t.Errorf("notes lack %q:\n%s", n, notes)
		}
	}

	var none *Config
	one, err := none.MergeMetadata(`{"remoteUser": "solo", "containerEnv": {"K": "v"}}`)
	if err != nil || one.RemoteUser != "solo" || val(one.ContainerEnv["K"]) != "v" {
		t.Errorf("a single entry: %+v %v", one, err)
	}
	if _, err := none.MergeMetadata(`"a string"`); err == nil || !strings.Contains(err.Error(), "not devcontainer metadata") {
		t.Errorf("a string label: %v", err)
	}
}

func val(p *string) string {
	if p == nil {
		return "<unset>"
	}
	return *p
}
