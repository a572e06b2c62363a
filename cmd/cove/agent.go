package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/cove-sh/cove/agent"
	"github.com/cove-sh/cove/agent/mcpclient"
	"github.com/cove-sh/cove/agent/setup"
	"github.com/cove-sh/cove/agent/terminal"
	"github.com/cove-sh/cove/internal/projectwalk"
	"github.com/cove-sh/cove/internal/termtext"
	"github.com/cove-sh/cove/workspace"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"
)

func agentCommand() *cli.Command {
	return &cli.Command{
		Name:      "agent",
		Usage:     "the coding agent in DIR's workspace (started if needed)",
		ArgsUsage: "[DIR]",
		Description: `The model is called from here; its tools work on DIR and run commands inside the
workspace, so API keys never enter the container. Settings, later winning:
~/.config/cove/config.json ({"provider", "base_url", "api_key", "model",
"context_window"}; a key may be "$VAR"), DIR/.cove/config.json (only "model" and
"context_window": the workspace can write it; --trust lets its content as it is now choose
the rest), COVE_PROVIDER (openai|anthropic), COVE_BASE_URL, COVE_API_KEY, COVE_MODEL,
COVE_CONTEXT_WINDOW (else OPENAI_BASE_URL, OPENAI_API_KEY, ANTHROPIC_API_KEY), -m. A key
saved in the file is sent only to the base URL saved with it. Past 80% of the context
window (when known), the conversation is summarised before the next call.

Without -p it is a conversation on the terminal: answers render as markdown while they
stream, the prompt edits as a shell's (Up for earlier requests; a trailing \ goes on),
Ctrl-C stops a turn, /help lists the commands (/new, /compact, /rewind, /mode, /mcp, /exit).

MCP servers: the project's .mcp.json and .cove/mcp.json (run inside the workspace, their
URLs reached from it), ~/.config/cove/mcp.json and --mcp-config FILE (yours: run here), in
the shape other agents read: {"mcpServers": {"NAME": {"command", "args", "env"} or
{"type": "http", "url", "headers"}}}. Their tools are asked for as commands are.

Sessions (-c, -r), checkpoints (/rewind) and long command output are kept on the host,
in ${XDG_STATE_HOME:-~/.local/state}/cove/projects/NAME (the invoking user's under sudo),
never in DIR: the workspace can neither forge nor arm them.`,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "prompt", Aliases: []string{"p"}, Usage: "one-shot: answer `PROMPT` on stdout, trace on stderr (standard input, if piped, is added)"},
			&cli.BoolFlag{Name: "continue", Aliases: []string{"c"}, Usage: "continue the latest session"},
			&cli.StringFlag{Name: "resume", Aliases: []string{"r"}, Usage: "continue session `ID`"},
			&cli.StringFlag{Name: "model", Aliases: []string{"m"}, Usage: "the model (default $COVE_MODEL)"},
			&cli.BoolFlag{Name: "setup", Usage: "choose the provider, model and key; they are checked, then saved to ~/.config/cove/config.json (0600)"},
			&cli.StringFlag{Name: "mode", Value: "ask", Usage: "what runs without asking: ask (nothing), edits (file edits), yolo (everything)"},
			&cli.BoolFlag{Name: "yes", Usage: "run edits and commands without asking (--mode yolo)"},
			&cli.StringSliceFlag{Name: "mcp-config", Usage: "MCP servers from `FILE` too, for this run ({\"mcpServers\": …}, as ~/.config/cove/mcp.json; run on this machine)"},
			&cli.StringFlag{Name: "task", Usage: "work on task `NAME`: a branch and a tree of DIR's HEAD in a workspace of their own (made if new; cove tasks lists them)"},
			&cli.BoolFlag{Name: "trust", Usage: "let DIR's .cove/config.json, as it is now, choose the provider, base URL and key (by default a project chooses only the model)"},
		}, append(workspaceFlags(), kubeFlags()...)...),
		Action: func(c *cli.Context) error {
			if c.Bool("setup") {
				home, err := os.UserHomeDir()
				if err != nil {
					return err
				}
				return setup.Run(c.Context, os.Stdin, c.App.Writer, os.Getenv, agent.UserConfigPath(home), setup.LocalServers())
			}
			switch agent.Mode(c.String("mode")) {
			case agent.ModeAsk, agent.ModeEdits, agent.ModeYolo:
			default:
				return fmt.Errorf("--mode %q: say ask, edits or yolo", c.String("mode"))
			}
			e, err := globalEnv(c)
			if err != nil {
				return err
			}
			dir, err := dirArg(c)
			if err != nil {
				return err
			}
			home, _ := os.UserHomeDir()
			if c.Bool("trust") {
				t, err := agent.Trust(home, dir)
				if err != nil {
					return fmt.Errorf("--trust: %w", err)
				}
				fmt.Fprintf(c.App.ErrWriter, "cove: trusting %s as it is now: provider %q, base URL %q, key %s\n",
					filepath.Join(dir, agent.ProjectConfigPath), t.Provider, t.BaseURL, agent.KeyKind(t.APIKey))
			}
			cfg, err := agent.LoadConfig(home, dir, os.Getenv, agent.Config{Model: c.String("model")})
			if err != nil {
				return err
			}
			if n := cfg.IgnoredNote(); n != "" {
				fmt.Fprintln(c.App.ErrWriter, "cove: note: "+n)
			}
			if _, err := cfg.NewProvider(); err != nil {
				return err // before a workspace is started for nothing
			}
			if name := c.String("task"); name != "" {
				return agentTask(c, e, dir, name, cfg)
			}
			ws, started, err := ensure(c, dirBackend(c, e, dir), dir)
			if err != nil {
				return err
			}
			defer keptRunningNote(c, ws, started)
			return runAgent(c, e, ws, dir, cfg)
		},
	}
}

