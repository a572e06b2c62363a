package ide

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/cove-sh/cove/internal/projectfs"
)

// TestHelperLanguageServer is not a test: it is the fake language server
// the tests below name in devcontainer.json (this test binary, run with
// "-- MODE"), as hostile as each needs.
//
//	echo   answers each message with {"echo": MESSAGE}; writes its pid to lsp.pid
//	die    exits on its first message, saying why on stderr
//	huge   says a message of a terabyte follows, and sends bytes
//	hostile  see hostileServer
//	mute   reads every message and answers none
func TestHelperLanguageServer(t *testing.T) {
	i := slices.Index(os.Args, "--")
	if i < 0 || i+1 >= len(os.Args) {
		return
	}
	mode := os.Args[i+1]
	os.WriteFile("lsp.pid", []byte(strconv.Itoa(os.Getpid())), 0o644)
	switch mode {
	case "huge":
		fmt.Print("Content-Length: 1099511627776\r\n\r\n")
		buf := make([]byte, 1<<16)
		for {
			if _, err := os.Stdout.Write(buf); err != nil {
				os.Exit(0)
			}
		}
	}
	if mode == "hostile" {
		hostileServer()
		return
	}
	if mode == "mute" {
		readLSP(os.Stdin, func([]byte) error { return nil })
		os.Exit(0)
	}
	err := readLSP(os.Stdin, func(msg []byte) error {
		if mode == "die" {
			fmt.Fprintln(os.Stderr, "fake server: giving up\x1b[31m red")
			os.Exit(3)
		}
		b, _ := json.Marshal(map[string]json.RawMessage{"echo": msg})
		fmt.Printf("Content-Length: %d\r\n\r\n%s", len(b), b)
		return nil
	})
	fmt.Fprintln(os.Stderr, err)
	os.Exit(0)
}

// lspProject is a project whose devcontainer.json names this test
// binary as the language server "fake", in mode.
func lspProject(t *testing.T, mode string) string {
	t.Helper()
	project := t.TempDir()
	cfg, _ := json.Marshal(map[string]any{"customizations": map[string]any{"cove": map[string]any{"languageServers": map[string]any{
		"fake": map[string]any{"command": []string{os.Args[0], "-test.run=^TestHelperLanguageServer$", "--", mode}, "languages": []string{"go"}},
	}, "formatOnSave": true}}})
	os.WriteFile(filepath.Join(project, ".devcontainer.json"), append([]byte("// the project's\n"), cfg...), 0o644)
	return project
}

func dialLSP(t *testing.T, p *Proxy, base, name string) *websocket.Conn {
	t.Helper()
	h := http.Header{}
	h.Set("Origin", base)
	c, _, err := websocket.Dial(context.Background(), strings.Replace(base, "http", "ws", 1)+"/api/lsp/"+name,
		&websocket.DialOptions{HTTPHeader: h, Subprotocols: []string{"cove", "cove-token." + p.Token}})
	if err != nil {
		t.Fatalf("dial /api/lsp/%s: %v", name, err)
	}
	c.SetReadLimit(64 << 20) // what the proxy lets through is what is checked, not this client's limit
	t.Cleanup(func() { c.CloseNow() })
	return c
}

func readPid(t *testing.T, project string) int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile(filepath.Join(project, "lsp.pid"))
		if pid, err := strconv.Atoi(string(b)); err == nil {
			return pid
		}
	}
	t.Fatal("the language server never started")
	return 0
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		// A zombie is gone too: its parent (this test) reaps it.
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); strings.Contains(string(b), ") Z ") {
			return
		}
	}
	t.Errorf("the language server %d still runs", pid)
}

// TestLSPRelayThroughProxy: the page's messages reach the language server
// the project names, through the launcher's proxy, and its answers come
// back, one WebSocket message each; GET /api/lsp lists it with the root
// and the project's formatOnSave; the server ends when the page goes.
func TestLSPRelayThroughProxy(t *testing.T) {
	t.Parallel()
	project := lspProject(t, "echo")
	p, base := stack(t, project)
	_, body := get(t, http.DefaultClient, base+"/api/lsp", map[string]string{tokenHeader: p.Token})
	var info struct {
		Root         string
		Servers      []languageServer
		FormatOnSave *bool
	}
	json.Unmarshal([]byte(body), &info)
	if info.Root != "file://"+project || len(info.Servers) == 0 || info.Servers[0].Name != "fake" || info.FormatOnSave == nil || !*info.FormatOnSave {
		t.Fatalf("GET /api/lsp: %s", body)
	}
	c := dialLSP(t, p, base, "fake")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 3 {
		msg := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"x":"é\r\n"}}`, i)
		if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		_, got, err := c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"echo":` + msg + `}`; string(got) != want {
			t.Fatalf("got %s, want %s", got, want)
		}
	}
	pid := readPid(t, project)
	c.Close(websocket.StatusNormalClosure, "")
	waitGone(t, pid)
}

