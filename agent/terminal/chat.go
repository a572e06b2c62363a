package terminal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/cove-sh/cove/agent"
	"github.com/cove-sh/cove/agent/mcpclient"
	"github.com/cove-sh/cove/internal/mdterm"
	"github.com/cove-sh/cove/internal/termtext"
)

// chat is the agent's terminal conversation: a request at the prompt,
// the answer streamed as it comes, slash commands between turns.
// Interrupt (Ctrl-C) stops the turn in progress, not the chat; the
// conversation keeps what was said.
type chat struct {
	a        *agent.Agent
	lines    lineReader
	out      io.Writer
	md       *mdterm.Writer // renders the answers on out, a terminal; nil: they are written as they come
	sessions string         // where session logs go
	history  []agent.Message
	mcp      *mcpclient.Manager // the MCP servers, for /mcp; may be nil

	midLine bool // the answer so far does not end its line (kept with md only)

	mu         sync.Mutex
	cancelTurn context.CancelFunc // set while a turn runs
	// turns are this chat's checkpoints, with the history length before
	// each, so that /rewind can take back the conversation too.
	turns     []chatTurn
	compacted bool // during the turn in progress
}

type chatTurn struct {
	agent.Turn
	label string // the prompt's first line
}

// resumedTurns are the turns of a resumed conversation, for /rewind.
func resumedTurns(s *agent.Session, history []agent.Message) []chatTurn {
	var turns []chatTurn
	for _, t := range s.Turns {
		label := ""
		if t.Before < len(history) {
			label = firstLine(history[t.Before].Content)
		}
		turns = append(turns, chatTurn{Turn: t, label: label})
	}
	return turns
}

const chatHelp = `Type a request; the answer streams here. Ctrl-C stops a turn; Ctrl-D or /exit leaves.
On a terminal, a line that ends in \ goes on to the next, Up and Down recall earlier requests
(of every chat: ~/.local/state/cove/agent_history), and Ctrl-C clears the line.
  /new          start a new conversation (a new session)
  /compact      summarise the conversation so far to free the model's context
  /rewind       list this conversation's checkpoints
  /rewind N     put the files back as they were before turn N, and the conversation too
  /mode M       ask (every edit and command), edits (ask for commands), yolo (ask nothing)
  /mcp          the MCP servers, where they run, their state and tools
  /help         this
`

func (c *chat) run(ctx context.Context) error {
	fmt.Fprintf(c.out, "cove agent · %s · session %s · /help for commands\n", c.a.Model, c.a.Session.ID)
	emit := c.a.Emit
	c.a.Emit = func(ev agent.LoopEvent) {
		switch ev.Type {
		case "text":
			c.write(ev.Text)
			return
		case "message", "usage", "done", "thinking", "tool_output", "decision":
			// not shown: the answer's line goes on
		case "checkpoint":
			c.endText(true)
			c.turns = append(c.turns, chatTurn{Turn: agent.Turn{Checkpoint: ev.Text, Before: len(c.history)}})
		case "compacted":
			c.endText(true)
			c.compacted = true
		default:
			c.endText(true) // before the trace shows it
		}
		if emit != nil {
			emit(ev)
		}
	}
	// The approval question reads the same input as the chat, so that a
	// line typed ahead is not lost between two readers.
	c.a.Approve = func(ctx context.Context, act *agent.Action) agent.Decision {
		c.endText(true)
		if act.Diff != "" {
			fmt.Fprint(c.out, colourDiff(termtext.Visible(act.Diff), c.md != nil))
		}
		line, err := c.lines.answer(allowQuestion(act))
		if errors.Is(err, ErrInterrupted) {
			c.interrupt() // Ctrl-C stops the turn, as it does while the model writes
			return agent.Decision{Reason: "the user stopped this turn"}
		}
		return allowAnswer(line, act)
	}
	for {
		line, err := c.lines.prompt()
		if err != nil {
			if errors.Is(err, ErrInterrupted) {
				return err
			}
			return nil // end of input
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "/") {
			if done, err := c.command(ctx, line); done || err != nil {
				return err
			}
			continue
		}
		c.turn(ctx, line)
	}
}

// turn runs one prompt until the model answers or the user interrupts.
func (c *chat) turn(ctx context.Context, prompt string) {
	turnCtx, cancel := context.WithCancel(ctx)
	c.mu.Lock()
	c.cancelTurn = cancel
	c.mu.Unlock()
	before := len(c.turns)
	msgs, err := c.a.Run(turnCtx, c.history, prompt)
	c.endText(false) // the line ends below
	c.mu.Lock()
	c.cancelTurn = nil
	c.mu.Unlock()
	cancel()
	if len(c.turns) > before {
		c.turns[len(c.turns)-1].label = firstLine(prompt)
	}
	c.history = msgs
	if c.compacted {
		// The turns before are a summary now: only this one can be rewound.
		var kept []chatTurn
		if n := len(c.turns); n > 0 {
			if t := agent.TurnsAfterCompaction([]agent.Turn{c.turns[n-1].Turn}, msgs); len(t) == 1 {
				last := c.turns[n-1]
				last.Turn = t[0]
				kept = []chatTurn{last}
			}
		}
		c.turns, c.compacted = kept, false
	}
	switch {
	case errors.Is(err, context.Canceled) && ctx.Err() == nil:
		fmt.Fprintln(c.out, "\n· stopped; what was said so far is kept")
	case err != nil:
		fmt.Fprintf(c.out, "\n! %v\n", err)
	default:
		fmt.Fprintln(c.out)
	}
}

