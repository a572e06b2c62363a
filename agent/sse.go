package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// sseEvent is one server-sent event.
type sseEvent struct {
	Event string
	Data  string
}

// readSSE calls fn for each event of an SSE stream until it ends, fn
// returns an error, or the data says [DONE] (OpenAI's end marker).
func readSSE(r io.Reader, fn func(sseEvent) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var ev sseEvent
	var data []string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if len(data) > 0 || ev.Event != "" {
				ev.Data = strings.Join(data, "\n")
				if ev.Data == "[DONE]" {
					return nil
				}
				if err := fn(ev); err != nil {
					return err
				}
			}
			ev, data = sseEvent{}, nil
		case strings.HasPrefix(line, ":"):
			// a comment (keep-alive)
		case strings.HasPrefix(line, "event:"):
			ev.Event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if len(data) > 0 {
		ev.Data = strings.Join(data, "\n")
		if ev.Data != "[DONE]" {
			return fn(ev)
		}
	}
	return nil
}

// post sends a JSON body asking for an event stream. An answer other than
// 200 comes back as an *APIError; the caller closes the body of a 200.
func post(ctx context.Context, client *http.Client, provider, url string, body []byte, header map[string]string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	return do(client, provider, req, header)
}

// do sends req with header added. An answer other than 200 comes back as
// an *APIError; the caller closes the body of a 200.
func do(client *http.Client, provider string, req *http.Request, header map[string]string) (*http.Response, error) {
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", provider, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, apiError(provider, resp)
	}
	return resp, nil
}

// apiError reads an error answer: the JSON error shapes of both APIs,
// whatever the provider's body says (bounded), and Retry-After.
func apiError(provider string, resp *http.Response) *APIError {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := &APIError{Provider: provider, Status: resp.StatusCode, RetryAfter: retryAfter(resp.Header)}
	var parsed struct {
		Error json.RawMessage `json:"error"`
		Type  string          `json:"type"`
	}
	if json.Unmarshal(body, &parsed) == nil && len(parsed.Error) > 0 {
		var obj struct {
			Message string          `json:"message"`
			Type    string          `json:"type"`
			Code    json.RawMessage `json:"code"`
		}
		if json.Unmarshal(parsed.Error, &obj) == nil {
			e.Message, e.Type = obj.Message, obj.Type
			var code string
			if json.Unmarshal(obj.Code, &code) == nil && code != "" {
				e.Type = code
			}
		} else {
			var s string
			json.Unmarshal(parsed.Error, &s)
			e.Message = s
		}
	}
	if e.Message == "" {
		e.Message = strings.TrimSpace(string(body))
		if len(e.Message) > 300 {
			e.Message = e.Message[:300] + "…"
		}
	}
	return e
}

// streamError is an error event inside a stream.
func streamError(provider, data string) error {
	var parsed struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	json.Unmarshal([]byte(data), &parsed)
	status := 500
	if parsed.Error.Type == "overloaded_error" {
		status = 529
	}
	return &APIError{Provider: provider, Status: status, Type: parsed.Error.Type, Message: fmt.Sprint(parsed.Error.Message)}
}
