package mcpclient

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestHTTPServerMessagesAreBounded: an HTTP MCP server (a project's runs
// in the workspace, its answers relayed here) that answers with a JSON
// body, or one stream event, without end fails the connection once the
// message passes MaxMessage, instead of filling the launcher's memory (the
// SDK reads a JSON answer whole).
func TestHTTPServerMessagesAreBounded(t *testing.T) {
	for _, tc := range []struct{ kind, contentType, start string }{
		{"json", "application/json", `{"jsonrpc":"2.0","id":1,"result":{"x":"`},
		{"event", "text/event-stream", "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"x\":\""},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodPost {
					http.Error(w, "no", http.StatusMethodNotAllowed)
					return
				}
				w.Header().Set("Content-Type", tc.contentType)
				io.WriteString(w, tc.start)
				chunk := strings.Repeat("x", 1<<20)
				for range 300 {
					if _, err := io.WriteString(w, chunk); err != nil {
						return
					}
				}
			}))
			defer srv.Close()
			var before, after syscall.Rusage
			syscall.Getrusage(syscall.RUSAGE_SELF, &before)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			tr := HostTransport(ServerConfig{Type: "http", URL: srv.URL})
			cs, err := sdk.NewClient(&sdk.Implementation{Name: "test"}, nil).Connect(ctx, tr, nil)
			if err == nil {
				cs.Close()
				t.Fatal("connected to a server whose first answer never ends")
			}
			syscall.Getrusage(syscall.RUSAGE_SELF, &after)
			if grew := (after.Maxrss - before.Maxrss) << 10; grew > 150<<20 {
				t.Errorf("the launcher's memory grew by %d MB for a 300 MB answer", grew>>20)
			}
			t.Log(err)
		})
	}
}
