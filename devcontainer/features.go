package devcontainer

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Feature is one entry of the file's features: the Feature's reference as
// written (an OCI reference, or ./NAME beside the file) and the options
// given to it, as the text its install.sh sees.
type Feature struct {
	ID      string
	Options map[string]string
}

// FeatureOptions reads a Feature's value in devcontainer.json (or in a
// Feature's dependsOn): an object of options (strings, booleans, numbers),
// or a string, the spec's shorthand for its version option.
func FeatureOptions(v any) (map[string]string, error) {
	opts := map[string]string{}
	switch v := v.(type) {
	case nil:
	case string:
		opts["version"] = v
	case bool:
		// true: the Feature with its defaults (older files write that).
		if !v {
			return nil, fmt.Errorf("false: remove the Feature instead")
		}
	case map[string]any:
		for k, o := range v {
			switch o := o.(type) {
			case string:
				opts[k] = o
			case bool:
				opts[k] = strconv.FormatBool(o)
			case float64:
				opts[k] = strconv.FormatFloat(o, 'f', -1, 64)
			case nil:
			default:
				return nil, fmt.Errorf("option %s: want a string or a boolean", k)
			}
		}
	default:
		return nil, fmt.Errorf("want an object of options or a version string")
	}
	return opts, nil
}

// Features are the Features the file asks for, by reference.
func (c *Config) Features() ([]Feature, error) {
	if c == nil {
		return nil, nil
	}
	var ids []string
	for id := range c.FeatureMap {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var out []Feature
	for _, id := range ids {
		opts, err := FeatureOptions(c.FeatureMap[id])
		if err != nil {
			return nil, fmt.Errorf("%s: features: %s: %w", c.Path, id, err)
		}
		out = append(out, Feature{ID: id, Options: opts})
	}
	return out, nil
}

// LocalFeature says where a local Feature (./NAME, relative to the file's
// folder) is, relative to the project; it must stay in the project.
func (c *Config) LocalFeature(id string) (string, error) {
	folder, err := filepath.Rel(c.project, filepath.Dir(c.Path))
	if err != nil {
		return "", err
	}
	rel := filepath.Clean(filepath.Join(folder, id))
	if !filepath.IsLocal(rel) {
		return "", fmt.Errorf("%s: features: %s is outside the project: cove reads local Features from the project only", c.Path, id)
	}
	return rel, nil
}

// Project is the project directory the file belongs to.
func (c *Config) Project() string { return c.project }

// AppendMetadata adds entries (each one JSON object, as a Feature
// contributes them) to an image's devcontainer.metadata label (an array,
// one object or ""), for MergeMetadata: the image's first, then the
// Features' in their install order.
func AppendMetadata(label string, entries ...json.RawMessage) string {
	var all []json.RawMessage
	if strings.TrimSpace(label) != "" {
		if err := json.Unmarshal([]byte(label), &all); err != nil {
			all = []json.RawMessage{json.RawMessage(label)}
		}
	}
	all = append(all, entries...)
	if len(all) == 0 {
		return ""
	}
	b, _ := json.Marshal(all)
	return string(b)
}

// MetadataUsers are the users an image's devcontainer.metadata label
// names (the last one set of each), for the Features' _CONTAINER_USER and
// _REMOTE_USER before the workspace starts.
func MetadataUsers(label string) (containerUser, remoteUser string) {
	var entries []metadataEntry
	if json.Unmarshal([]byte(label), &entries) != nil {
		var one metadataEntry
		if json.Unmarshal([]byte(label), &one) != nil {
			return "", ""
		}
		entries = []metadataEntry{one}
	}
	for _, e := range entries {
		if e.ContainerUser != "" {
			containerUser = e.ContainerUser
		}
		if e.RemoteUser != "" {
			remoteUser = e.RemoteUser
		}
	}
	return containerUser, remoteUser
}
