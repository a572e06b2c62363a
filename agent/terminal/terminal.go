package terminal

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/cove-sh/cove/agent"
	"github.com/cove-sh/cove/agent/mcpclient"
	"github.com/cove-sh/cove/internal/mdterm"
	"golang.org/x/term"
)

// Options are what Chat talks on and what it goes on from.
type Options struct {
	// In is the user's input, standard input: a terminal gets line
	// editing, anything else is read a line at a time.
	In *os.File
	// Out is where answers go, standard output: on a terminal (an
	// *os.File that is one) they are rendered.
	Out io.Writer
	// Err is where notes go: the session to resume, the history's errors.
	Err io.Writer
	// Sessions is the directory of session logs, for /new and /rewind.
	Sessions string
	// History is the conversation resumed (-c, -r); nil for a new one.
	History []agent.Message
	// MCP are the MCP servers, for /mcp and their news; nil for none.
	MCP *mcpclient.Manager
	// Getenv reads TERM, NO_COLOR and where the prompt history is kept
	// (XDG_STATE_HOME, HOME). The default is os.Getenv.
	Getenv func(string) string
}

// Chat holds the conversation with a on o.In and o.Out until the input
// ends or /exit. Ctrl-C stops the turn in progress; at the prompt it
// clears the line, or on an empty one leaves, and Chat returns
// ErrInterrupted (the caller exits 130, as after a Ctrl-C at a prompt
// read by the kernel). On a terminal, the prompt has line editing and a
// history, and answers are rendered (markdown, unless NO_COLOR is set);
// otherwise lines are read and answers written as they come.
//
// Chat takes SIGINT, SIGTERM and SIGHUP while it runs: Ctrl-C during a
// turn stops the turn, not the command, so ctx's cancellation does not
// reach the turns. Any other of those signals puts the terminal back,
// closes a's session and exits the process with status 130 at once, since
// the user asked to leave while a turn may still be waiting on the model.
func Chat(ctx context.Context, a *agent.Agent, o Options) error {
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	ch := &chat{a: a, out: o.Out, sessions: o.Sessions, history: o.History, turns: resumedTurns(a.Session, o.History), mcp: o.MCP}
	outFile, _ := o.Out.(*os.File)
	inTTY, outTTY := term.IsTerminal(int(o.In.Fd())), outFile != nil && term.IsTerminal(int(outFile.Fd()))
	dumb := getenv("TERM") == "dumb"
	var tty *ttyLines
	if inTTY && outTTY && !dumb {
		hist, err := loadHistory(historyPath(getenv))
		if err != nil {
			fmt.Fprintf(o.Err, "! the prompt history is not read: %v\n", err)
		}
		if tty, err = newTTYLines(o.In, outFile, hist, o.Err); err != nil {
			return err
		}
		defer tty.restore()
		ch.lines = tty
		if o.MCP != nil {
			// A server's news, while a request is typed, goes above it.
			o.MCP.OnChange(mcpTrace(tty, o.MCP))
		}
	} else {
		ch.lines = &plainLines{in: bufio.NewReader(o.In), out: o.Out, echo: outTTY && !inTTY}
	}
	if outTTY && !dumb && getenv("NO_COLOR") == "" {
		ch.md = mdterm.New(outFile, func() int {
			w, _, _ := term.GetSize(int(outFile.Fd()))
			return w
		})
	}
	leave := func() {
		fmt.Fprintf(o.Err, "· session %s (cove agent -r %s to continue)\n", a.Session.ID, a.Session.ID)
	}
	// Ctrl-C must not end the command (the caller's context): it goes to the chat.
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	go func() {
		for sig := range sigs {
			if sig == syscall.SIGINT && ch.interrupt() {
				continue
			}
			if tty != nil {
				tty.restore()
			}
			fmt.Fprintln(o.Err)
			leave()
			a.Session.Close()
			os.Exit(130)
		}
	}()
	err := ch.run(ctx)
	leave()
	return err
}
