// Package llmtest is a scripted LLM server for tests: a real HTTP server
// that answers each request with the next response of its script,
// streaming server-sent events as the OpenAI and Anthropic APIs do, and
// records the requests it got.
package llmtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// SSE is one server-sent event; Event may be empty (OpenAI sends none).
type SSE struct {
	Event string
	Data  string
}

// Response is one scripted answer: a status with a body (errors, or a
// plain JSON answer when Status is 0 or 200), or a
// stream of events. CutAfter > 0 drops the connection after that many
// events; Hang keeps it open after the events until the client leaves.
type Response struct {
	Status   int
	Header   map[string]string
	Body     string
	Events   []SSE
	CutAfter int
	Hang     bool
}

// Request is a request the server received.
type Request struct {
	Path   string
	Header http.Header
	Body   []byte
}

// JSON decodes the request body.
func (r Request) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("request body: %v", err)
	}
	return m
}

// ToolResults are the contents of the tool messages the request sent
// (OpenAI's chat form: the results the model saw), in order.
func (r Request) ToolResults(t testing.TB) []string {
	t.Helper()
	var out []string
	for _, m := range r.JSON(t)["messages"].([]any) {
		if mm := m.(map[string]any); mm["role"] == "tool" {
			content, _ := mm["content"].(string)
			out = append(out, content)
		}
	}
	return out
}

// Server replays a script. It is safe for concurrent use.
type Server struct {
	srv      *httptest.Server
	mu       sync.Mutex
	script   []Response
	requests []Request
}

// New starts a server, closed when the test ends.
func New(t testing.TB) *Server {
	s := &Server{}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

// URL is the server's base URL.
func (s *Server) URL() string { return s.srv.URL }

// Push appends responses to the script.
func (s *Server) Push(rs ...Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, rs...)
}

// Requests returns what the server received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	// Only the APIs' own paths take from the script; another (a probe for
	// Ollama's /api/version, say) is not found, as at OpenAI's.
	if !strings.HasSuffix(r.URL.Path, "/chat/completions") && !strings.HasSuffix(r.URL.Path, "/models") && !strings.HasSuffix(r.URL.Path, "/messages") {
		http.NotFound(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.requests = append(s.requests, Request{Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
	if len(s.script) == 0 {
		s.mu.Unlock()
		http.Error(w, `{"error":{"message":"the script has no more responses"}}`, http.StatusTeapot)
		return
	}
	resp := s.script[0]
	s.script = s.script[1:]
	s.mu.Unlock()

	for k, v := range resp.Header {
		w.Header().Set(k, v)
	}
	if resp.Body != "" || (resp.Status != 0 && resp.Status != http.StatusOK) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(max(resp.Status, http.StatusOK))
		io.WriteString(w, resp.Body)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	for i, ev := range resp.Events {
		if resp.CutAfter > 0 && i == resp.CutAfter {
			if conn, _, err := rc.Hijack(); err == nil {
				conn.Close()
			}
			return
		}
		if ev.Event != "" {
			fmt.Fprintf(w, "event: %s\n", ev.Event)
		}
		fmt.Fprintf(w, "data: %s\n\n", ev.Data)
		rc.Flush()
	}
	if resp.Hang {
		<-r.Context().Done()
	}
}

// OpenAIChunks turns deltas into a chat.completion.chunk stream ending
// with finish, a usage chunk and [DONE].
func OpenAIChunks(finish string, deltas ...map[string]any) []SSE {
	var out []SSE
	for _, d := range deltas {
		b, _ := json.Marshal(map[string]any{"object": "chat.completion.chunk", "choices": []any{map[string]any{"index": 0, "delta": d}}})
		out = append(out, SSE{Data: string(b)})
	}
	b, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": finish}}})
	out = append(out, SSE{Data: string(b)})
	u, _ := json.Marshal(map[string]any{"choices": []any{}, "usage": map[string]any{"prompt_tokens": 12, "completion_tokens": 34}})
	return append(out, SSE{Data: string(u)}, SSE{Data: "[DONE]"})
}

// AnthropicEvent makes one Messages API stream event.
func AnthropicEvent(typ string, fields map[string]any) SSE {
	m := map[string]any{"type": typ}
	for k, v := range fields {
		m[k] = v
	}
	b, _ := json.Marshal(m)
	return SSE{Event: typ, Data: string(b)}
}

// Ollama is an Ollama in front of s: it answers as Ollama does about
// itself (its version, and parameters for any model, as /api/show gives
// them: "num_ctx 8192"), and passes the OpenAI-compatible API on to s.
func Ollama(t testing.TB, s *Server, parameters string) *httptest.Server {
	target, _ := url.Parse(s.URL())
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/version", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"version":"0.9.6"}`) })
	mux.HandleFunc("POST /api/show", func(w http.ResponseWriter, r *http.Request) {
		b, _ := json.Marshal(map[string]string{"parameters": parameters})
		w.Write(b)
	})
	mux.Handle("/", httputil.NewSingleHostReverseProxy(target))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}
