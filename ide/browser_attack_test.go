package ide

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBrowserAttackerPages: in Chromium, with the IDE open, a page on
// another port of 127.0.0.1 and a page at a DNS-rebinding name (mapped
// to 127.0.0.1, at the IDE's port) try to read the project, write to it,
// make a directory and open a terminal's WebSocket, with and without the
// token (as if it leaked). None gets an answer it can use: the other port
// is refused by the token and the Origin check, the rebinding name by the
// Host check, and nothing appears in the project.
func TestBrowserAttackerPages(t *testing.T) {
	node := browserTools(t)
	project := t.TempDir()
	os.WriteFile(filepath.Join(project, "a.txt"), []byte("a"), 0o644)
	p, _ := stack(t, project)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<title>elsewhere</title>"))
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })

	out, err := exec.Command(node, "web/test/attack.mjs", p.URL(), "http://"+l.Addr().String(), p.Token).Output()
	if err != nil {
		t.Fatalf("attack.mjs: %v\n%s", err, out)
	}
	var got map[string]map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("attack.mjs said %q: %v", out, err)
	}
	t.Logf("%s", out)
	for from, res := range got {
		for what, v := range res {
			switch v := v.(type) {
			case bool:
				if v {
					t.Errorf("%s: %s opened", from, what)
				}
			case float64:
				// 0: the browser kept the answer from the page (or did
				// not send it); else a refusal.
				if v != 0 && v != http.StatusUnauthorized && v != http.StatusForbidden {
					t.Errorf("%s: %s got %v", from, what, v)
				}
			}
		}
	}
	if got["rebind"]["page"] != float64(http.StatusForbidden) {
		t.Errorf("the rebinding name's page got %v, want 403 (wrong Host)", got["rebind"]["page"])
	}
	if got["rebind"]["readWithToken"] != float64(http.StatusForbidden) {
		t.Errorf("a read with the token at the rebinding name got %v, want 403", got["rebind"]["readWithToken"])
	}
	entries, _ := os.ReadDir(project)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "pwned") {
			t.Errorf("a page not the IDE's changed the project: %s", e.Name())
		}
	}
}
