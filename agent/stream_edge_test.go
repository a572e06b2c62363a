package agent

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cove-sh/cove/internal/llmtest"
)

// onceEvents runs one attempt of a provider's stream (once: no retry)
// against a scripted server answering with events, and gathers what it
// emitted.
type onceResult struct {
	reply          *Reply
	emitted        bool
	err            error
	text, thinking string
	calls          []ToolCall
}

func runOnce(t *testing.T, once func(ctx context.Context, url string, emit func(Event)) (*Reply, bool, error), events []llmtest.SSE) onceResult {
	t.Helper()
	srv := llmtest.New(t)
	srv.Push(llmtest.Response{Events: events})
	var r onceResult
	var text, thinking strings.Builder
	r.reply, r.emitted, r.err = once(context.Background(), srv.URL(), func(ev Event) {
		switch ev.Kind {
		case EventText:
			text.WriteString(ev.Text)
		case EventThinking:
			thinking.WriteString(ev.Text)
		case EventToolCall:
			r.calls = append(r.calls, *ev.Call)
		}
	})
	r.text, r.thinking = text.String(), thinking.String()
	return r
}

func openAIOnce(ctx context.Context, url string, emit func(Event)) (*Reply, bool, error) {
	return (&OpenAI{BaseURL: url}).once(ctx, []byte(`{}`), emit)
}

func anthropicOnce(ctx context.Context, url string, emit func(Event)) (*Reply, bool, error) {
	return (&Anthropic{BaseURL: url}).once(ctx, []byte(`{}`), emit)
}

func data(s string) llmtest.SSE { return llmtest.SSE{Data: s} }

// TestOpenAIStreamEdgeCases: the chunk parser's less common paths: the
// "reasoning" field, a <think> left open (flushed as thinking), cached
// tokens, finish reasons mapped or passed through, tool calls with no
// index, no arguments, out of order, and no finish reason (tool_use); an
// error chunk and a chunk that is not JSON fail the attempt, and say
// whether anything reached the caller.
func TestOpenAIStreamEdgeCases(t *testing.T) {
	t.Parallel()
	r := runOnce(t, openAIOnce, []llmtest.SSE{
		data(`{"choices":[{"delta":{"reasoning":"r1"}}]}`),
		data(`{"choices":[{"delta":{"content":"x<think>y"}}]}`),
		data(`{"choices":[{"delta":{},"finish_reason":"length"}]}`),
		data(`{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":5}}}`),
		data(`[DONE]`),
	})
	if r.err != nil || r.text != "x" || r.thinking != "r1y" || r.reply.Message.Content != "x" || r.reply.Message.Thinking != "r1y" ||
		r.reply.Stop != "max_tokens" || r.reply.Usage != (Usage{Input: 7, Output: 3, CacheRead: 5}) || !r.emitted {
		t.Errorf("reasoning, open think, length, cached: %+v", r)
	}

	r = runOnce(t, openAIOnce, []llmtest.SSE{
		data(`{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"b","function":{"name":"two","arguments":"{\"n\":2}"}}]}}]}`),
		data(`{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"one"}}]}}]}`),
		data(`[DONE]`),
	})
	if r.err != nil || len(r.calls) != 2 || r.calls[0].ID != "a" || string(r.calls[0].Args) != "{}" || r.calls[1].Name != "two" ||
		string(r.calls[1].Args) != `{"n":2}` || r.reply.Stop != "tool_use" || len(r.reply.Message.ToolCalls) != 2 || !r.emitted {
		t.Errorf("tool calls: %+v %+v", r, r.reply)
	}

	for finish, want := range map[string]string{"stop": "end", "tool_calls": "tool_use", "content_filter": "content_filter"} {
		r = runOnce(t, openAIOnce, []llmtest.SSE{data(`{"choices":[{"delta":{},"finish_reason":"` + finish + `"}]}`)})
		if r.err != nil || r.reply.Stop != want || r.emitted {
			t.Errorf("finish %s: stop %q emitted %v (%v), want %q", finish, r.reply.Stop, r.emitted, r.err, want)
		}
	}

	r = runOnce(t, openAIOnce, []llmtest.SSE{
		data(`{"choices":[{"delta":{"content":"half"}}]}`),
		data(`{"error":{"message":"boom","type":"server_error"}}`),
	})
	var ae *APIError
	if !errors.As(r.err, &ae) || ae.Message != "boom" || !r.emitted || r.reply != nil {
		t.Errorf("error chunk: %v, emitted %v", r.err, r.emitted)
	}
	r = runOnce(t, openAIOnce, []llmtest.SSE{data(`not json`)})
	if r.err == nil || !strings.Contains(r.err.Error(), "openai: bad stream chunk") || r.emitted {
		t.Errorf("bad chunk: %v, emitted %v", r.err, r.emitted)
	}
}

