package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Mode says what the agent may do without asking.
type Mode string

// The approval modes.
const (
	ModeAsk   Mode = "ask"   // ask for every edit and every command
	ModeEdits Mode = "edits" // edit freely, ask for commands
	ModeYolo  Mode = "yolo"  // ask for nothing (--yes)
)

// Decision is the answer to an approval request.
type Decision struct {
	Approve bool
	Reason  string // sent to the model when it is refused
	// Always, one of the action's Always keys, lets every later action
	// with that key run without asking, for the rest of the Agent's
	// current Session.
	Always string
}

// LoopEvent is what the loop reports as it goes (to the IDE's agent panel,
// or the terminal).
type LoopEvent struct {
	Type    string    `json:"type"` // text, thinking, tool_call, tool_output, tool_result, approval, decision, edited, usage, checkpoint, compacted, error, done
	Text    string    `json:"text,omitempty"`
	Call    *ToolCall `json:"call,omitempty"`
	Action  string    `json:"action,omitempty"` // the action's summary
	Diff    string    `json:"diff,omitempty"`
	Approve *bool     `json:"approve,omitempty"`
	IsError bool      `json:"is_error,omitempty"`
	Usage   *Usage    `json:"usage,omitempty"`
	Message *Message  `json:"message,omitempty"`
}

// Agent runs the loop: ask the model, run the tools it calls (after
// approval), give it the results, until it answers without calling any.
// An Agent is used by one goroutine at a time.
type Agent struct {
	Provider Provider
	Model    string
	System   string
	Tools    []Tool
	// More, if set, is asked for more tools before each call to the
	// model: MCP servers' tools come and go as the servers start, stop
	// and say their list changed.
	More func() []Tool
	Mode Mode
	// Approve decides edits and commands that Mode does not allow by
	// itself. Nil refuses them.
	Approve func(ctx context.Context, a *Action) Decision
	// Emit, if set, gets every event.
	Emit func(LoopEvent)
	// Session, if set, records every message and decision.
	Session *Session
	// MaxSteps bounds the model calls of one Run; default 50.
	MaxSteps int
	// Checkpoints, if set, snapshots the project at each prompt.
	Checkpoints *Checkpoints
	// Window is the model's context window in tokens; 0 if not known,
	// and then the conversation is compacted only when the model says
	// it is too long.
	Window int
	// CompactAt is the fraction of Window past which the conversation is
	// compacted before the next call; default 0.8.
	CompactAt float64

	alwaysMu  sync.Mutex
	always    map[string]bool // Decision.Always keys given in the session alwaysFor
	alwaysFor *Session
}

// full says whether a conversation that took used tokens (the last
// call's prompt and reply) should be compacted before the next call.
func (a *Agent) full(used int) bool {
	at := a.CompactAt
	if at <= 0 || at > 1 {
		at = 0.8
	}
	return a.Window > 0 && float64(used) > at*float64(a.Window)
}

// estimateTokens is a rough count for servers that report no usage: about
// four bytes a token for English and code.
func estimateTokens(msgs []Message) int {
	n := 0
	for _, m := range msgs {
		n += len(m.Content) + len(m.Thinking)
		for _, c := range m.ToolCalls {
			n += len(c.Name) + len(c.Args)
		}
	}
	return n / 4
}

func (a *Agent) emit(ev LoopEvent) {
	if a.Emit != nil {
		a.Emit(ev)
	}
}

func (a *Agent) record(ev LoopEvent) {
	if a.Session != nil {
		a.Session.Append(ev)
	}
}

