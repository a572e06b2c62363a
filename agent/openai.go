package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
)

// OpenAI speaks the OpenAI-compatible /chat/completions API, streaming
// with tool calls: OpenAI, OpenRouter, vLLM, llama.cpp, Ollama, LM Studio,
// Groq and DeepSeek all do. Reasoning arrives as reasoning_content,
// reasoning, or <think> tags in the content, and is emitted as thinking.
type OpenAI struct {
	BaseURL string       // e.g. https://api.openai.com/v1 (no trailing /chat/completions)
	APIKey  string       // sent as a Bearer token; never in an error
	Client  *http.Client // default http.DefaultClient
	Backoff Backoff
}

var _ Provider = (*OpenAI)(nil)

type oaMessage struct {
	Role       string       `json:"role"`
	Content    *string      `json:"content"`
	ToolCalls  []oaToolCall `json:"tool_calls,omitempty"`
	ToolCallID string       `json:"tool_call_id,omitempty"`
}

type oaToolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

func (p *OpenAI) body(req Request) ([]byte, error) {
	var msgs []oaMessage
	str := func(s string) *string { return &s }
	if req.System != "" {
		msgs = append(msgs, oaMessage{Role: "system", Content: str(req.System)})
	}
	for _, m := range req.Messages {
		om := oaMessage{Role: m.Role, Content: str(m.Content), ToolCallID: m.ToolCallID}
		if m.Role == "tool" && m.IsError {
			om.Content = str("error: " + m.Content)
		}
		for _, im := range m.Images {
			// Chat completions take text alone in a tool's answer.
			*om.Content += fmt.Sprintf("\n[an image (%s, %d bytes) was left out: this API takes no images in a tool's result]", im.MIME, len(im.Data))
		}
		for _, c := range m.ToolCalls {
			tc := oaToolCall{ID: c.ID, Type: "function"}
			tc.Function.Name, tc.Function.Arguments = c.Name, string(c.Args)
			om.ToolCalls = append(om.ToolCalls, tc)
		}
		if m.Role == "assistant" && m.Content == "" && len(m.ToolCalls) > 0 {
			om.Content = nil
		}
		msgs = append(msgs, om)
	}
	type fn struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	type tool struct {
		Type     string `json:"type"`
		Function fn     `json:"function"`
	}
	var tools []tool
	for _, t := range req.Tools {
		tools = append(tools, tool{"function", fn{t.Name, t.Description, t.Schema}})
	}
	maxTokens := req.MaxTokens
	if maxTokens == 0 {
		maxTokens = 4096
	}
	return json.Marshal(map[string]any{
		"model": req.Model, "messages": msgs, "tools": tools, "stream": true,
		"max_tokens": maxTokens, "stream_options": map[string]bool{"include_usage": true},
	})
}

// Stream implements Provider.
func (p *OpenAI) Stream(ctx context.Context, req Request, emit func(Event)) (*Reply, error) {
	body, err := p.body(req)
	if err != nil {
		return nil, err
	}
	return streamWithRetry(ctx, p.Backoff, func() (*Reply, bool, error) { return p.once(ctx, body, emit) })
}

