package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Anthropic speaks the Anthropic Messages API natively: streaming, tool
// use, and thinking blocks, which are sent back with their signatures as
// the API requires.
type Anthropic struct {
	BaseURL string       // default https://api.anthropic.com
	APIKey  string       // sent as x-api-key; never in an error
	Client  *http.Client // default http.DefaultClient
	Backoff Backoff
	// Thinking, when above zero, asks for extended thinking with this
	// many tokens of budget.
	Thinking int
}

var _ Provider = (*Anthropic)(nil)

type anBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	Thinking  string          `json:"thinking,omitempty"`
	Signature string          `json:"signature,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"` // a tool result's: text, or text and image blocks
	IsError   bool            `json:"is_error,omitempty"`
	Source    *anSource       `json:"source,omitempty"` // an image's
}

type anSource struct {
	Type      string `json:"type"` // base64
	MediaType string `json:"media_type"`
	Data      []byte `json:"data"` // base64 in JSON, as the API wants
}

// toolResultContent is a tool result's content: its text, or, with
// images, text and image blocks (the Messages API takes both).
func toolResultContent(m Message) json.RawMessage {
	var v any = m.Content
	if len(m.Images) > 0 {
		var blocks []anBlock
		if m.Content != "" {
			blocks = append(blocks, anBlock{Type: "text", Text: m.Content})
		}
		for _, im := range m.Images {
			blocks = append(blocks, anBlock{Type: "image", Source: &anSource{Type: "base64", MediaType: im.MIME, Data: im.Data}})
		}
		v = blocks
	} else if m.Content == "" {
		return nil
	}
	b, _ := json.Marshal(v)
	return b
}

type anMessage struct {
	Role    string    `json:"role"`
	Content []anBlock `json:"content"`
}

func (p *Anthropic) body(req Request) ([]byte, error) {
	var msgs []anMessage
	add := func(role string, b anBlock) {
		// Consecutive tool results (role user) share one message.
		if n := len(msgs); n > 0 && msgs[n-1].Role == role {
			msgs[n-1].Content = append(msgs[n-1].Content, b)
			return
		}
		msgs = append(msgs, anMessage{Role: role, Content: []anBlock{b}})
	}
	for _, m := range req.Messages {
		switch m.Role {
		case "tool":
			add("user", anBlock{Type: "tool_result", ToolUseID: m.ToolCallID, Content: toolResultContent(m), IsError: m.IsError})
		case "assistant":
			var blocks []anBlock
			if m.Thinking != "" && m.Signature != "" {
				blocks = append(blocks, anBlock{Type: "thinking", Thinking: m.Thinking, Signature: m.Signature})
			}
			if m.Content != "" {
				blocks = append(blocks, anBlock{Type: "text", Text: m.Content})
			}
			for _, c := range m.ToolCalls {
				blocks = append(blocks, anBlock{Type: "tool_use", ID: c.ID, Name: c.Name, Input: c.Args})
			}
			msgs = append(msgs, anMessage{Role: "assistant", Content: blocks})
		default:
			add("user", anBlock{Type: "text", Text: m.Content})
		}
	}
	type tool struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
	var tools []tool
	for _, t := range req.Tools {
		tools = append(tools, tool{t.Name, t.Description, t.Schema})
	}
	maxTokens := req.MaxTokens
	if maxTokens == 0 {
		maxTokens = 4096
	}
	body := map[string]any{"model": req.Model, "max_tokens": maxTokens, "messages": msgs, "stream": true}
	if req.System != "" {
		body["system"] = req.System
	}
	if len(tools) > 0 {
		body["tools"] = tools
	}
	if p.Thinking > 0 {
		body["thinking"] = map[string]any{"type": "enabled", "budget_tokens": p.Thinking}
		if maxTokens <= p.Thinking {
			body["max_tokens"] = p.Thinking + maxTokens
		}
	}
	return json.Marshal(body)
}

// Stream implements Provider.
func (p *Anthropic) Stream(ctx context.Context, req Request, emit func(Event)) (*Reply, error) {
	body, err := p.body(req)
	if err != nil {
		return nil, err
	}
	return streamWithRetry(ctx, p.Backoff, func() (*Reply, bool, error) { return p.once(ctx, body, emit) })
}