// Run adds prompt to the conversation history and works until the model
// is done. It returns the whole conversation, including the new turns,
// also when ctx ends it early: then tool calls it did not run are
// answered as not run.
func (a *Agent) Run(ctx context.Context, history []Message, prompt string) ([]Message, error) {
	if a.Checkpoints != nil {
		label, _, _ := strings.Cut(prompt, "\n")
		if id, err := a.Checkpoints.Save(ctx, label); err != nil {
			a.emit(LoopEvent{Type: "error", Text: err.Error() + " (going on without a checkpoint)"})
		} else {
			a.record(LoopEvent{Type: "checkpoint", Text: id})
			a.emit(LoopEvent{Type: "checkpoint", Text: id})
		}
	}
	msgs := append(append([]Message(nil), history...), Message{Role: "user", Content: prompt})
	a.record(LoopEvent{Type: "message", Message: &msgs[len(msgs)-1]})
	maxSteps := a.MaxSteps
	if maxSteps == 0 {
		maxSteps = 50
	}
	compacted, full := false, false
	for step := 0; step < maxSteps; step++ {
		if full {
			// Near the window: summarise before the next call, not after
			// the server refuses it.
			msgs, full = a.Compact(ctx, msgs), false
		}
		tools, specs := a.toolSet()
		req := Request{Model: a.Model, System: a.System, Messages: msgs, Tools: specs}
		reply, err := a.Provider.Stream(ctx, req, func(ev Event) {
			switch ev.Kind {
			case EventText:
				a.emit(LoopEvent{Type: "text", Text: ev.Text})
			case EventThinking:
				a.emit(LoopEvent{Type: "thinking", Text: ev.Text})
			case EventToolCall:
				a.emit(LoopEvent{Type: "tool_call", Call: ev.Call})
			}
		})
		if errors.Is(err, ErrContextTooLong) && !compacted {
			compacted = true
			msgs = a.Compact(ctx, msgs)
			step--
			continue
		}
		if err != nil {
			a.emit(LoopEvent{Type: "error", Text: err.Error()})
			return msgs, err
		}
		compacted = false
		a.emit(LoopEvent{Type: "usage", Usage: &reply.Usage})
		msgs = append(msgs, reply.Message)
		used := reply.Usage.Input + reply.Usage.Output
		if used == 0 {
			used = estimateTokens(msgs) + len(a.System)/4
		}
		full = a.full(used)
		a.record(LoopEvent{Type: "message", Message: &msgs[len(msgs)-1], Usage: &reply.Usage})
		if len(reply.Message.ToolCalls) == 0 {
			a.emit(LoopEvent{Type: "done", Text: reply.Message.Content, Usage: &reply.Usage})
			return msgs, nil
		}
		for _, call := range reply.Message.ToolCalls {
			if err := ctx.Err(); err != nil {
				// Stopped mid-step: the calls not run are answered so, so
				// that the conversation can go on (every provider wants
				// each call answered).
				for _, m := range unanswered(msgs) {
					msgs = append(msgs, m)
					a.record(LoopEvent{Type: "message", Message: &msgs[len(msgs)-1]})
				}
				return msgs, err
			}
			out, act, isErr := a.call(ctx, tools, call)
			res := Message{Role: "tool", ToolCallID: call.ID, Content: out, IsError: isErr}
			if act != nil {
				res.Images, res.Exit = act.Images, act.Exit
			}
			msgs = append(msgs, res)
			a.record(LoopEvent{Type: "message", Message: &msgs[len(msgs)-1]})
			a.emit(LoopEvent{Type: "tool_result", Call: &call, Text: out, IsError: isErr})
		}
	}
	return msgs, fmt.Errorf("stopped after %d steps without an answer", maxSteps)
}

// toolSet is the tools for the next call to the model, by name, and
// their specs in order: the fixed ones, then More's.
func (a *Agent) toolSet() (map[string]Tool, []ToolSpec) {
	all := a.Tools
	if a.More != nil {
		all = append(append([]Tool(nil), all...), a.More()...)
	}
	tools := map[string]Tool{}
	var specs []ToolSpec
	for _, t := range all {
		s := t.Spec()
		if _, dup := tools[s.Name]; dup {
			continue // the first of a name wins, as the model is told of one
		}
		tools[s.Name] = t
		specs = append(specs, s)
	}
	return tools, specs
}