func (p *OpenAI) once(ctx context.Context, body []byte, emit func(Event)) (*Reply, bool, error) {
	header := map[string]string{}
	if p.APIKey != "" {
		header["Authorization"] = "Bearer " + p.APIKey
	}
	resp, err := post(ctx, p.Client, "openai", strings.TrimSuffix(p.BaseURL, "/")+"/chat/completions", body, header)
	if err != nil {
		return nil, false, err
	}
	defer resp.Body.Close()

	reply := &Reply{Message: Message{Role: "assistant"}}
	var text, thinking strings.Builder
	calls := map[int]*oaToolCall{}
	emitted := false
	think := &thinkSplitter{}
	out := func(ev Event) {
		emitted = true
		if ev.Kind == EventThinking {
			thinking.WriteString(ev.Text)
		} else {
			text.WriteString(ev.Text)
		}
		emit(ev)
	}
	err = readSSE(resp.Body, func(ev sseEvent) error {
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content          string       `json:"content"`
					ReasoningContent string       `json:"reasoning_content"`
					Reasoning        string       `json:"reasoning"`
					ToolCalls        []oaToolCall `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *struct {
				Prompt     int `json:"prompt_tokens"`
				Completion int `json:"completion_tokens"`
				Details    *struct {
					Cached int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
			Error json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal([]byte(ev.Data), &chunk); err != nil {
			return fmt.Errorf("openai: bad stream chunk: %w", err)
		}
		if len(chunk.Error) > 0 {
			return streamError("openai", ev.Data)
		}
		if u := chunk.Usage; u != nil {
			reply.Usage.Input, reply.Usage.Output = u.Prompt, u.Completion
			if u.Details != nil {
				reply.Usage.CacheRead = u.Details.Cached
			}
		}
		for _, c := range chunk.Choices {
			d := c.Delta
			if r := d.ReasoningContent + d.Reasoning; r != "" {
				out(Event{Kind: EventThinking, Text: r})
			}
			if d.Content != "" {
				think.split(d.Content, out)
			}
			for _, tc := range d.ToolCalls {
				i := 0
				if tc.Index != nil {
					i = *tc.Index
				}
				acc, ok := calls[i]
				if !ok {
					acc = &oaToolCall{}
					calls[i] = acc
				}
				if tc.ID != "" {
					acc.ID = tc.ID
				}
				acc.Function.Name += tc.Function.Name
				acc.Function.Arguments += tc.Function.Arguments
			}
			if c.FinishReason != nil {
				reply.Stop = map[string]string{"stop": "end", "tool_calls": "tool_use", "length": "max_tokens"}[*c.FinishReason]
				if reply.Stop == "" {
					reply.Stop = *c.FinishReason
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, emitted, err
	}
	think.flush(out)
	idx := make([]int, 0, len(calls))
	for i := range calls {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx {
		c := calls[i]
		args := json.RawMessage(c.Function.Arguments)
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		call := ToolCall{ID: c.ID, Name: c.Function.Name, Args: args}
		reply.Message.ToolCalls = append(reply.Message.ToolCalls, call)
		emitted = true
		emit(Event{Kind: EventToolCall, Call: &call})
	}
	reply.Message.Content, reply.Message.Thinking = text.String(), thinking.String()
	if reply.Stop == "" && len(calls) > 0 {
		reply.Stop = "tool_use"
	}
	return reply, emitted, nil
}

// thinkSplitter moves <think>…</think> spans out of the content into
// thinking, with tags that may be split across chunks.
type thinkSplitter struct {
	in      bool
	pending string // a possible partial tag held back
}

func (t *thinkSplitter) split(s string, out func(Event)) {
	s = t.pending + s
	t.pending = ""
	for s != "" {
		tag := "<think>"
		kind := EventText
		if t.in {
			tag, kind = "</think>", EventThinking
		}
		if i := strings.Index(s, tag); i >= 0 {
			if i > 0 {
				out(Event{Kind: kind, Text: s[:i]})
			}
			s, t.in = s[i+len(tag):], !t.in
			continue
		}
		// Hold back a tail that could be the start of the tag.
		keep := 0
		for k := len(tag) - 1; k > 0; k-- {
			if strings.HasSuffix(s, tag[:k]) {
				keep = k
				break
			}
		}
		if len(s) > keep {
			out(Event{Kind: kind, Text: s[:len(s)-keep]})
		}
		t.pending = s[len(s)-keep:]
		return
	}
}

func (t *thinkSplitter) flush(out func(Event)) {
	if t.pending != "" {
		kind := EventText
		if t.in {
			kind = EventThinking
		}
		out(Event{Kind: kind, Text: t.pending})
		t.pending = ""
	}
}
