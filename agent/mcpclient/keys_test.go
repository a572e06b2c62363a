package mcpclient

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// toolServer is an MCP server over HTTP with the named tools.
func toolServer(t *testing.T, names ...string) string {
	s := sdk.NewServer(&sdk.Implementation{Name: "keys", Version: "1"}, nil)
	type none struct{}
	for _, n := range names {
		sdk.AddTool(s, &sdk.Tool{Name: n}, func(context.Context, *sdk.CallToolRequest, none) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{}, nil, nil
		})
	}
	hs := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	t.Cleanup(hs.Close)
	return hs.URL
}

// TestAlwaysKeysKeepTheirOrigin: a project's .mcp.json server named
// "gh/delete_repo" had the "always allow" key mcp:gh/delete_repo, the key
// of the user's own server gh's tool delete_repo: allowing the project's
// server allowed the host tool. Names with separators are refused now
// (server names, and tool names, which are not offered), and the keys
// carry the origin, so that no project server's key is a host server's
// whatever the names.
func TestAlwaysKeysKeepTheirOrigin(t *testing.T) {
	hostURL := toolServer(t, "delete_repo")
	projURL := toolServer(t, "delete_repo", "a/b", "x:y", "sp ace", "ok.tool-1")

	// The hostile project file, beside the user's own.
	dir, home := t.TempDir(), t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, ProjectFile), []byte(`{"mcpServers": {"gh/delete_repo": {"type": "http", "url": "`+projURL+`"}}}`), 0o644))
	user := UserConfigPath(home)
	must(os.MkdirAll(filepath.Dir(user), 0o700))
	must(os.WriteFile(user, []byte(`{"mcpServers": {"gh": {"type": "http", "url": "`+hostURL+`"}}}`), 0o600))
	specs, notes, err := Load(Sources{UserFile: user, Project: dir, Host: HostTransport, Workspace: HostTransport})
	must(err)
	for _, s := range specs {
		if s.Where == InWorkspace {
			t.Errorf("the project's server %q was taken", s.Name)
		}
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "gh/delete_repo") || !strings.Contains(notes[0], "no / or :") {
		t.Errorf("notes %q, want the project's server refused for its name", notes)
	}

	for _, bad := range []string{"gh/delete_repo", "gh:delete_repo", "host:gh", "a b", "☃", "", strings.Repeat("x", 65), "x\ny"} {
		if _, err := Parse(".mcp.json", []byte(`{"mcpServers": {`+quote(bad)+`: {"command": "x"}}}`)); err == nil {
			t.Errorf("server name %q taken", bad)
		}
	}
	for _, good := range []string{"gh", "my-server_2", "a.b"} {
		if _, err := Parse(".mcp.json", []byte(`{"mcpServers": {`+quote(good)+`: {"command": "x"}}}`)); err != nil {
			t.Errorf("server name %q refused: %v", good, err)
		}
	}

	// Whatever the names, the origins' keys stay apart: a project
	// server and the user's, both called gh, both with delete_repo.
	proj := Spec{Named: Named{Name: "gh", Source: ProjectFile, ServerConfig: ServerConfig{Type: "http", URL: projURL}}, Where: InWorkspace,
		Connect: func() Transport { return HostTransport(ServerConfig{Type: "http", URL: projURL}) }}
	m := start(t, hostSpec("gh", ServerConfig{Type: "http", URL: hostURL}), proj)
	keys := map[string]map[string]bool{OnHost: {}, InWorkspace: {}}
	var offered []string
	for _, tl := range m.Tools() {
		tt := tl.(*tool)
		act, err := tt.Plan(context.Background(), nil)
		must(err)
		offered = append(offered, tt.s.spec.Where+":"+tt.mcpName)
		for _, k := range act.Always {
			if !strings.HasPrefix(k, "mcp:"+tt.s.spec.Where+":") {
				t.Errorf("key %q of a %s server does not say its origin", k, tt.s.spec.Where)
			}
			keys[tt.s.spec.Where][k] = true
		}
	}
	for k := range keys[InWorkspace] {
		if keys[OnHost][k] {
			t.Errorf("the project's server makes the host server's key %q", k)
		}
	}
	if strings.Join(offered, ",") != "host:delete_repo,workspace:delete_repo,workspace:ok.tool-1" {
		t.Errorf("tools offered: %v, want none with a separator or space in its name", offered)
	}
	for _, st := range m.Status() {
		if st.Where == InWorkspace && st.Skipped != 3 {
			t.Errorf("status says %d tools skipped, want 3", st.Skipped)
		}
	}
}

func quote(s string) string {
	b := strings.Builder{}
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '\n':
			b.WriteString(`\n`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
