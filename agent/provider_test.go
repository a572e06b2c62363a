package agent

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cove-sh/cove/internal/llmtest"
)

var fast = Backoff{Base: 10 * time.Millisecond}

var readTool = ToolSpec{Name: "read", Description: "read a file", Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)}

// collect runs one Stream and gathers what it emitted.
func collect(t *testing.T, p Provider, req Request) (*Reply, string, string, []ToolCall, error) {
	t.Helper()
	var text, thinking strings.Builder
	var calls []ToolCall
	reply, err := p.Stream(context.Background(), req, func(ev Event) {
		switch ev.Kind {
		case EventText:
			text.WriteString(ev.Text)
		case EventThinking:
			thinking.WriteString(ev.Text)
		case EventToolCall:
			calls = append(calls, *ev.Call)
		}
	})
	return reply, text.String(), thinking.String(), calls, err
}

func TestOpenAIStreamsTextThinkingAndToolCalls(t *testing.T) {
	srv := llmtest.New(t)
	idx0, idx1 := 0, 1
	srv.Push(llmtest.Response{Events: llmtest.OpenAIChunks("tool_calls",
		map[string]any{"reasoning_content": "let me "},
		map[string]any{"reasoning_content": "look"},
		map[string]any{"content": "<thi"},
		map[string]any{"content": "nk>inline</th"},
		map[string]any{"content": "ink>Reading "},
		map[string]any{"content": "the file."},
		map[string]any{"tool_calls": []any{map[string]any{"index": idx0, "id": "call_1", "type": "function", "function": map[string]any{"name": "read", "arguments": `{"pa`}}}},
		map[string]any{"tool_calls": []any{map[string]any{"index": idx0, "function": map[string]any{"arguments": `th":"a.go"}`}}}},
		map[string]any{"tool_calls": []any{map[string]any{"index": idx1, "id": "call_2", "function": map[string]any{"name": "read", "arguments": `{"path":"b.go"}`}}}},
	)})
	p := &OpenAI{BaseURL: srv.URL() + "/v1", APIKey: "sk-test", Backoff: fast}
	req := Request{Model: "m", System: "be brief", Tools: []ToolSpec{readTool}, Messages: []Message{
		{Role: "user", Content: "fix it"},
		{Role: "assistant", ToolCalls: []ToolCall{{ID: "c0", Name: "read", Args: json.RawMessage(`{"path":"x"}`)}}},
		{Role: "tool", ToolCallID: "c0", Content: "no such file", IsError: true},
	}}
	reply, text, thinking, calls, err := collect(t, p, req)
	if err != nil {
		t.Fatal(err)
	}
	if text != "Reading the file." || reply.Message.Content != text {
		t.Errorf("text %q / %q", text, reply.Message.Content)
	}
	if thinking != "let me lookinline" {
		t.Errorf("thinking %q", thinking)
	}
	if len(calls) != 2 || calls[0].ID != "call_1" || string(calls[0].Args) != `{"path":"a.go"}` || calls[1].ID != "call_2" {
		t.Errorf("tool calls %+v", calls)
	}
	if reply.Stop != "tool_use" || reply.Usage.Input != 12 || reply.Usage.Output != 34 {
		t.Errorf("stop %q usage %+v", reply.Stop, reply.Usage)
	}
	got := srv.Requests()[0]
	if got.Path != "/v1/chat/completions" || got.Header.Get("Authorization") != "Bearer sk-test" {
		t.Errorf("request %s %v", got.Path, got.Header)
	}
	body := got.JSON(t)
	msgs := body["messages"].([]any)
	if len(msgs) != 4 || msgs[0].(map[string]any)["role"] != "system" || msgs[3].(map[string]any)["role"] != "tool" ||
		msgs[3].(map[string]any)["tool_call_id"] != "c0" || msgs[2].(map[string]any)["content"] != nil {
		t.Errorf("messages sent: %v", msgs)
	}
	if tools := body["tools"].([]any); len(tools) != 1 || body["stream"] != true {
		t.Errorf("tools/stream sent: %v", body)
	}
}

