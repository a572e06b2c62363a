package terminal

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/cove-sh/cove/agent"
	"github.com/cove-sh/cove/internal/termtext"
)

// Trace reports the agent's tool calls, their results and the loop's
// notes on trace, a line or a few each, for Agent.Emit. A command's output
// shows as it comes, so the result then says only how it ended. trace
// should keep the workspace's bytes from commanding the terminal
// (termtext.NewWriter): they are the workspace's words.
func Trace(trace io.Writer) func(agent.LoopEvent) {
	streamed := false // the running call's output was shown as it came
	return func(ev agent.LoopEvent) {
		switch ev.Type {
		case "tool_call":
			streamed = false
			fmt.Fprintf(trace, "· %s\n", callLine(ev.Call))
		case "tool_output": // a command's output as it runs
			streamed = true
			for _, line := range strings.SplitAfter(ev.Text, "\n") {
				if line != "" {
					fmt.Fprint(trace, "  │ "+line)
				}
			}
			if !strings.HasSuffix(ev.Text, "\n") {
				fmt.Fprintln(trace)
			}
		case "tool_result":
			first, _, _ := strings.Cut(ev.Text, "\n")
			if streamed {
				// The output is above already: only how it ended.
				lines := strings.Split(strings.TrimRight(ev.Text, "\n"), "\n")
				if first = lines[len(lines)-1]; !strings.HasPrefix(first, "[") {
					first = "done"
				}
			}
			mark := "  →"
			if ev.IsError {
				mark = "  ✗"
			}
			fmt.Fprintf(trace, "%s %s\n", mark, first)
		case "edited":
			plus, minus := 0, 0
			for _, l := range strings.Split(ev.Diff, "\n") {
				switch {
				case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"):
				case strings.HasPrefix(l, "+"):
					plus++
				case strings.HasPrefix(l, "-"):
					minus++
				}
			}
			fmt.Fprintf(trace, "  ± %s +%d −%d\n", ev.Action, plus, minus)
		case "checkpoint":
			fmt.Fprintf(trace, "· checkpoint %.12s\n", ev.Text)
		case "compacted":
			fmt.Fprintln(trace, "· (the conversation was summarised to fit the model)")
		case "error":
			fmt.Fprintln(trace, "! "+ev.Text)
		}
	}
}

// callLine is a tool call as the trace shows it: what it does, in a few
// words, not its JSON (an edit's diff follows when it asks).
func callLine(call *agent.ToolCall) string {
	var args struct {
		Path    string `json:"path"`
		Command string `json:"command"`
		Pattern string `json:"pattern"`
	}
	json.Unmarshal(call.Args, &args)
	switch {
	case args.Command != "":
		cmd, _, more := strings.Cut(args.Command, "\n")
		if more {
			cmd += " …"
		}
		return call.Name + ": " + termtext.Visible(cmd)
	case args.Path != "":
		return call.Name + " " + termtext.Visible(args.Path)
	case args.Pattern != "":
		return call.Name + " " + termtext.Visible(args.Pattern)
	}
	return call.Name + " " + termtext.Visible(string(call.Args))
}

// colourDiff colours a unified diff's lines, as git diff does on a
// terminal: additions green, removals red, hunks cyan.
func colourDiff(diff string, colour bool) string {
	if !colour {
		return diff
	}
	var b strings.Builder
	for _, line := range strings.SplitAfter(diff, "\n") {
		body := strings.TrimSuffix(line, "\n")
		code := ""
		switch {
		case strings.HasPrefix(body, "+++"), strings.HasPrefix(body, "---"):
			code = "1"
		case strings.HasPrefix(body, "+"):
			code = "32"
		case strings.HasPrefix(body, "-"):
			code = "31"
		case strings.HasPrefix(body, "@@"):
			code = "36"
		}
		if code == "" || body == "" {
			b.WriteString(line)
			continue
		}
		b.WriteString("\x1b[" + code + "m" + body + "\x1b[m" + line[len(body):])
	}
	return b.String()
}