// call plans, approves and runs one tool call; what goes back to the
// model is the output or the error, and the action when it ran (its
// images, its command's exit status).
func (a *Agent) call(ctx context.Context, tools map[string]Tool, call ToolCall) (string, *Action, bool) {
	var act *Action
	out, isErr := a.callTool(ctx, tools, call, &act)
	if act == nil || isErr {
		return out, nil, isErr
	}
	return out, act, false
}

// callTool is call's work; it sets *planned to the action once planned.
func (a *Agent) callTool(ctx context.Context, tools map[string]Tool, call ToolCall, planned **Action) (string, bool) {
	t, ok := tools[call.Name]
	if !ok {
		return fmt.Sprintf("there is no tool %q", call.Name), true
	}
	act, err := t.Plan(ctx, call.Args)
	if err != nil {
		return err.Error(), true
	}
	*planned = act
	if !a.allowed(act) {
		d := Decision{}
		if a.Approve != nil {
			a.emit(LoopEvent{Type: "approval", Call: &call, Action: act.Summary, Diff: act.Diff})
			d = a.Approve(ctx, act)
		}
		why := d.Reason
		if d.Approve && d.Always != "" {
			why = strings.TrimSpace(why + " (and from now on, all of " + d.Always + ")")
		}
		a.record(LoopEvent{Type: "decision", Action: act.Summary, Diff: act.Diff, Approve: &d.Approve, Text: why})
		a.emit(LoopEvent{Type: "decision", Action: act.Summary, Approve: &d.Approve, Text: d.Reason})
		if d.Approve && d.Always != "" && slices.Contains(act.Always, d.Always) {
			a.alwaysMu.Lock()
			if a.always == nil || a.alwaysFor != a.Session {
				a.always, a.alwaysFor = map[string]bool{}, a.Session
			}
			a.always[d.Always] = true
			a.alwaysMu.Unlock()
		}
		if !d.Approve {
			msg := "the user refused: " + act.Summary
			if d.Reason != "" {
				msg += ". Their reason: " + d.Reason
			}
			return msg, true
		}
	}
	if a.Emit != nil {
		live := &outputStream{emit: func(s string) { a.emit(LoopEvent{Type: "tool_output", Text: s}) }}
		act.Output = live.write
		defer live.close()
	}
	out, err := act.Do(ctx)
	if err != nil {
		if out != "" {
			out += "\n"
		}
		return out + err.Error(), true
	}
	if act.Kind == "edit" {
		a.emit(LoopEvent{Type: "edited", Action: act.Summary, Diff: act.Diff})
	}
	return out, false
}

// outputStream passes a command's output on as it comes, gathered into
// one event per streamInterval, and no more than streamLimit bytes of it
// (a flood stays readable in the result, clipped, and the saved file).
type outputStream struct {
	mu     sync.Mutex
	buf    []byte
	sent   int
	timer  *time.Timer
	closed bool
	emit   func(string)
}

const (
	streamInterval = 50 * time.Millisecond
	streamLimit    = 256 << 10
)

func (s *outputStream) write(p string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.sent+len(s.buf) >= streamLimit {
		return
	}
	s.buf = append(s.buf, p[:min(len(p), streamLimit-s.sent-len(s.buf))]...)
	if s.timer == nil {
		s.timer = time.AfterFunc(streamInterval, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.flush()
		})
	}
}

// flush sends what is gathered; s.mu is held.
func (s *outputStream) flush() {
	s.timer = nil
	if s.closed || len(s.buf) == 0 {
		return
	}
	s.emit(string(s.buf))
	s.sent += len(s.buf)
	s.buf = s.buf[:0]
}

// close sends the rest, before the result.
func (s *outputStream) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timer != nil {
		s.timer.Stop()
	}
	s.flush()
	s.closed = true
}

// allowed says whether act runs without asking: by the mode, or by an
// "always" the user gave for one of its keys.
func (a *Agent) allowed(act *Action) bool {
	if a.Mode.Allows(act) {
		return true
	}
	a.alwaysMu.Lock()
	defer a.alwaysMu.Unlock()
	if a.alwaysFor != a.Session {
		return false // given in another session (the panel's New, the chat's /new)
	}
	for _, k := range act.Always {
		if a.always[k] {
			return true
		}
	}
	return false
}