const systemPrompt = `You are Cove's coding agent, working in the user's project at /workspace inside a container.
Use the tools: read files before you edit them, make small exact edits, run the project's tests with bash,
and check your work. When you are done, answer briefly with what you changed and why.`

// buildAgent assembles the agent for DIR's workspace with the model cfg
// names: its tools work on the project's files here and run commands (and
// the project's own tools) in the workspace through cove exec; its
// checkpoints and saved output go to the project's host-only state.
// The MCP servers of the project run in the workspace too, the user's
// (and mcpConfig's) here. Close releases the shell and stops the servers.
func buildAgent(ctx context.Context, root string, target workspace.Workspace, dir string, state agent.State, cfg agent.Config, mcpConfig []string) (*agent.Agent, agentExtras, func(), error) {
	var x agentExtras
	provider, err := cfg.NewProvider()
	if err != nil {
		return nil, x, nil, err
	}
	w, err := agent.OpenWorkspace(dir)
	if err != nil {
		return nil, x, nil, err
	}
	bin, err := coveBinary()
	if err != nil {
		w.Close()
		return nil, x, nil, err
	}
	coveArgs := func(args ...string) []string {
		if len(args) > 0 && args[0] == "exec" {
			args = append(append([]string{"exec"}, target.ExecFlags()...), args[1:]...)
		}
		if root != "" {
			return append([]string{"--root", root}, args...)
		}
		return args
	}
	bash := &agent.BashTool{W: w, Out: state.Out, Shell: func(cwd string) *exec.Cmd {
		if cwd == dir || cwd == "" {
			cwd = "/workspace"
		}
		args := coveArgs("exec", "-i", "-w", cwd)
		for _, kv := range agent.ShellEnv {
			args = append(args, "-e", kv)
		}
		args = append(args, target.Name(), "sh", "-c", "command -v bash >/dev/null && exec bash --noprofile --norc; exec sh")
		return exec.Command(bin, args...)
	}, Sync: target.Sync}
	system := systemPrompt
	for _, name := range []string{"AGENTS.md", "CLAUDE.md"} {
		if b, err := w.ReadFile(name); err == nil {
			system += "\n\nThe project's " + name + ":\n" + string(b[:min(len(b), 32<<10)])
			break
		}
	}
	a := &agent.Agent{
		Provider: provider, Model: cfg.Model, Window: cfg.ResolveWindow(ctx), System: system, Mode: agent.ModeAsk,
		Tools: []agent.Tool{agent.ReadTool{W: w, Out: state.Out}, agent.WriteTool{W: w}, agent.EditTool{W: w}, agent.SearchTool{W: w, Walk: hostWalkOptions()}, bash},
	}
	// The project's own tools run in the workspace, like its commands.
	inWorkspace := func(ctx context.Context, path string, args []string, stdin []byte) ([]byte, error) {
		{
			if err := target.Sync(ctx); err != nil {
				return nil, err
			}
			defer target.Sync(ctx)
		}
		cmd := exec.CommandContext(ctx, bin, append(coveArgs("exec", "-i", "-w", "/workspace", target.Name(), "/workspace/"+path), args...)...)
		return agent.RunCapped(cmd, stdin)
	}
	tools, broken := agent.LoadProjectTools(ctx, dir, inWorkspace)
	a.Tools = append(a.Tools, tools...)
	x.broken = broken
	m, notes, err := startMCP(ctx, bin, coveArgs, target.Name(), dir, mcpConfig)
	if err != nil {
		bash.Close()
		w.Close()
		return nil, x, nil, err
	}
	x.mcp, x.mcpNotes = m, notes
	a.More = m.Tools
	closeAll := func() { m.Close(); bash.Close(); w.Close() }
	if cp, err := agent.OpenCheckpoints(ctx, dir, state.Checkpoints); err == nil {
		a.Checkpoints = cp
		// The project's .gitignore, read in-process for each checkpoint:
		// what it hides is neither saved nor touched by a rewind.
		if tree, err := projectwalk.Open(dir, hostWalkOptions()); err == nil {
			cp.NewIgnore = tree.Ignorer
			closeAll = func() { m.Close(); bash.Close(); w.Close(); tree.Close() }
		}
	}
	return a, x, closeAll, nil
}

