// Package mcpclient connects Cove's agent to Model Context Protocol
// servers, through the official Go SDK: it reads their configuration in
// the shape other agents' .mcp.json files have, starts them (stdio) or
// reaches them (streamable HTTP, or the older SSE), offers their tools to
// the model as agent.Tools named "mcp__SERVER__TOOL", passes the results
// back (text, images, errors), follows their list-changed notifications,
// and restarts a server that dies, once.
//
// Where a server runs is the caller's choice, made per server through a
// Transport: cove runs the servers a project configures inside its
// workspace (WorkspaceTransport: stdio over cove exec, HTTP dialled from
// the workspace's side), and those of the user's own config on the host
// (HostTransport).
package mcpclient

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/cove-sh/cove/internal/dirs"
	"github.com/cove-sh/cove/internal/projectfs"
)

// ServerConfig is one entry of a config's "mcpServers": a program to run
// and talk to over its standard input and output (Command, Args, Env), or
// a server to reach over HTTP (Type "http" or "sse", URL, Headers). Other
// fields other agents write ("disabled", "autoApprove", …) are ignored,
// but for "disabled": true, which leaves the server out.
type ServerConfig struct {
	Type     string            `json:"type,omitempty"` // "stdio" (the default with a command), "http" (streamable), "sse"
	Command  string            `json:"command,omitempty"`
	Args     []string          `json:"args,omitempty"`
	Env      map[string]string `json:"env,omitempty"`
	URL      string            `json:"url,omitempty"`
	Headers  map[string]string `json:"headers,omitempty"`
	Disabled bool              `json:"disabled,omitempty"`
}

// Kind is how the server is spoken to: "stdio", "http" or "sse".
func (c ServerConfig) Kind() string {
	switch strings.ToLower(c.Type) {
	case "http", "streamable-http", "streamablehttp", "streamable_http":
		return "http"
	case "sse":
		return "sse"
	case "", "stdio":
		if c.Command == "" && c.URL != "" {
			return "http" // as VS Code and Claude Code read a bare "url"
		}
		return "stdio"
	}
	return c.Type
}

// Named is a server's config with its name and where it came from.
type Named struct {
	Name   string
	Source string // the file it was read from, for messages
	ServerConfig
}

// Config file names: the project's (run in the workspace) and the user's.
const (
	ProjectFile      = ".mcp.json"      // at the project's root, as other agents read it
	ProjectCoveFile  = ".cove/mcp.json" // cove's own, beside .cove/config.json
	UserFileName     = "mcp.json"       // in the user's cove config dir (~/.config/cove)
	maxConfigSize    = 1 << 20
	maxServerNameLen = 64
)

// UserConfigPath is the user's MCP config file under home.
func UserConfigPath(home string) string {
	return filepath.Join(dirs.ConfigDir(home), UserFileName)
}