// Allows says whether m lets act run without asking.
func (m Mode) Allows(act *Action) bool {
	switch {
	case act.Kind == "read", m == ModeYolo:
		return true
	case m == ModeEdits:
		return act.Kind == "edit"
	}
	return false
}

// Compact asks the model to summarise the conversation but for the newest
// user message and the latest step (the last model reply and its tool
// results), which stay word for word; the summary replaces the rest,
// earlier steps of the current turn included, so that one long turn can
// be compacted too. If that fails, older turns and the current turn's
// earlier steps are dropped instead: the agent says so and goes on. Run
// compacts by itself near the window and when the model says the
// context is too long; the full transcript stays in the session.
func (a *Agent) Compact(ctx context.Context, msgs []Message) []Message {
	older, kept := splitForCompaction(msgs)
	if len(older) == 0 {
		return msgs
	}
	transcript, _ := json.Marshal(older)
	req := Request{Model: a.Model, System: "You summarise a coding session for the assistant that continues it. Keep: the user's goals and constraints, decisions made, files changed and why, commands run and what they showed, what is left to do. Be concise.",
		Messages: []Message{{Role: "user", Content: "Summarise this conversation (JSON). Its last request from the user, which the assistant is working on, comes after the summary word for word, with the assistant's latest step:\n" + string(transcript)}}}
	reply, err := a.Provider.Stream(ctx, req, func(Event) {})
	if err != nil {
		a.emit(LoopEvent{Type: "error", Text: "compaction failed (" + err.Error() + "); dropping the older half of the conversation instead"})
		// Keep from a user turn on, so no tool result loses its call.
		before := msgs[:newestUser(msgs)] // the current turn's earlier steps go too
		from := len(before)
		for i := len(before) / 2; i < len(before); i++ {
			if before[i].Role == "user" {
				from = i
				break
			}
		}
		return append(append([]Message(nil), before[from:]...), kept...)
	}
	a.record(LoopEvent{Type: "compacted", Text: reply.Message.Content})
	a.emit(LoopEvent{Type: "compacted", Text: reply.Message.Content})
	return afterCompaction(reply.Message.Content, kept)
}

// splitForCompaction parts msgs into what a compaction summarises and
// what it keeps word for word: the newest user message and the latest
// step (the last model reply and its tool results).
func splitForCompaction(msgs []Message) (older, kept []Message) {
	user := newestUser(msgs)
	if user < 0 {
		return nil, msgs
	}
	step := len(msgs)
	for i := len(msgs) - 1; i > user; i-- {
		if msgs[i].Role == "assistant" {
			step = i
			break
		}
	}
	older = append(append([]Message(nil), msgs[:user]...), msgs[user+1:step]...)
	kept = append([]Message{msgs[user]}, msgs[step:]...)
	return older, kept
}

// newestUser is the index of the newest user message, -1 if none.
func newestUser(msgs []Message) int {
	i := len(msgs) - 1
	for i >= 0 && msgs[i].Role != "user" {
		i--
	}
	return i
}

const (
	summaryHead = "[Summary of the earlier conversation, and of the work on the request below so far]\n"
	summaryAck  = "Understood; continuing from that summary."
)

// afterCompaction is the conversation the model sees after a compaction:
// the summary, then what was kept.
func afterCompaction(summary string, kept []Message) []Message {
	return append([]Message{
		{Role: "user", Content: summaryHead + summary},
		{Role: "assistant", Content: summaryAck},
	}, kept...)
}

// Summary says whether m is part of a compaction's summary (the summary,
// or the model's acknowledgement), and returns the summary's text.
func Summary(m Message) (string, bool) {
	if m.Role == "user" && strings.HasPrefix(m.Content, summaryHead) {
		return strings.TrimPrefix(m.Content, summaryHead), true
	}
	return "", m.Role == "assistant" && m.Content == summaryAck && len(m.ToolCalls) == 0
}
