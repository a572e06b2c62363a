package devcontainer

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Command is a lifecycle command in one of the spec's three forms: a
// string (run by /bin/sh -c), an array (an argv, no shell), or an object
// of named commands of either kind, run in parallel.
type Command struct {
	Shell    string
	Args     []string
	Parallel map[string]*Command
}

// UnmarshalJSON accepts the three forms; null and "" are no command.
func (c *Command) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		c.Shell = s
		return nil
	}
	var argv []string
	if json.Unmarshal(b, &argv) == nil {
		c.Args = argv
		return nil
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(b, &obj) != nil {
		return fmt.Errorf("want a string, an array of strings or an object of named commands")
	}
	c.Parallel = map[string]*Command{}
	for name, raw := range obj {
		sub := &Command{}
		if err := sub.UnmarshalJSON(raw); err != nil || sub.Parallel != nil {
			return fmt.Errorf("%s: want a string or an array of strings", name)
		}
		c.Parallel[name] = sub
	}
	return nil
}

// Step is one process of a lifecycle command.
type Step struct {
	Name string // the object form's name, "" otherwise
	Argv []string
}

// String is the step as the user reads it in a message.
func (s Step) String() string {
	cmd := strings.Join(s.Argv, " ")
	if len(s.Argv) == 3 && s.Argv[0] == "/bin/sh" && s.Argv[1] == "-c" {
		cmd = s.Argv[2]
	}
	if s.Name != "" {
		return s.Name + ": " + cmd
	}
	return cmd
}

// steps are c's processes, ${containerEnv:…} resolved against env; the
// object form's run in parallel, in name order for their messages.
func (c *Command) steps(v *vars, env map[string]string) []Step {
	if c == nil {
		return nil
	}
	one := func(name string, c *Command) []Step {
		switch {
		case c.Shell != "":
			return []Step{{Name: name, Argv: []string{"/bin/sh", "-c", v.container(c.Shell, env)}}}
		case len(c.Args) > 0:
			argv := make([]string, len(c.Args))
			for i, a := range c.Args {
				argv[i] = v.container(a, env)
			}
			return []Step{{Name: name, Argv: argv}}
		}
		return nil
	}
	if c.Parallel == nil {
		return one("", c)
	}
	names := make([]string, 0, len(c.Parallel))
	for n := range c.Parallel {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []Step
	for _, n := range names {
		out = append(out, one(n, c.Parallel[n])...)
	}
	return out
}

// The lifecycle commands, in the order the spec runs them.
const (
	OnCreate      = "onCreateCommand"
	UpdateContent = "updateContentCommand"
	PostCreate    = "postCreateCommand"
	PostStart     = "postStartCommand"
	PostAttach    = "postAttachCommand"
)

// Steps are the processes of the lifecycle command key (OnCreate…
// PostAttach, or "initializeCommand"), with ${containerEnv:…} resolved
// against env (the container's, K=V); several run in parallel. The
// image's metadata's commands are not among them: see Lifecycle.
func (c *Config) Steps(key string, env []string) []Step {
	if c == nil {
		return nil
	}
	m := map[string]string{}
	for _, kv := range env {
		k, val, _ := strings.Cut(kv, "=")
		m[k] = val
	}
	cmd := map[string]*Command{
		"initializeCommand": c.InitializeCommand, OnCreate: c.OnCreateCommand, UpdateContent: c.UpdateContentCommand,
		PostCreate: c.PostCreateCommand, PostStart: c.PostStartCommand, PostAttach: c.PostAttachCommand,
	}[key]
	return cmd.steps(c.vars, m)
}

// Lifecycle is the lifecycle command key as groups run one after the
// other: the image's metadata's commands first, then the file's; the
// steps of a group run in parallel.
func (c *Config) Lifecycle(key string, env []string) [][]Step {
	if c == nil {
		return nil
	}
	m := map[string]string{}
	for _, kv := range env {
		k, val, _ := strings.Cut(kv, "=")
		m[k] = val
	}
	var groups [][]Step
	for _, cmds := range c.imageCommands {
		if s := cmds[key].steps(c.vars, m); len(s) > 0 {
			groups = append(groups, s)
		}
	}
	if s := c.Steps(key, env); len(s) > 0 {
		groups = append(groups, s)
	}
	return groups
}

// Folder is the workspace folder inside the container: workspaceFolder,
// else DefaultWorkspaceFolder.
func (c *Config) Folder() string {
	if c == nil || c.WorkspaceFolder == "" {
		return DefaultWorkspaceFolder
	}
	return c.WorkspaceFolder
}