// TestLSPServerExitsAndStartsAgain: a server that exits closes the
// page's WebSocket with closeServerEnded and its last word (escape
// sequences taken out); connecting again starts a new one.
func TestLSPServerExitsAndStartsAgain(t *testing.T) {
	t.Parallel()
	project := lspProject(t, "die")
	p, base := stack(t, project)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 2 {
		os.Remove(filepath.Join(project, "lsp.pid"))
		c := dialLSP(t, p, base, "fake")
		c.Write(ctx, websocket.MessageText, []byte(`{}`))
		_, _, err := c.Read(ctx)
		var ce websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != closeServerEnded || !strings.Contains(ce.Reason, "fake server: giving up") || strings.Contains(ce.Reason, "\x1b") {
			t.Fatalf("after the server exited: %v", err)
		}
		readPid(t, project) // each time a new one ran
	}
}

// TestLSPHugeMessageStopsTheServer: a server that announces a message
// over the limit is stopped and the page told; nothing is buffered.
func TestLSPHugeMessageStopsTheServer(t *testing.T) {
	t.Parallel()
	project := lspProject(t, "huge")
	p, base := stack(t, project)
	c := dialLSP(t, p, base, "fake")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _, err := c.Read(ctx)
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != closeTooLarge || !strings.Contains(ce.Reason, "1099511627776 bytes") {
		t.Fatalf("after a huge message: %v", err)
	}
	waitGone(t, readPid(t, project))
}

// TestLSPSecondWindowTakesOver: one server per language: a second
// window's connection ends the first's server, and the first is told.
func TestLSPSecondWindowTakesOver(t *testing.T) {
	t.Parallel()
	project := lspProject(t, "echo")
	p, base := stack(t, project)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first := dialLSP(t, p, base, "fake")
	pid := readPid(t, project)
	os.Remove(filepath.Join(project, "lsp.pid"))
	second := dialLSP(t, p, base, "fake")
	_, _, err := first.Read(ctx)
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != closeTaken {
		t.Fatalf("the first window: %v", err)
	}
	waitGone(t, pid)
	second.Write(ctx, websocket.MessageText, []byte(`{"id":1}`))
	if _, got, err := second.Read(ctx); err != nil || string(got) != `{"echo":{"id":1}}` {
		t.Fatalf("the second window: %s %v", got, err)
	}
	if c := dialLSP(t, p, base, "nope"); true {
		_, _, err := c.Read(ctx)
		if !errors.As(err, &ce) || ce.Code != closeNoServer {
			t.Errorf("an unknown server: %v", err)
		}
	}
}

// TestLSPProxyBoundsMessages: a workspace whose server (replaced by the
// workspace: it is the workspace's to run) sends a WebSocket message
// over the limit does not get it through the launcher, whose memory
// stays bounded: the page's connection is closed with closeTooLarge; and
// one the page sends over the limit is not passed on either.
func TestLSPProxyBoundsMessages(t *testing.T) {
	t.Parallel()
	got := make(chan int, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("/api/lsp/huge", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, acceptOptions())
		if err != nil {
			return
		}
		defer c.CloseNow()
		mw, err := c.Writer(r.Context(), websocket.MessageText)
		if err != nil {
			return
		}
		chunk := []byte(strings.Repeat("x", 1<<16))
		for range 1 << 12 { // 256 MiB, one message
			if _, err := mw.Write(chunk); err != nil {
				return
			}
		}
		mw.Close()
	})
	mux.HandleFunc("/api/lsp/reads", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, acceptOptions())
		if err != nil {
			return
		}
		defer c.CloseNow()
		c.SetReadLimit(1 << 30)
		_, b, _ := c.Read(r.Context())
		got <- len(b)
	})
	p, base := behindProxy(t, mux)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := dialLSP(t, p, base, "huge")
	_, msg, err := c.Read(ctx)
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != closeTooLarge {
		t.Fatalf("a huge message from the workspace: %d bytes, %v", len(msg), err)
	}
	c2 := dialLSP(t, p, base, "reads")
	w, _ := c2.Writer(ctx, websocket.MessageText)
	io.Copy(w, io.LimitReader(neverEnding('y'), maxLSPMessage+1))
	w.Close()
	select {
	case n := <-got:
		if n != 0 {
			t.Errorf("the workspace got a message of %d bytes from the page", n)
		}
	case <-ctx.Done():
		t.Error("the workspace's side was not closed")
	}
}

type neverEnding byte

func (b neverEnding) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

// TestReadLSPRefusesBadHeaders: the base protocol's reader takes no
// header line over its buffer, no message without a length.
func TestReadLSPRefusesBadHeaders(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"Content-Length: 5\r\n" + strings.Repeat("X-Long: y", 1000) + "\r\n\r\nhello",
		"Content-Type: x\r\n\r\nhello",
		"Content-Length: -1\r\n\r\n",
	} {
		err := readLSP(bufio.NewReader(strings.NewReader(in)), func([]byte) error { return nil })
		if err == nil || errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "header") {
			t.Errorf("%.40q: %v", in, err)
		}
	}
}

