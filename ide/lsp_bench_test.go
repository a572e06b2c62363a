package ide

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// The language servers' latency through the launcher (page → proxy →
// the workspace's server → gopls and back) against the floor, the same
// gopls on a plain stdio pipe: a diagnostic's round trip (a change that
// makes a type error, until gopls says so, then one that fixes it, until
// it says it is gone) and a completion's.
//
//	go test -run '^$' -bench BenchmarkLSP ./ide/

// benchGopls is gopls, or the benchmark is skipped.
func benchGopls(b *testing.B) string {
	p := os.Getenv("COVE_TEST_GOPLS")
	if p == "" {
		p = "/var/cache/cove-test/gopls/gopls"
	}
	if _, err := os.Stat(p); err != nil {
		b.Skipf("no gopls at %s (scripts/test.sh builds it)", p)
	}
	if _, err := exec.LookPath("go"); err != nil {
		b.Skip("no go command for gopls")
	}
	return p
}

// lspConn is one way to a language server: a message out, a message in.
type lspConn struct {
	send func([]byte) error
	in   chan []byte
}

func stdioConn(b *testing.B, gopls, dir string) *lspConn {
	cmd := exec.Command(gopls)
	cmd.Dir = dir
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	c := &lspConn{in: make(chan []byte, 64), send: func(m []byte) error {
		_, err := fmt.Fprintf(stdin, "Content-Length: %d\r\n\r\n%s", len(m), m)
		return err
	}}
	go readLSP(stdout, func(m []byte) error { c.in <- m; return nil })
	return c
}

func proxyConn(b *testing.B, gopls, dir string) *lspConn {
	cfg, _ := json.Marshal(map[string]any{"customizations": map[string]any{"cove": map[string]any{"languageServers": map[string]any{
		"go": map[string]any{"command": []string{gopls}, "languages": []string{"go"}}}}}})
	os.WriteFile(filepath.Join(dir, ".devcontainer.json"), cfg, 0o644)
	p, base := stack(b, dir)
	h := http.Header{}
	h.Set("Origin", base)
	ws, _, err := websocket.Dial(context.Background(), strings.Replace(base, "http", "ws", 1)+"/api/lsp/go",
		&websocket.DialOptions{HTTPHeader: h, Subprotocols: []string{"cove", "cove-token." + p.Token}})
	if err != nil {
		b.Fatal(err)
	}
	ws.SetReadLimit(maxLSPMessage)
	b.Cleanup(func() { ws.CloseNow() })
	c := &lspConn{in: make(chan []byte, 64), send: func(m []byte) error { return ws.Write(context.Background(), websocket.MessageText, m) }}
	go func() {
		for {
			_, m, err := ws.Read(context.Background())
			if err != nil {
				return
			}
			c.in <- m
		}
	}()
	return c
}

// lspMsg is what the benchmark reads of a server's message.
type lspMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		URI         string            `json:"uri"`
		Version     *int              `json:"version"`
		Diagnostics []json.RawMessage `json:"diagnostics"`
		Items       []json.RawMessage `json:"items"`
	} `json:"params"`
	Result json.RawMessage `json:"result"`
}

// until reads messages until one satisfies ok, answering the server's
// own requests on the way (configuration, progress, registrations).
func (c *lspConn) until(b *testing.B, ok func(lspMsg) bool) {
	deadline := time.After(60 * time.Second)
	for {
		select {
		case raw := <-c.in:
			var m lspMsg
			json.Unmarshal(raw, &m)
			if m.Method != "" && len(m.ID) > 0 {
				var result any
				if m.Method == "workspace/configuration" {
					result = make([]any, len(m.Params.Items))
				}
				r, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": result})
				c.send(r)
				continue
			}
			if ok(m) {
				return
			}
		case <-deadline:
			b.Fatal("no answer from gopls in 60 s")
		}
	}
}

func (c *lspConn) call(b *testing.B, id int, method string, params any) {
	m, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err := c.send(m); err != nil {
		b.Fatal(err)
	}
	c.until(b, func(m lspMsg) bool { return string(m.ID) == fmt.Sprint(id) && m.Method == "" })
}

