package devcontainer

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
)

// Mount is an entry of mounts (or workspaceMount): Docker's --mount
// string ("type=bind,source=…,target=…") or the same as an object.
type Mount struct {
	Type     string `json:"type"` // bind, volume or tmpfs
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"readonly"`
	// Options are a tmpfs's, as written (tmpfs-size=64m, tmpfs-mode=1777).
	Options []string `json:"-"`
}

// UnmarshalJSON accepts the string and the object form.
func (m *Mount) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		p, err := ParseMount(s)
		*m = p
		return err
	}
	type plain Mount
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return fmt.Errorf("want a mount string or an object with type, source and target")
	}
	*m = Mount(p)
	if m.Type == "" {
		m.Type = "bind"
	}
	return m.check()
}

// ParseMount reads Docker's --mount syntax.
func ParseMount(s string) (Mount, error) {
	m := Mount{Type: "volume"} // Docker's default
	for _, f := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(f), "=")
		switch strings.ToLower(k) {
		case "type":
			m.Type = v
		case "source", "src":
			m.Source = v
		case "target", "dst", "destination":
			m.Target = v
		case "readonly", "ro":
			m.ReadOnly = v == "" || v == "true" || v == "1"
		case "tmpfs-size", "tmpfs-mode":
			m.Options = append(m.Options, strings.ToLower(k)+"="+v)
		case "consistency", "bind-propagation", "":
		default:
			// Options cove has no use for (volume-driver…) are dropped.
		}
	}
	return m, m.check()
}

func (m Mount) check() error {
	if m.Type != "bind" && m.Type != "volume" && m.Type != "tmpfs" {
		return fmt.Errorf("mount type %q: cove mounts bind, volume and tmpfs", m.Type)
	}
	if !strings.HasPrefix(m.Target, "/") {
		return fmt.Errorf("mount target %q: want an absolute path inside the container", m.Target)
	}
	if m.Type == "bind" && !filepath.IsAbs(m.Source) {
		return fmt.Errorf("bind mount source %q: want an absolute host path", m.Source)
	}
	return nil
}

// InProject says whether a bind mount's source is the project dir or
// beneath it (lexically; the binding resolves it again).
func (m Mount) InProject(dir string) bool {
	rel, err := filepath.Rel(dir, filepath.Clean(m.Source))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}