// Parse reads a config file's content: {"mcpServers": {NAME: {…}}}.
// Each server is checked: a stdio one needs a command, an HTTP one an
// http or https URL. The servers come sorted by name; disabled ones are
// left out.
func Parse(source string, b []byte) ([]Named, error) {
	var f struct {
		MCPServers map[string]ServerConfig `json:"mcpServers"`
		Servers    map[string]ServerConfig `json:"servers"` // VS Code's name for it
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %w (it should be {\"mcpServers\": {\"NAME\": {\"command\": …}}})", source, err)
	}
	servers := f.MCPServers
	if servers == nil {
		servers = f.Servers
	}
	var out []Named
	for name, c := range servers {
		if c.Disabled {
			continue
		}
		if err := checkName(name); err != nil {
			return nil, fmt.Errorf("%s: server %q: %w", source, name, err)
		}
		switch c.Kind() {
		case "stdio":
			if c.Command == "" {
				return nil, fmt.Errorf("%s: server %q has no \"command\" (or give \"type\": \"http\" and a \"url\")", source, name)
			}
		case "http", "sse":
			u, err := url.Parse(c.URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return nil, fmt.Errorf("%s: server %q: \"url\" %q is not an http:// or https:// URL", source, name, c.URL)
			}
		default:
			return nil, fmt.Errorf("%s: server %q: unknown \"type\" %q (say stdio, http or sse)", source, name, c.Type)
		}
		out = append(out, Named{Name: name, Source: source, ServerConfig: c})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// validName is what a server's name, and a tool's, may be: the
// characters MCP clients accept in them (Claude Code's, the spec's
// tool names), with no separator. A name is part of the keys the user
// allows for a session ("mcp:host:gh/delete_repo"): a "/" or ":" in one
// could make one origin's key look like another's.
var validName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_.-]+$`) })

func checkName(name string) error {
	if name == "" || len(name) > maxServerNameLen {
		return fmt.Errorf("a server's name must be 1 to %d characters", maxServerNameLen)
	}
	if !validName().MatchString(name) {
		return errors.New("a server's name may hold only letters, digits, _, . and - (no / or :, which would blur the keys you allow it by)")
	}
	return nil
}

// maxToolNameLen is the longest tool name taken from a server.
const maxToolNameLen = 128

// ValidToolName says whether a server's tool name is one cove offers:
// 1 to 128 of the characters validName allows.
func ValidToolName(name string) bool {
	return len(name) <= maxToolNameLen && validName().MatchString(name)
}

// ReadFile reads a config file of the user's (or one given with
// --mcp-config); a missing file is no servers.
func ReadFile(path string) ([]Named, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("MCP config: %w", err)
	}
	return Parse(path, b)
}

// ReadProject reads the project's configs, .mcp.json then .cove/mcp.json
// (whose servers of the same name win), through the confined project
// view: the workspace can write both, so they are read as hostile input
// (no symlink out of the project, a size cap) and what they name runs
// only in the workspace.
func ReadProject(dir string) ([]Named, error) {
	d, err := projectfs.Open(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	byName := map[string]Named{}
	for _, name := range []string{ProjectFile, ProjectCoveFile} {
		b, err := d.ReadFileLimit(name, maxConfigSize+1)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("the project's %s: %w", name, err)
		}
		if len(b) > maxConfigSize {
			return nil, fmt.Errorf("the project's %s: larger than %d bytes", name, maxConfigSize)
		}
		servers, err := Parse(name, b)
		if err != nil {
			return nil, err
		}
		for _, s := range servers {
			byName[s.Name] = s
		}
	}
	out := make([]Named, 0, len(byName))
	for _, s := range byName {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// ExpandEnv replaces ${VAR} and ${VAR:-default} in the host-side config
// c's command, args, env, URL and headers with getenv's values, as
// Claude Code does. Only for the user's own configs: a project's is never
// expanded, since it would hand the host's secrets to the workspace.
func ExpandEnv(c ServerConfig, getenv func(string) string) ServerConfig {
	ex := func(s string) string {
		var b strings.Builder
		for {
			i := strings.Index(s, "${")
			if i < 0 {
				break
			}
			j := strings.IndexByte(s[i:], '}')
			if j < 0 {
				break
			}
			b.WriteString(s[:i])
			name, def, hasDef := strings.Cut(s[i+2:i+j], ":-")
			v := getenv(name)
			if v == "" && hasDef {
				v = def
			}
			b.WriteString(v)
			s = s[i+j+1:]
		}
		b.WriteString(s)
		return b.String()
	}
	out := c
	out.Command, out.URL = ex(c.Command), ex(c.URL)
	out.Args = nil
	for _, a := range c.Args {
		out.Args = append(out.Args, ex(a))
	}
	mapEx := func(m map[string]string) map[string]string {
		if m == nil {
			return nil
		}
		n := make(map[string]string, len(m))
		for k, v := range m {
			n[k] = ex(v)
		}
		return n
	}
	out.Env, out.Headers = mapEx(c.Env), mapEx(c.Headers)
	return out
}

// Sources says where one run's servers come from.
type Sources struct {
	UserFile string   // the user's own config (UserConfigPath): run on the host
	Extra    []string // files given for this run (cove agent --mcp-config): the user's too
	Project  string   // the project's directory: its .mcp.json and .cove/mcp.json run in the workspace
	Getenv   func(string) string
	// Host reaches a user's server; Workspace one of the project's. Tests
	// and cove pass HostTransport, and WorkspaceTransport over cove exec.
	Host      func(ServerConfig) Transport
	Workspace func(ServerConfig) Transport
}

// Load reads the servers of src, the user's first (with ${VAR}s from
// Getenv), then the project's, which run in the workspace and whose
// ${VAR}s are left as written. A project server named as one of the
// user's is left out, with a note; so is a project file that does not
// parse (the agent goes on without it). A user's file that does not
// parse is an error: the user asked for it.
func Load(src Sources) (specs []Spec, notes []string, err error) {
	user := map[string]Named{}
	var order []string
	for _, f := range append([]string{src.UserFile}, src.Extra...) {
		if f == "" {
			continue
		}
		servers, err := ReadFile(f)
		if err != nil {
			return nil, nil, err
		}
		for _, s := range servers {
			if _, ok := user[s.Name]; !ok {
				order = append(order, s.Name)
			}
			user[s.Name] = s
		}
	}
	for _, name := range order {
		s := user[name]
		c := s.ServerConfig
		if src.Getenv != nil {
			c = ExpandEnv(c, src.Getenv)
		}
		specs = append(specs, Spec{Named: s, Where: OnHost, Connect: func() Transport { return src.Host(c) }})
	}
	if src.Project == "" {
		return specs, nil, nil
	}
	project, err := ReadProject(src.Project)
	if err != nil {
		return specs, []string{err.Error() + ": its MCP servers are left out"}, nil
	}
	for _, s := range project {
		if _, ok := user[s.Name]; ok {
			notes = append(notes, fmt.Sprintf("the project's MCP server %q is left out: your own config names one %q too", s.Name, s.Name))
			continue
		}
		c := s.ServerConfig
		specs = append(specs, Spec{Named: s, Where: InWorkspace, Connect: func() Transport { return src.Workspace(c) }})
	}
	return specs, notes, nil
}
