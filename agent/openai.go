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

// once makes one attempt: it posts the request and reads the stream into
// a reply. emitted says whether anything reached the caller (then the
// attempt is not retried).
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
	s := &oaStream{reply: &Reply{Message: Message{Role: "assistant"}}, calls: map[int]*oaToolCall{}, emit: emit}
	if err := readSSE(resp.Body, s.chunk); err != nil {
		return nil, s.emitted, err
	}
	return s.finish(), s.emitted, nil
}

// oaChunk is one chunk of a /chat/completions stream, as cove reads it.
type oaChunk struct {
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

// oaStream is a reply as its chunks arrive: the text and thinking so far
// (emitted as they come), and the tool calls, which arrive in pieces by
// index and are emitted whole at the end.
type oaStream struct {
	reply          *Reply
	text, thinking strings.Builder
	calls          map[int]*oaToolCall
	think          thinkSplitter
	emit           func(Event)
	emitted        bool
}

// out records and emits text or thinking.
func (s *oaStream) out(ev Event) {
	s.emitted = true
	if ev.Kind == EventThinking {
		s.thinking.WriteString(ev.Text)
	} else {
		s.text.WriteString(ev.Text)
	}
	s.emit(ev)
}

// chunk takes one chunk: usage, reasoning, content (its <think> spans
// as thinking), tool call pieces, and the finish reason.
func (s *oaStream) chunk(ev sseEvent) error {
	var chunk oaChunk
	if err := json.Unmarshal([]byte(ev.Data), &chunk); err != nil {
		return fmt.Errorf("openai: bad stream chunk: %w", err)
	}
	if len(chunk.Error) > 0 {
		return streamError("openai", ev.Data)
	}
	if u := chunk.Usage; u != nil {
		s.reply.Usage.Input, s.reply.Usage.Output = u.Prompt, u.Completion
		if u.Details != nil {
			s.reply.Usage.CacheRead = u.Details.Cached
		}
	}
	for _, c := range chunk.Choices {
		d := c.Delta
		if r := d.ReasoningContent + d.Reasoning; r != "" {
			s.out(Event{Kind: EventThinking, Text: r})
		}
		if d.Content != "" {
			s.think.split(d.Content, s.out)
		}
		for _, tc := range d.ToolCalls {
			s.toolCallPiece(tc)
		}
		if c.FinishReason != nil {
			s.reply.Stop = map[string]string{"stop": "end", "tool_calls": "tool_use", "length": "max_tokens"}[*c.FinishReason]
			if s.reply.Stop == "" {
				s.reply.Stop = *c.FinishReason
			}
		}
	}
	return nil
}

// toolCallPiece adds a piece of a tool call to the call of its index (0
// when the server gives none): its id, and more of its name and
// arguments.
func (s *oaStream) toolCallPiece(tc oaToolCall) {
	i := 0
	if tc.Index != nil {
		i = *tc.Index
	}
	acc, ok := s.calls[i]
	if !ok {
		acc = &oaToolCall{}
		s.calls[i] = acc
	}
	if tc.ID != "" {
		acc.ID = tc.ID
	}
	acc.Function.Name += tc.Function.Name
	acc.Function.Arguments += tc.Function.Arguments
}

// finish flushes a held-back partial <think> tag, emits the tool calls in
// index order (no arguments: an empty object), and completes the reply; a
// reply with calls and no finish reason stopped for them.
func (s *oaStream) finish() *Reply {
	s.think.flush(s.out)
	idx := make([]int, 0, len(s.calls))
	for i := range s.calls {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx {
		c := s.calls[i]
		args := json.RawMessage(c.Function.Arguments)
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		call := ToolCall{ID: c.ID, Name: c.Function.Name, Args: args}
		s.reply.Message.ToolCalls = append(s.reply.Message.ToolCalls, call)
		s.emitted = true
		s.emit(Event{Kind: EventToolCall, Call: &call})
	}
	s.reply.Message.Content, s.reply.Message.Thinking = s.text.String(), s.thinking.String()
	if s.reply.Stop == "" && len(s.calls) > 0 {
		s.reply.Stop = "tool_use"
	}
	return s.reply
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
