package ide

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestLifelineSaysWhyTheLauncherStops: every window holds a line to the
// launcher itself; it learns the project's directory at once, and, when
// the launcher ends on purpose, why and whether to close, before the
// line closes as "going away". A window that comes during the shutdown
// is told at once. The line is behind the token and the origin check,
// and never reaches the workspace.
func TestLifelineSaysWhyTheLauncherStops(t *testing.T) {
	reached := false
	p, base := behindProxy(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached = true }))
	p.Dir = "/home/u/my project"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws := strings.Replace(base, "http", "ws", 1) + lifelinePath
	dial := func(origin string, token string) (*websocket.Conn, *http.Response, error) {
		h := http.Header{"Origin": {origin}, tokenHeader: {token}}
		return websocket.Dial(ctx, ws, &websocket.DialOptions{HTTPHeader: h})
	}
	read := func(c *websocket.Conn) map[string]any {
		t.Helper()
		_, b, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%q: %v", b, err)
		}
		return m
	}
	for _, bad := range []struct{ origin, token string }{{"http://evil.example", p.Token}, {base, "wrong"}} {
		if c, resp, err := dial(bad.origin, bad.token); err == nil {
			c.CloseNow()
			t.Errorf("origin %s, token %s: let in", bad.origin, bad.token)
		} else if resp == nil || (resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusUnauthorized) {
			t.Errorf("origin %s, token %s: %v", bad.origin, bad.token, err)
		}
	}
	var windows []*websocket.Conn
	for range 2 {
		c, _, err := dial(base, p.Token)
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseNow()
		if m := read(c); m["type"] != "hello" || m["dir"] != "/home/u/my project" {
			t.Errorf("hello: %v", m)
		}
		windows = append(windows, c)
	}
	done := make(chan struct{})
	go func() {
		p.Stopping(ctx, Farewell{Reason: "cove up was interrupted", Close: true})
		close(done)
	}()
	for _, c := range windows {
		if m := read(c); m["type"] != "stopping" || m["reason"] != "cove up was interrupted" || m["close"] != true {
			t.Errorf("farewell: %v", m)
		}
		if _, _, err := c.Read(ctx); websocket.CloseStatus(err) != websocket.StatusGoingAway {
			t.Errorf("after the farewell: %v, want going away", err)
		}
	}
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("Stopping did not return once the windows were told")
	}
	// Late: told at once; a second Stopping keeps the first farewell.
	p.Stopping(ctx, Farewell{Reason: "other"})
	c, _, err := dial(base, p.Token)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if m := read(c); m["type"] != "stopping" || m["reason"] != "cove up was interrupted" {
		t.Errorf("a window during the shutdown: %v", m)
	}
	if reached {
		t.Error("the lifeline was forwarded to the workspace")
	}
}