func (c *lspConn) notify(b *testing.B, method string, params any) {
	m, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": method, "params": params})
	if err := c.send(m); err != nil {
		b.Fatal(err)
	}
}

const benchMain = "package main\n\nimport \"fmt\"\n\ntype Point struct{ X, Y int }\n\nfunc main() {\n\tp := Point{}\n\tfmt.Println(p.X)\n}\n"

// openBench starts a session with gopls over the way connect makes, on a
// fresh Go project, and returns it with main.go's URI once gopls has said
// main.go is clean.
func openBench(b *testing.B, connect func(*testing.B, string, string) *lspConn) (*lspConn, string) {
	gopls := benchGopls(b)
	dir := b.TempDir()
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/bench\n\ngo 1.22\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "main.go"), []byte(benchMain), 0o644)
	c := connect(b, gopls, dir)
	uri := "file://" + dir + "/main.go"
	c.call(b, 1, "initialize", map[string]any{"processId": nil, "rootUri": "file://" + dir,
		"capabilities": map[string]any{"textDocument": map[string]any{"publishDiagnostics": map[string]any{"versionSupport": true}}}})
	c.notify(b, "initialized", map[string]any{})
	c.notify(b, "textDocument/didOpen", map[string]any{"textDocument": map[string]any{"uri": uri, "languageId": "go", "version": 1, "text": benchMain}})
	c.until(b, func(m lspMsg) bool { return m.Method == "textDocument/publishDiagnostics" && m.Params.URI == uri })
	return c, uri
}

func benchDiagnostics(b *testing.B, connect func(*testing.B, string, string) *lspConn) {
	c, uri := openBench(b, connect)
	broken := strings.Replace(benchMain, "fmt.Println(p.X)", "fmt.Println(p.X)\n\tp.X = true", 1)
	version := 1
	change := func(text string, wantErrors bool) {
		version++
		v := version
		c.notify(b, "textDocument/didChange", map[string]any{"textDocument": map[string]any{"uri": uri, "version": v},
			"contentChanges": []any{map[string]any{"text": text}}})
		c.until(b, func(m lspMsg) bool {
			return m.Method == "textDocument/publishDiagnostics" && m.Params.URI == uri && m.Params.Version != nil && *m.Params.Version == v &&
				(len(m.Params.Diagnostics) > 0) == wantErrors
		})
	}
	change(broken, true) // once, before the clock
	change(benchMain, false)
	b.ResetTimer()
	for b.Loop() {
		change(broken, true)
		change(benchMain, false)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(2*b.N)/1000, "ms/diagnostic")
}

func benchCompletion(b *testing.B, connect func(*testing.B, string, string) *lspConn) {
	c, uri := openBench(b, connect)
	text := strings.Replace(benchMain, "fmt.Println(p.X)", "fmt.Println(p.X)\n\tp.", 1)
	c.notify(b, "textDocument/didChange", map[string]any{"textDocument": map[string]any{"uri": uri, "version": 2},
		"contentChanges": []any{map[string]any{"text": text}}})
	id := 10
	complete := func() {
		id++
		c.call(b, id, "textDocument/completion", map[string]any{"textDocument": map[string]any{"uri": uri},
			"position": map[string]int{"line": 9, "character": 3}})
	}
	complete()
	b.ResetTimer()
	for b.Loop() {
		complete()
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/completion")
}

func BenchmarkLSPDiagnostics(b *testing.B) {
	b.Run("stdio", func(b *testing.B) { benchDiagnostics(b, stdioConn) })
	b.Run("proxy", func(b *testing.B) { benchDiagnostics(b, proxyConn) })
}

func BenchmarkLSPCompletion(b *testing.B) {
	b.Run("stdio", func(b *testing.B) { benchCompletion(b, stdioConn) })
	b.Run("proxy", func(b *testing.B) { benchCompletion(b, proxyConn) })
}