// once makes one attempt: it posts the request and reads the stream into
// a reply. emitted says whether anything reached the caller (then the
// attempt is not retried).
func (p *Anthropic) once(ctx context.Context, body []byte, emit func(Event)) (*Reply, bool, error) {
	base := p.BaseURL
	if base == "" {
		base = "https://api.anthropic.com"
	}
	resp, err := post(ctx, p.Client, "anthropic", strings.TrimSuffix(base, "/")+"/v1/messages", body,
		map[string]string{"anthropic-version": "2023-06-01", "x-api-key": p.APIKey})
	if err != nil {
		return nil, false, err
	}
	defer resp.Body.Close()
	s := &anStream{reply: &Reply{Message: Message{Role: "assistant"}}, blocks: map[int]*anStreamBlock{}, emit: emit}
	if err := readSSE(resp.Body, s.event); err != nil {
		return nil, s.emitted, err
	}
	s.reply.Message.Content, s.reply.Message.Thinking = s.text.String(), s.thinking.String()
	return s.reply, s.emitted, nil
}

// anEvent is one event of a Messages API stream, as cove reads it.
type anEvent struct {
	Type    string `json:"type"`
	Index   int    `json:"index"`
	Message struct {
		Usage struct {
			Input      int `json:"input_tokens"`
			CacheRead  int `json:"cache_read_input_tokens"`
			CacheWrite int `json:"cache_creation_input_tokens"`
		} `json:"usage"`
	} `json:"message"`
	ContentBlock anBlock `json:"content_block"`
	Delta        struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Thinking    string `json:"thinking"`
		Signature   string `json:"signature"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage struct {
		Output int `json:"output_tokens"`
	} `json:"usage"`
}

// anStreamBlock is a content block as its deltas arrive.
type anStreamBlock struct {
	kind      string
	text      strings.Builder
	signature string
	id, name  string
	json      strings.Builder
}

// anStream is a reply as its events arrive: its blocks by index, the
// text and thinking so far (emitted as they come); a tool call is
// emitted when its block ends.
type anStream struct {
	reply          *Reply
	blocks         map[int]*anStreamBlock
	text, thinking strings.Builder
	emit           func(Event)
	emitted        bool
}

// event takes one event of the stream.
func (s *anStream) event(ev sseEvent) error {
	var e anEvent
	if err := json.Unmarshal([]byte(ev.Data), &e); err != nil {
		return fmt.Errorf("anthropic: bad stream event: %w", err)
	}
	switch e.Type {
	case "error":
		return streamError("anthropic", ev.Data)
	case "message_start":
		// Anthropic counts cached input apart; Usage.Input is all of it,
		// as OpenAI's prompt_tokens is.
		u := e.Message.Usage
		s.reply.Usage.Input, s.reply.Usage.CacheRead = u.Input+u.CacheRead+u.CacheWrite, u.CacheRead
	case "content_block_start":
		s.blocks[e.Index] = &anStreamBlock{kind: e.ContentBlock.Type, id: e.ContentBlock.ID, name: e.ContentBlock.Name}
	case "content_block_delta":
		return s.delta(e)
	case "content_block_stop":
		s.blockStop(e.Index)
	case "message_delta":
		s.reply.Usage.Output = e.Usage.Output
		s.reply.Stop = map[string]string{"end_turn": "end", "tool_use": "tool_use", "max_tokens": "max_tokens", "stop_sequence": "end"}[e.Delta.StopReason]
		if s.reply.Stop == "" {
			s.reply.Stop = e.Delta.StopReason
		}
	}
	return nil
}

// delta adds to a block: text and thinking are emitted as they come; a
// signature and a tool call's input are kept for the block's end.
func (s *anStream) delta(e anEvent) error {
	b := s.blocks[e.Index]
	if b == nil {
		return fmt.Errorf("anthropic: delta for unknown block %d", e.Index)
	}
	switch e.Delta.Type {
	case "text_delta":
		b.text.WriteString(e.Delta.Text)
		s.text.WriteString(e.Delta.Text)
		s.emitted = true
		s.emit(Event{Kind: EventText, Text: e.Delta.Text})
	case "thinking_delta":
		s.thinking.WriteString(e.Delta.Thinking)
		s.emitted = true
		s.emit(Event{Kind: EventThinking, Text: e.Delta.Thinking})
	case "signature_delta":
		b.signature += e.Delta.Signature
	case "input_json_delta":
		b.json.WriteString(e.Delta.PartialJSON)
	}
	return nil
}

// blockStop ends a block: a thinking block's signature goes with the
// reply (the API wants it back), a tool_use block is a tool call (no
// input: an empty object). A block never started is ignored.
func (s *anStream) blockStop(index int) {
	b := s.blocks[index]
	if b == nil {
		return
	}
	switch b.kind {
	case "thinking":
		s.reply.Message.Signature = b.signature
	case "tool_use":
		args := json.RawMessage(b.json.String())
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		call := ToolCall{ID: b.id, Name: b.name, Args: args}
		s.reply.Message.ToolCalls = append(s.reply.Message.ToolCalls, call)
		s.emitted = true
		s.emit(Event{Kind: EventToolCall, Call: &call})
	}
}
