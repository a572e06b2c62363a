package devcontainer

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// MetadataLabel is the image label where images made for dev containers
// (and Features) record their part of the configuration.
const MetadataLabel = "devcontainer.metadata"

// metadataEntry is what cove takes from one entry of the label.
type metadataEntry struct {
	ContainerUser        string   `json:"containerUser"`
	RemoteUser           string   `json:"remoteUser"`
	ContainerEnv         EnvMap   `json:"containerEnv"`
	RemoteEnv            EnvMap   `json:"remoteEnv"`
	OnCreateCommand      *Command `json:"onCreateCommand"`
	UpdateContentCommand *Command `json:"updateContentCommand"`
	PostCreateCommand    *Command `json:"postCreateCommand"`
	PostStartCommand     *Command `json:"postStartCommand"`
	PostAttachCommand    *Command `json:"postAttachCommand"`
	CapAdd               []string `json:"capAdd"`
	SecurityOpt          []string `json:"securityOpt"`
	Mounts               []Mount  `json:"mounts"`
	Entrypoint           string   `json:"entrypoint"`
	Privileged           bool     `json:"privileged"`
	ID                   string   `json:"id"`
}

// metadataApplied are the label's keys cove merges; others are named.
var metadataApplied = map[string]bool{"containerUser": true, "remoteUser": true, "containerEnv": true, "remoteEnv": true,
	"onCreateCommand": true, "updateContentCommand": true, "postCreateCommand": true, "postStartCommand": true,
	"postAttachCommand": true, "id": true, "customizations": true, "updateRemoteUserUID": true,
	"capAdd": true, "securityOpt": true, "mounts": true, "entrypoint": true, "init": true, "privileged": true}

// MergeMetadata merges the image's devcontainer.metadata label (an array
// of entries, or one; the Features' entries after the image's) under the
// file, as the spec does: the users are the last one set (the file's over
// the image's), the environment maps merge key by key (the file's
// winning), the lifecycle commands of every entry run, the image's first,
// capAdd and securityOpt add up (see Runtime), mounts join the file's,
// and entrypoints run in order before the server. What would reach
// outside the workspace (capabilities, security options, a bind of a
// host path) applies only when the file is trusted, as the file's own
// do: the project chose the image and the Features. A privileged entry
// is an error. A nil Config is made for an image without a file.
func (c *Config) MergeMetadata(label string) (*Config, error) {
	if c == nil {
		c = &Config{vars: newVars("", "", false, nil)}
	}
	if strings.TrimSpace(label) == "" {
		return c, nil
	}
	// The spec's variables (${devcontainerId} in a Feature's volume name,
	// ${containerWorkspaceFolder}) as in the file, but never the host's
	// environment: the user trusted the file, not the image or Features it
	// names, whose content may change under the same name.
	mv := *c.vars
	mv.trusted, mv.getenv, mv.heldEnv, mv.notes = false, func(string) string { return "" }, nil, nil
	entries, ignored, err := parseMetadata(label, &mv)
	if err != nil {
		return c, err
	}
	m := metadataMerge{env: EnvMap{}, remote: EnvMap{}}
	for _, e := range entries {
		m.add(e)
		if err := c.applyEntry(e); err != nil {
			return c, err
		}
	}
	c.mergeUnder(m)
	if len(mv.heldEnv) > 0 {
		c.Notes = append(c.Notes, fmt.Sprintf("the image's %s reads the host's environment (%s): not from an image or a Feature; left empty or its default", MetadataLabel, strings.Join(mv.heldEnv, ", ")))
	}
	if len(ignored) > 0 {
		c.Notes = append(c.Notes, fmt.Sprintf("the image's %s asks for %s: cove does not apply these from an image", MetadataLabel, strings.Join(ignored, ", ")))
	}
	return c, nil
}

