// Package agent is Cove's coding agent: LLM providers, the agent loop,
// tools, approvals and sessions. This file and its neighbours hold the
// providers: an OpenAI-compatible chat completions client and a native
// Anthropic Messages client, both streaming, behind one small interface.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Message is one turn of a conversation, in the provider-neutral form the
// loop keeps.
type Message struct {
	Role      string     `json:"role"` // "user", "assistant" or "tool"
	Content   string     `json:"content,omitempty"`
	Thinking  string     `json:"thinking,omitempty"`
	Signature string     `json:"signature,omitempty"` // Anthropic's, sent back with the thinking
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// For role "tool": which call this answers, and whether it failed.
	ToolCallID string `json:"tool_call_id,omitempty"`
	IsError    bool   `json:"is_error,omitempty"`
	// Exit is the exit status of the command a tool ran, as the shell
	// reported it (-1: killed when it timed out); nil for other tools.
	// It is kept for the record (a task's tests' status), never sent.
	Exit *int `json:"exit,omitempty"`
	// Images a tool's result holds (an MCP server's screenshot), for the
	// providers that take them in a tool result.
	Images []Image `json:"images,omitempty"`
}

// Image is a picture in a tool's result.
type Image struct {
	MIME string `json:"mime"` // image/png, image/jpeg, image/gif or image/webp
	Data []byte `json:"data"`
}

// ToolCall is the model asking to run a tool.
type ToolCall struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

// ToolSpec describes a tool to the model.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"` // JSON Schema of the arguments
}

// Request is one call to the model.
type Request struct {
	Model     string
	System    string
	Messages  []Message
	Tools     []ToolSpec
	MaxTokens int // 0: the provider's default (4096)
}

// Usage is what a call cost, in tokens.
type Usage struct {
	Input     int `json:"input"` // the whole prompt, cached parts included
	Output    int `json:"output"`
	CacheRead int `json:"cache_read,omitempty"` // of Input, read from the provider's cache
}

// EventKind says what a streamed Event carries.
type EventKind int

// The kinds of streamed events.
const (
	EventText     EventKind = iota // a piece of the answer
	EventThinking                  // a piece of the model's reasoning
	EventToolCall                  // a complete tool call
)

// Event is one piece of a streaming answer.
type Event struct {
	Kind EventKind
	Text string
	Call *ToolCall
}

// Reply is the complete answer to a Request.
type Reply struct {
	Message Message
	Usage   Usage
	Stop    string // why the model stopped: "end", "tool_use", "max_tokens"
}

// Provider is a model API. Stream sends the request, calls emit with each
// piece as it arrives (from the calling goroutine), and returns the whole
// reply. It retries what is worth retrying (429, 5xx, dropped connections
// before anything was emitted), honouring Retry-After.
type Provider interface {
	Stream(ctx context.Context, req Request, emit func(Event)) (*Reply, error)
}

// ErrContextTooLong is wrapped by errors for a request that does not fit
// the model's context window: the loop compacts and tries again.
var ErrContextTooLong = errors.New("the conversation is too long for the model")

// APIError is an error answer from a provider.
type APIError struct {
	Provider   string
	Status     int
	Type       string // the API's error type or code
	Message    string
	RetryAfter time.Duration // from the Retry-After header, if any
}

func (e *APIError) Error() string {
	msg := fmt.Sprintf("%s: HTTP %d", e.Provider, e.Status)
	if e.Type != "" {
		msg += " " + e.Type
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	switch {
	case e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden:
		msg += " (the API key was refused: check COVE_API_KEY, or the key's provider)"
	case e.Status == http.StatusNotFound:
		msg += " (no such model or endpoint: check COVE_MODEL and COVE_BASE_URL; cove agent --setup lists the models)"
	}
	return msg
}

// Temporary says whether the same request may succeed later.
func (e *APIError) Temporary() bool {
	return e.Status == http.StatusTooManyRequests || e.Status == 529 || e.Status >= 500
}

func (e *APIError) Unwrap() error {
	if e.tooLong() {
		return ErrContextTooLong
	}
	return nil
}

func (e *APIError) tooLong() bool {
	if e.Status == http.StatusRequestEntityTooLarge {
		return true
	}
	if e.Status != http.StatusBadRequest {
		return false
	}
	if e.Type == "context_length_exceeded" {
		return true
	}
	m := strings.ToLower(e.Message)
	for _, s := range []string{"context length", "context_length", "prompt is too long", "maximum context", "too many tokens"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date.
func retryAfter(h http.Header) time.Duration {
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		return time.Until(t)
	}
	return 0
}

// Backoff is how a provider retries.
type Backoff struct {
	Attempts int           // tries in all; default 5
	Base     time.Duration // first wait; default 1 s, doubling
	Max      time.Duration // longest wait; default 60 s
}

func (b Backoff) withDefaults() Backoff {
	if b.Attempts <= 0 {
		b.Attempts = 5
	}
	if b.Base <= 0 {
		b.Base = time.Second
	}
	if b.Max <= 0 {
		b.Max = 60 * time.Second
	}
	return b
}

// retry runs try until it succeeds, fails for good, or the attempts are
// used up. try reports whether it emitted anything: a stream that already
// reached the caller cannot be taken back, so it is not retried.
func retry(ctx context.Context, b Backoff, try func() (emitted bool, err error)) error {
	b = b.withDefaults()
	wait := b.Base
	var err error
	for attempt := 1; ; attempt++ {
		var emitted bool
		emitted, err = try()
		if err == nil || emitted || attempt >= b.Attempts || !retryable(err) {
			return err
		}
		d := wait
		var ae *APIError
		if errors.As(err, &ae) && ae.RetryAfter > 0 {
			d = ae.RetryAfter
		}
		if d > b.Max {
			d = b.Max
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
		wait *= 2
	}
}

// streamWithRetry runs one streaming call under retry.
func streamWithRetry(ctx context.Context, b Backoff, once func() (*Reply, bool, error)) (*Reply, error) {
	var reply *Reply
	err := retry(ctx, b, func() (bool, error) {
		var emitted bool
		var err error
		reply, emitted, err = once()
		return emitted, err
	})
	return reply, err
}

func retryable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Temporary()
	}
	return true // the connection failed or dropped
}