// TestAnthropicStreamEdgeCases: the event parser's less common paths:
// cached input counted into Input, a tool_use with no input (an empty
// object), a stop for a block never started ignored, stop reasons mapped
// or passed through, nothing emitted for a reply without content; a delta
// for a block never started, an error event (overloaded: 529) and an
// event that is not JSON fail the attempt.
func TestAnthropicStreamEdgeCases(t *testing.T) {
	t.Parallel()
	ev := llmtest.AnthropicEvent
	r := runOnce(t, anthropicOnce, []llmtest.SSE{
		ev("message_start", map[string]any{"message": map[string]any{"usage": map[string]any{"input_tokens": 10,
			"cache_read_input_tokens": 20, "cache_creation_input_tokens": 5}}}),
		ev("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "tool_use", "id": "tu", "name": "ls"}}),
		ev("content_block_stop", map[string]any{"index": 0}),
		ev("content_block_stop", map[string]any{"index": 9}),
		ev("message_delta", map[string]any{"delta": map[string]any{"stop_reason": "stop_sequence"}, "usage": map[string]any{"output_tokens": 4}}),
	})
	if r.err != nil || len(r.calls) != 1 || string(r.calls[0].Args) != "{}" || r.calls[0].Name != "ls" ||
		r.reply.Usage != (Usage{Input: 35, Output: 4, CacheRead: 20}) || r.reply.Stop != "end" || !r.emitted {
		t.Errorf("cached input, empty tool input, stop_sequence: %+v %+v", r, r.reply)
	}

	r = runOnce(t, anthropicOnce, []llmtest.SSE{
		ev("message_delta", map[string]any{"delta": map[string]any{"stop_reason": "refusal"}, "usage": map[string]any{"output_tokens": 1}}),
	})
	if r.err != nil || r.reply.Stop != "refusal" || r.emitted {
		t.Errorf("refusal: stop %q emitted %v (%v)", r.reply.Stop, r.emitted, r.err)
	}

	r = runOnce(t, anthropicOnce, []llmtest.SSE{
		ev("content_block_delta", map[string]any{"index": 3, "delta": map[string]any{"type": "text_delta", "text": "x"}}),
	})
	if r.err == nil || !strings.Contains(r.err.Error(), "anthropic: delta for unknown block 3") || r.emitted {
		t.Errorf("unknown block: %v", r.err)
	}
	r = runOnce(t, anthropicOnce, []llmtest.SSE{
		ev("error", map[string]any{"error": map[string]any{"type": "overloaded_error", "message": "Overloaded"}}),
	})
	var ae *APIError
	if !errors.As(r.err, &ae) || ae.Status != 529 || ae.Message != "Overloaded" {
		t.Errorf("error event: %v", r.err)
	}
	r = runOnce(t, anthropicOnce, []llmtest.SSE{{Event: "x", Data: "not json"}})
	if r.err == nil || !strings.Contains(r.err.Error(), "anthropic: bad stream event") {
		t.Errorf("bad event: %v", r.err)
	}
}