// parseMetadata reads the label's entries (an array, or one), their
// variables substituted by mv, and names (sorted) the keys cove does not
// apply from an image.
func parseMetadata(label string, mv *vars) ([]metadataEntry, []string, error) {
	var raws []json.RawMessage
	if err := json.Unmarshal([]byte(label), &raws); err != nil {
		raws = []json.RawMessage{json.RawMessage(label)}
	}
	var entries []metadataEntry
	ignored := map[string]bool{}
	for i, raw := range raws {
		var tree any
		if json.Unmarshal(raw, &tree) == nil {
			raw, _ = json.Marshal(mv.walk(tree, fmt.Sprintf("%s[%d]", MetadataLabel, i)))
		}
		var e metadataEntry
		var keys map[string]json.RawMessage
		if json.Unmarshal(raw, &keys) != nil || json.Unmarshal(raw, &e) != nil {
			return nil, nil, fmt.Errorf("the image's %s label: not devcontainer metadata", MetadataLabel)
		}
		for k := range keys {
			if !metadataApplied[k] {
				ignored[k] = true
			}
		}
		entries = append(entries, e)
	}
	var names []string
	for k := range ignored {
		names = append(names, k)
	}
	sort.Strings(names)
	return entries, names, nil
}

// metadataMerge is what the entries say, in order, of the users and the
// environment: the last user set, the maps merged key by key.
type metadataMerge struct {
	containerUser, remoteUser string
	env, remote               EnvMap
}

func (m *metadataMerge) add(e metadataEntry) {
	if e.ContainerUser != "" {
		m.containerUser = e.ContainerUser
	}
	if e.RemoteUser != "" {
		m.remoteUser = e.RemoteUser
	}
	for k, v := range e.ContainerEnv {
		m.env[k] = v
	}
	for k, v := range e.RemoteEnv {
		m.remote[k] = v
	}
}

// mergeUnder puts the entries' users and environment under the file's:
// the file's users where it sets them, its variables over theirs.
func (c *Config) mergeUnder(m metadataMerge) {
	if c.ContainerUser == "" {
		c.ContainerUser = m.containerUser
	}
	if c.RemoteUser == "" {
		c.RemoteUser = m.remoteUser
	}
	for k, v := range c.ContainerEnv {
		m.env[k] = v
	}
	for k, v := range c.RemoteEnv {
		m.remote[k] = v
	}
	c.ContainerEnv, c.RemoteEnv = m.env, m.remote
}

// applyEntry takes an entry's entrypoint, lifecycle commands and mounts,
// and, when the file is trusted, its capabilities and security options
// and bind mounts (else a note says they were held back). A privileged
// entry is an error.
func (c *Config) applyEntry(e metadataEntry) error {
	if e.Privileged {
		who, do := "the image", "use an image that does not ask for it (cove up --image REF, or another image in devcontainer.json)"
		if e.ID != "" {
			who, do = "the Feature "+e.ID, "remove the Feature from features, or install what it installs another way"
		}
		return fmt.Errorf("%s asks for a privileged workspace (in %s); cove does not run one: every capability and device of the host, and no filter; %s", who, MetadataLabel, do)
	}
	if e.Entrypoint != "" {
		c.metaEntrypoints = append(c.metaEntrypoints, e.Entrypoint)
	}
	var held []string
	if c.Trusted {
		c.metaCapAdd = append(c.metaCapAdd, e.CapAdd...)
		c.metaSecurityOpt = append(c.metaSecurityOpt, e.SecurityOpt...)
	} else {
		if len(e.CapAdd) > 0 {
			held = append(held, "capAdd "+strings.Join(e.CapAdd, ", "))
		}
		if len(e.SecurityOpt) > 0 {
			held = append(held, "securityOpt "+strings.Join(e.SecurityOpt, ", "))
		}
	}
	for _, m := range e.Mounts {
		if m.Type == "bind" && !c.Trusted {
			held = append(held, "the bind mount of "+m.Source)
			continue
		}
		c.Mounts = append(c.Mounts, m)
	}
	if len(held) > 0 {
		who := "the image's " + MetadataLabel
		if e.ID != "" {
			who = "the Feature " + e.ID
		}
		c.Notes = append(c.Notes, fmt.Sprintf("%s asks for %s: not applied, as the file is not trusted (cove up --trust)", who, strings.Join(held, "; ")))
	}
	c.imageCommands = append(c.imageCommands, map[string]*Command{OnCreate: e.OnCreateCommand,
		UpdateContent: e.UpdateContentCommand, PostCreate: e.PostCreateCommand, PostStart: e.PostStartCommand, PostAttach: e.PostAttachCommand})
	return nil
}

// User is the workspace's user: remoteUser, else containerUser (the
// file's over the image's metadata); "" leaves the image's USER.
func (c *Config) User() string {
	if c == nil {
		return ""
	}
	if c.RemoteUser != "" {
		return c.RemoteUser
	}
	return c.ContainerUser
}
