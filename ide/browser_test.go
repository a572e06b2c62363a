package ide

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestBrowserTokenStaysOnItsPort loads the IDE in Chromium at the
// launcher's URL (ide/web/test/token.mjs), then opens pages on another
// port of 127.0.0.1 from it and in the same browser: that server, as a
// workspace's forwarded dev server could, records everything it is sent,
// and the token is in none of it. A page whose first chunk the network
// drops (ERR_NETWORK_CHANGED) loads again by itself (boot.js); a read
// of the running app the network drops is asked again, a write is not
// (token.js). A page
// loaded without the token says to open the URL cove printed.
func TestBrowserTokenStaysOnItsPort(t *testing.T) {
	node := browserTools(t)
	project := t.TempDir()
	os.WriteFile(filepath.Join(project, "a.txt"), []byte("a"), 0o644)
	p, _ := stack(t, project)

	var mu sync.Mutex
	var got []string // each request, as the server read it
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		fmt.Fprintf(&b, "%s %s\n", r.Method, r.URL)
		r.Header.Write(&b)
		mu.Lock()
		got = append(got, b.String())
		mu.Unlock()
		if r.URL.Path == "/opened" || r.URL.Path == "/visited" {
			// The page asks its own server again, credentials and all.
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<img src="/img"><script>fetch("/fetched", {credentials: "include"}).finally(() => (window.done = true));</script>`)
		}
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	other := "http://" + l.Addr().String()

	cmd := exec.Command(node, "web/test/token.mjs", p.URL(), other)
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "ok") {
		t.Fatalf("token.mjs: %v\n%s", err, out)
	}
	mu.Lock()
	defer mu.Unlock()
	seen := strings.Join(got, "")
	for _, path := range []string{"/opened", "/visited", "/fetched"} {
		if !strings.Contains(seen, "GET "+path+"\n") {
			t.Errorf("the other port was not asked for %s: %s", path, seen)
		}
	}
	for _, req := range got {
		if strings.Contains(req, p.Token) {
			t.Errorf("a page on another port was sent the token:\n%s", req)
		}
	}
}

// browserTools is the node that runs the browser tests (Debian's
// Chromium, driven by playwright-core from web/node_modules).
func browserTools(t *testing.T) string {
	t.Helper()
	node, err1 := exec.LookPath("node")
	_, err2 := os.Stat("/usr/bin/chromium")
	_, err3 := os.Stat("web/node_modules/playwright-core")
	if err1 != nil || err2 != nil || err3 != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("node, chromium or playwright-core missing: scripts/test.sh installs them")
		}
		t.Skip("node, /usr/bin/chromium or ide/web/node_modules missing (scripts/build-web.sh)")
	}
	return node
}

// TestBrowserHostileLanguageServer: a language server the project names
// (this test binary, hostileServer) says what it can to make the page
// show, open or write what is outside the project, run its HTML, or hold
// without bound (ide/web/test/hostile.mjs in Chromium, through the real
// proxy): the Problems panel keeps 200 problems a file and 500 files, as
// text, none outside the project; a definition in /etc/passwd opens
// nothing; hover HTML runs nothing; a rename that also writes outside
// changes nothing at all; a message over the limit closes the connection
// and the page goes on.
func TestBrowserHostileLanguageServer(t *testing.T) {
	node := browserTools(t)
	project := lspProject(t, "hostile")
	const body = "package a\n\nfunc Name() {}\n"
	os.WriteFile(filepath.Join(project, "a.go"), []byte(body), 0o644)
	p, _ := stack(t, project)
	os.Remove("/tmp/cove-evil.go")
	out, err := exec.Command(node, "web/test/hostile.mjs", p.URL()).CombinedOutput()
	t.Logf("%s", out)
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "ok") {
		t.Fatalf("hostile.mjs: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(project, "a.go")); string(b) != body {
		t.Errorf("a.go after a rename that also named a file outside: %q", b)
	}
	if _, err := os.Stat("/tmp/cove-evil.go"); err == nil {
		t.Error("the rename wrote /tmp/cove-evil.go")
	}
}