func TestAnthropicStreamsThinkingTextAndToolUse(t *testing.T) {
	srv := llmtest.New(t)
	ev := llmtest.AnthropicEvent
	srv.Push(llmtest.Response{Events: []llmtest.SSE{
		ev("message_start", map[string]any{"message": map[string]any{"usage": map[string]any{"input_tokens": 20}}}),
		ev("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "thinking", "thinking": ""}}),
		ev("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "thinking_delta", "thinking": "hmm"}}),
		ev("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "signature_delta", "signature": "sig123"}}),
		ev("content_block_stop", map[string]any{"index": 0}),
		{Event: "ping", Data: `{"type":"ping"}`},
		ev("content_block_start", map[string]any{"index": 1, "content_block": map[string]any{"type": "text", "text": ""}}),
		ev("content_block_delta", map[string]any{"index": 1, "delta": map[string]any{"type": "text_delta", "text": "Let me read."}}),
		ev("content_block_stop", map[string]any{"index": 1}),
		ev("content_block_start", map[string]any{"index": 2, "content_block": map[string]any{"type": "tool_use", "id": "toolu_1", "name": "read", "input": map[string]any{}}}),
		ev("content_block_delta", map[string]any{"index": 2, "delta": map[string]any{"type": "input_json_delta", "partial_json": `{"path":`}}),
		ev("content_block_delta", map[string]any{"index": 2, "delta": map[string]any{"type": "input_json_delta", "partial_json": `"a.go"}`}}),
		ev("content_block_stop", map[string]any{"index": 2}),
		ev("message_delta", map[string]any{"delta": map[string]any{"stop_reason": "tool_use"}, "usage": map[string]any{"output_tokens": 7}}),
		ev("message_stop", nil),
	}})
	p := &Anthropic{BaseURL: srv.URL(), APIKey: "ak-test", Backoff: fast}
	req := Request{Model: "claude", System: "sys", Tools: []ToolSpec{readTool}, Messages: []Message{
		{Role: "user", Content: "go"},
		{Role: "assistant", Thinking: "before", Signature: "sig0", ToolCalls: []ToolCall{{ID: "t0", Name: "read", Args: json.RawMessage(`{}`)}}},
		{Role: "tool", ToolCallID: "t0", Content: "ok"},
	}}
	reply, text, thinking, calls, err := collect(t, p, req)
	if err != nil {
		t.Fatal(err)
	}
	if text != "Let me read." || thinking != "hmm" || reply.Message.Signature != "sig123" {
		t.Errorf("text %q thinking %q signature %q", text, thinking, reply.Message.Signature)
	}
	if len(calls) != 1 || calls[0].ID != "toolu_1" || string(calls[0].Args) != `{"path":"a.go"}` {
		t.Errorf("calls %+v", calls)
	}
	if reply.Stop != "tool_use" || reply.Usage.Input != 20 || reply.Usage.Output != 7 {
		t.Errorf("stop %q usage %+v", reply.Stop, reply.Usage)
	}
	got := srv.Requests()[0]
	if got.Path != "/v1/messages" || got.Header.Get("x-api-key") != "ak-test" || got.Header.Get("anthropic-version") == "" {
		t.Errorf("request %s %v", got.Path, got.Header)
	}
	body := got.JSON(t)
	msgs := body["messages"].([]any)
	asst := msgs[1].(map[string]any)["content"].([]any)
	if first := asst[0].(map[string]any); first["type"] != "thinking" || first["signature"] != "sig0" {
		t.Errorf("the thinking block was not sent back first with its signature: %v", asst)
	}
	if res := msgs[2].(map[string]any)["content"].([]any)[0].(map[string]any); res["type"] != "tool_result" || res["tool_use_id"] != "t0" {
		t.Errorf("tool result sent as %v", res)
	}
	if body["system"] != "sys" {
		t.Errorf("system %v", body["system"])
	}
}

func TestProviderRetriesHonouringRetryAfter(t *testing.T) {
	srv := llmtest.New(t)
	srv.Push(
		llmtest.Response{Status: 429, Header: map[string]string{"Retry-After": "1"}, Body: `{"error":{"type":"rate_limit_error","message":"slow down"}}`},
		llmtest.Response{Status: 503, Body: `{"error":{"message":"busy"}}`},
		llmtest.Response{Events: llmtest.OpenAIChunks("stop", map[string]any{"content": "fine"}), CutAfter: 0},
	)
	p := &OpenAI{BaseURL: srv.URL(), Backoff: fast}
	start := time.Now()
	_, text, _, _, err := collect(t, p, Request{Model: "m", Messages: []Message{{Role: "user", Content: "hi"}}})
	if err != nil || text != "fine" {
		t.Fatalf("after 429 and 503: %q %v", text, err)
	}
	if d := time.Since(start); d < time.Second {
		t.Errorf("retried after %v, before Retry-After's 1 s", d)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Errorf("%d requests, want 3", n)
	}
}

func TestProviderErrorsSayWhatToDo(t *testing.T) {
	cases := []struct {
		resp llmtest.Response
		want string
		is   error
	}{
		{llmtest.Response{Status: 401, Body: `{"error":{"message":"Incorrect API key provided: sk-se***","type":"invalid_request_error","code":"invalid_api_key"}}`}, "API key was refused", nil},
		{llmtest.Response{Status: 404, Body: `{"error":{"message":"The model x does not exist","code":"model_not_found"}}`}, "no such model", nil},
		{llmtest.Response{Status: 400, Body: `{"error":{"message":"This model's maximum context length is 8192 tokens","code":"context_length_exceeded"}}`}, "maximum context", ErrContextTooLong},
	}
	for _, tc := range cases {
		srv := llmtest.New(t)
		srv.Push(tc.resp)
		p := &OpenAI{BaseURL: srv.URL(), APIKey: "sk-secret-key", Backoff: fast}
		_, _, _, _, err := collect(t, p, Request{Model: "m", Messages: []Message{{Role: "user", Content: "hi"}}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("HTTP %d: %v, want it to say %q", tc.resp.Status, err, tc.want)
		}
		if tc.is != nil && !errors.Is(err, tc.is) {
			t.Errorf("HTTP %d: %v is not %v", tc.resp.Status, err, tc.is)
		}
		if err != nil && strings.Contains(err.Error(), "sk-secret-key") {
			t.Errorf("the key leaked into the error: %v", err)
		}
		if n := len(srv.Requests()); n != 1 {
			t.Errorf("HTTP %d was retried (%d requests)", tc.resp.Status, n)
		}
	}
	// Anthropic's too-long error is a plain 400 with a message.
	srv := llmtest.New(t)
	srv.Push(llmtest.Response{Status: 400, Body: `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 250000 tokens > 200000 maximum"}}`})
	_, _, _, _, err := collect(t, &Anthropic{BaseURL: srv.URL(), Backoff: fast}, Request{Model: "c", Messages: []Message{{Role: "user", Content: "hi"}}})
	if !errors.Is(err, ErrContextTooLong) {
		t.Errorf("anthropic too long: %v", err)
	}
}

// TestProviderDoesNotRetryAStartedStream: once text reached the caller, a
// dropped connection is an error, not a silent replay.
func TestProviderDoesNotRetryAStartedStream(t *testing.T) {
	srv := llmtest.New(t)
	srv.Push(llmtest.Response{Events: llmtest.OpenAIChunks("stop", map[string]any{"content": "half"}, map[string]any{"content": " and more"}), CutAfter: 1})
	_, text, _, _, err := collect(t, &OpenAI{BaseURL: srv.URL(), Backoff: fast}, Request{Model: "m"})
	if err == nil {
		t.Fatalf("a cut stream succeeded with %q", text)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("%d requests: a started stream was retried", n)
	}
}

func TestThinkSplitter(t *testing.T) {
	for _, chunks := range [][]string{
		{"a<think>b</think>c"},
		{"a<", "think>b<", "/think>c"},
		{"a", "<th", "ink", ">", "b", "</thin", "k>", "c"},
	} {
		var text, thinking strings.Builder
		ts := &thinkSplitter{}
		out := func(ev Event) {
			if ev.Kind == EventThinking {
				thinking.WriteString(ev.Text)
			} else {
				text.WriteString(ev.Text)
			}
		}
		for _, c := range chunks {
			ts.split(c, out)
		}
		ts.flush(out)
		if text.String() != "ac" || thinking.String() != "b" {
			t.Errorf("%q: text %q thinking %q", chunks, text.String(), thinking.String())
		}
	}
}
