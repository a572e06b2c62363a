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
}

// metadataApplied are the label's keys cove merges; others are named.
var metadataApplied = map[string]bool{"containerUser": true, "remoteUser": true, "containerEnv": true, "remoteEnv": true,
	"onCreateCommand": true, "updateContentCommand": true, "postCreateCommand": true, "postStartCommand": true,
	"postAttachCommand": true, "id": true, "customizations": true, "updateRemoteUserUID": true}

// MergeMetadata merges the image's devcontainer.metadata label (an array
// of entries, or one) under the file, as the spec does: the users are the
// last one set (the file's over the image's), the environment maps merge
// key by key (the file's winning), and the lifecycle commands of every
// entry run, the image's first. What the label asks for that cove does
// not apply from an image (capAdd, mounts, privileged, an entrypoint…) is
// named in Notes. A nil Config is made for an image without a file.
func (c *Config) MergeMetadata(label string) (*Config, error) {
	if c == nil {
		c = &Config{vars: newVars("", "", false, nil)}
	}
	if strings.TrimSpace(label) == "" {
		return c, nil
	}
	var raws []json.RawMessage
	if err := json.Unmarshal([]byte(label), &raws); err != nil {
		raws = []json.RawMessage{json.RawMessage(label)}
	}
	var entries []metadataEntry
	ignored := map[string]bool{}
	for _, raw := range raws {
		var e metadataEntry
		var keys map[string]json.RawMessage
		if json.Unmarshal(raw, &keys) != nil || json.Unmarshal(raw, &e) != nil {
			return c, fmt.Errorf("the image's %s label: not devcontainer metadata", MetadataLabel)
		}
		for k := range keys {
			if !metadataApplied[k] {
				ignored[k] = true
			}
		}
		entries = append(entries, e)
	}
	containerUser, remoteUser := "", ""
	env, remote := EnvMap{}, EnvMap{}
	for _, e := range entries {
		if e.ContainerUser != "" {
			containerUser = e.ContainerUser
		}
		if e.RemoteUser != "" {
			remoteUser = e.RemoteUser
		}
		for k, v := range e.ContainerEnv {
			env[k] = v
		}
		for k, v := range e.RemoteEnv {
			remote[k] = v
		}
		c.imageCommands = append(c.imageCommands, map[string]*Command{OnCreate: e.OnCreateCommand,
			UpdateContent: e.UpdateContentCommand, PostCreate: e.PostCreateCommand, PostStart: e.PostStartCommand, PostAttach: e.PostAttachCommand})
	}
	if c.ContainerUser == "" {
		c.ContainerUser = containerUser
	}
	if c.RemoteUser == "" {
		c.RemoteUser = remoteUser
	}
	for k, v := range c.ContainerEnv {
		env[k] = v
	}
	for k, v := range c.RemoteEnv {
		remote[k] = v
	}
	c.ContainerEnv, c.RemoteEnv = env, remote
	var names []string
	for k := range ignored {
		names = append(names, k)
	}
	sort.Strings(names)
	if len(names) > 0 {
		c.Notes = append(c.Notes, fmt.Sprintf("the image's %s asks for %s: cove does not apply these from an image", MetadataLabel, strings.Join(names, ", ")))
	}
	return c, nil
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