// write shows a piece of the answer.
func (c *chat) write(text string) {
	if c.md == nil {
		fmt.Fprint(c.out, text)
		return
	}
	c.md.Write([]byte(text))
	if text != "" {
		c.midLine = !strings.HasSuffix(text, "\n")
	}
}

// endText ends the answer's text so far, before something else is shown:
// rendered, its last line is finished, and ended if lineEnd. (Unrendered,
// the text is left exactly as the model wrote it.)
func (c *chat) endText(lineEnd bool) {
	if c.md == nil {
		return
	}
	c.md.Flush()
	if c.midLine && lineEnd {
		fmt.Fprintln(c.out)
	}
	c.midLine = false
}

// interrupt stops the turn in progress; false means none was running.
func (c *chat) interrupt() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancelTurn == nil {
		return false
	}
	c.cancelTurn()
	return true
}

// command runs a slash command; done means leave the chat.
func (c *chat) command(ctx context.Context, line string) (done bool, err error) {
	name, arg, _ := strings.Cut(line, " ")
	arg = strings.TrimSpace(arg)
	switch name {
	case "/exit", "/quit":
		return true, nil
	case "/help":
		fmt.Fprint(c.out, chatHelp)
	case "/new":
		s, err := agent.NewSession(c.sessions)
		if err != nil {
			return false, err
		}
		c.a.Session.Close()
		c.a.Session, c.history, c.turns = s, nil, nil
		fmt.Fprintf(c.out, "· new conversation, session %s\n", s.ID)
	case "/compact":
		before := len(c.history)
		c.history = c.a.Compact(ctx, c.history)
		c.turns = nil // the history lengths no longer line up
		fmt.Fprintf(c.out, "· %d messages → %d\n", before, len(c.history))
	case "/mode":
		switch m := agent.Mode(arg); m {
		case agent.ModeAsk, agent.ModeEdits, agent.ModeYolo:
			c.a.Mode = m
			fmt.Fprintf(c.out, "· mode %s\n", m)
		default:
			fmt.Fprintf(c.out, "· mode is %s; say /mode ask, /mode edits or /mode yolo\n", c.a.Mode)
		}
	case "/rewind":
		return false, c.rewind(ctx, arg)
	case "/mcp":
		var servers []mcpclient.Status
		if c.mcp != nil {
			servers = c.mcp.Status()
		}
		if len(servers) == 0 {
			fmt.Fprintln(c.out, "· no MCP servers (the project's .mcp.json or .cove/mcp.json, ~/.config/cove/mcp.json, --mcp-config FILE)")
		}
		for _, s := range servers {
			fmt.Fprintln(c.out, "  "+mcpLine(s))
			if s.State == mcpclient.StateRunning && len(s.Tools) > 0 {
				fmt.Fprintln(c.out, "    "+termtext.Visible(strings.Join(s.Tools, ", ")))
			}
		}
	default:
		fmt.Fprintf(c.out, "· no command %s (/help lists them)\n", name)
	}
	return false, nil
}

func (c *chat) rewind(ctx context.Context, arg string) error {
	if c.a.Checkpoints == nil || len(c.turns) == 0 {
		fmt.Fprintln(c.out, "· no checkpoints in this conversation yet")
		return nil
	}
	if arg == "" {
		for i, t := range c.turns {
			fmt.Fprintf(c.out, "  %d  %.12s  %s\n", i+1, t.Checkpoint, t.label)
		}
		fmt.Fprintln(c.out, "· /rewind N puts things back as they were before turn N")
		return nil
	}
	n, err := strconv.Atoi(arg)
	if err != nil || n < 1 || n > len(c.turns) {
		fmt.Fprintf(c.out, "· say a turn from 1 to %d\n", len(c.turns))
		return nil
	}
	t := c.turns[n-1]
	if err := c.a.Checkpoints.Rewind(ctx, t.Checkpoint); err != nil {
		fmt.Fprintf(c.out, "! rewind: %v (nothing else changed)\n", err)
		return nil
	}
	var kept []agent.Turn
	for _, k := range c.turns[:n-1] {
		kept = append(kept, k.Turn)
	}
	s, err := agent.RestartSession(c.sessions, c.a.Session, c.history[:t.Before], kept)
	if err != nil {
		return err
	}
	c.a.Session = s
	c.history = c.history[:t.Before:t.Before]
	c.turns = c.turns[:n-1]
	fmt.Fprintf(c.out, "· files and conversation are back before turn %d (%s); session %s\n", n, t.label, s.ID)
	return nil
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}