// agentExtras is what buildAgent reports beside the agent.
type agentExtras struct {
	broken   []agent.BrokenTool // project tools that did not load
	mcp      *mcpclient.Manager // the MCP servers, starting
	mcpNotes []string           // project servers left out, and why
}

// runAgent runs the agent on dir in its workspace target; share are other
// checkpoint stores whose copies its checkpoints may link (agent.
// Checkpoints.Share: a task's siblings').
func runAgent(c *cli.Context, e *env, target workspace.Workspace, dir string, cfg agent.Config, share ...string) error {
	state, err := agent.OpenState(e.layout, workspace.Name(dir))
	if err != nil {
		return err
	}
	home, _ := os.UserHomeDir()
	if note := state.LegacyNote(dir, home); note != "" {
		fmt.Fprintln(c.App.ErrWriter, "cove: note: "+note)
	}
	a, x, closeAgent, err := buildAgent(c.Context, c.String("root"), target, dir, state, cfg, c.StringSlice("mcp-config"))
	if err != nil {
		return err
	}
	defer closeAgent()
	if a.Checkpoints != nil {
		a.Checkpoints.Share = share
	}
	sessions := state.Sessions
	var history []agent.Message
	switch {
	case c.Bool("continue") || c.String("resume") != "":
		a.Session, history, err = agent.ResumeSession(sessions, c.String("resume"))
	default:
		a.Session, err = agent.NewSession(sessions)
	}
	if err != nil {
		return err
	}
	defer func() { a.Session.Close() }() // the chat may start new sessions

	a.Mode = agent.Mode(c.String("mode"))
	if c.Bool("yes") {
		a.Mode = agent.ModeYolo
	}
	// What the workspace answers (commands' output, tools' errors) is
	// shown, never obeyed by the terminal.
	trace := termtext.NewWriter(c.App.ErrWriter)
	for _, b := range x.broken {
		fmt.Fprintf(trace, "! tool %s is broken: %v\n", b.Path, b.Err)
	}
	for _, n := range x.mcpNotes {
		fmt.Fprintln(trace, "! "+n)
	}
	terminal.WaitMCP(c.Context, trace, x.mcp)
	a.Emit = terminal.Trace(trace)
	if c.String("prompt") == "" {
		err := terminal.Chat(c.Context, a, terminal.Options{In: os.Stdin, Out: c.App.Writer, Err: c.App.ErrWriter,
			Sessions: sessions, History: history, MCP: x.mcp, Getenv: os.Getenv})
		if errors.Is(err, terminal.ErrInterrupted) {
			return &exitError{code: 130} // as a Ctrl-C at a prompt read by the kernel
		}
		return err
	}
	prompt := c.String("prompt")
	if !term.IsTerminal(int(os.Stdin.Fd())) {
		if in, _ := io.ReadAll(io.LimitReader(os.Stdin, 1<<20)); len(in) > 0 {
			prompt += "\n\n" + string(in)
		}
	}
	unapproved := 0
	a.Approve = terminal.Approve(&unapproved)
	msgs, err := a.Run(c.Context, history, prompt)
	if err != nil {
		return fmt.Errorf("agent: %w (session %s)", err, a.Session.ID)
	}
	answer := msgs[len(msgs)-1].Content
	if f, ok := c.App.Writer.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		answer = termtext.Visible(answer) // piped, it stays byte for byte
	}
	fmt.Fprintln(c.App.Writer, answer)
	fmt.Fprintf(trace, "· session %s (cove agent -r %s to continue)\n", a.Session.ID, a.Session.ID)
	if unapproved > 0 {
		// The answer may read as done; what it needed was refused.
		return fmt.Errorf("%d of the agent's actions were refused: there is no terminal to approve them (run cove agent in one, or give --yes or --mode edits)", unapproved)
	}
	return nil
}