// hostileServer is a language server that wants the page to show, open
// and change what is outside the project (ide/web/test/hostile.mjs):
// diagnostics for /etc/passwd, with escape sequences, thousands of them
// in thousands of files; a definition in /etc/passwd; hover Markdown
// with HTML that runs script; a rename that writes outside the project;
// references in a message over the limit.
func hostileServer() {
	root, _ := os.Getwd()
	uri := func(p string) string { return "file://" + p }
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Printf("Content-Length: %d\r\n\r\n%s", len(b), b)
	}
	notify := func(method string, params any) {
		send(map[string]any{"jsonrpc": "2.0", "method": method, "params": params})
	}
	rng := map[string]any{"start": map[string]int{"line": 0, "character": 0}, "end": map[string]int{"line": 0, "character": 4}}
	diag := func(msg string) map[string]any { return map[string]any{"range": rng, "severity": 1, "message": msg} }
	readLSP(os.Stdin, func(b []byte) error {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		json.Unmarshal(b, &m)
		reply := func(result any) { send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": result}) }
		switch m.Method {
		case "initialize":
			reply(map[string]any{"capabilities": map[string]any{"textDocumentSync": 1, "definitionProvider": true, "hoverProvider": true,
				"renameProvider": true, "referencesProvider": true}})
		case "initialized":
			notify("textDocument/publishDiagnostics", map[string]any{"uri": "file:///etc/passwd", "diagnostics": []any{diag("outside")}})
			notify("textDocument/publishDiagnostics", map[string]any{"uri": uri(root + "/../escape.go"), "diagnostics": []any{diag("dotdot")}})
			var many []any
			for i := range 5000 {
				long := "" // a few messages of 2500 characters: the whole is under the 8 MiB a message may be
				if i%1000 == 0 {
					long = strings.Repeat("long ", 500)
				}
				many = append(many, diag(fmt.Sprintf("\x1b]0;evil title\x07\x1b[31mred %d %s", i, long)))
			}
			notify("textDocument/publishDiagnostics", map[string]any{"uri": uri(root + "/a.go"), "diagnostics": many})
			for i := range 2000 {
				notify("textDocument/publishDiagnostics", map[string]any{"uri": uri(fmt.Sprintf("%s/gen/f%04d.go", root, i)), "diagnostics": []any{diag("flood")}})
			}
			notify("window/showMessage", map[string]any{"type": 1, "message": "hello \x1b[2J from the server"})
		case "textDocument/definition":
			reply(map[string]any{"uri": "file:///etc/passwd", "range": rng})
		case "textDocument/hover":
			reply(map[string]any{"contents": map[string]any{"kind": "markdown", "value": "**bold** <img src=x onerror=\"window.pwned=1\"><script>window.pwned=2</script>" +
				"<a href=\"javascript:window.pwned=3\">link</a><iframe src=\"/api/file?path=a.go\"></iframe>"}})
		case "textDocument/rename":
			reply(map[string]any{"changes": map[string]any{
				uri(root + "/a.go"):        []any{map[string]any{"range": rng, "newText": "RENAMED"}},
				"file:///tmp/cove-evil.go": []any{map[string]any{"range": rng, "newText": "evil"}},
			}})
		case "textDocument/references":
			fmt.Printf("Content-Length: %d\r\n\r\n", 20<<20)
			os.Stdout.Write(make([]byte, 20<<20))
		case "shutdown":
			reply(nil)
		}
		return nil
	})
}

// TestLSPSilentServerRestarted: a language server that says nothing and
// uses no CPU is left alone while nothing is asked of it; once it leaves
// a request unanswered past the limit, it is stopped and the page's
// WebSocket closed with the code that has the page start it again.
func TestLSPSilentServerRestarted(t *testing.T) {
	t.Parallel()
	project := lspProject(t, "mute")
	dir, err := projectfs.Open(project)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dir.Close() })
	l := &languages{dir: dir, keepalive: time.Second, silence: 300 * time.Millisecond, running: map[string]*lspProcess{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/lsp/{name}", l.serve)
	p, base := behindProxy(t, mux)
	c := dialLSP(t, p, base, "fake")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"jsonrpc":"2.0","method":"initialized","params":{}}`)); err != nil {
		t.Fatal(err)
	}
	pid := readPid(t, project)
	time.Sleep(time.Second) // past the limit, with only a notification sent
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("a silent server with nothing asked of it was stopped: %v", err)
	}
	asked := time.Now()
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":7,"method":"textDocument/hover","params":{}}`)); err != nil {
		t.Fatal(err)
	}
	_, _, err = c.Read(ctx)
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != closeServerEnded || !strings.Contains(ce.Reason, "unanswered") {
		t.Fatalf("after an unanswered request: %v", err)
	}
	if d := time.Since(asked); d < 300*time.Millisecond || d > 5*time.Second {
		t.Errorf("stopped %v after the request, the limit being 300ms", d)
	}
	waitGone(t, pid)
}
