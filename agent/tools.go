package agent

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cove-sh/cove/internal/projectfs"
)

// Action is what a tool call will do, prepared but not yet done, so that
// it can be shown and approved first.
type Action struct {
	Kind    string // "read" (never asked), "edit" or "command"
	Summary string // one line: "edit main.go", "run: go test ./..."
	Diff    string // for edits: a unified diff
	// For edits: the file and its text before and after, for a side by
	// side view.
	Path, Before, After string
	Do                  func(ctx context.Context) (string, error)
	// Images, if Do sets them, go back to the model with the output.
	Images []Image
	// Exit, if Do sets it, is the exit status of the command it ran (-1:
	// killed when it timed out), kept with its result in the session.
	Exit *int
	// Always lists what the user may allow for the rest of the session
	// in one answer, narrowest first (an MCP tool's: "mcp:SERVER/TOOL",
	// then "mcp:SERVER"); empty when the action must be asked each time.
	Always []string
	// Output, if the caller sets it before Do, gets the output of a
	// command as it comes, a line at a time.
	Output func(string)
}

// Tool is one of the agent's tools. Plan checks the arguments and prepares
// the action; an error there goes back to the model as the tool's answer.
type Tool interface {
	Spec() ToolSpec
	Plan(ctx context.Context, args json.RawMessage) (*Action, error)
}

func decodeArgs(args json.RawMessage, v any) error {
	if err := json.Unmarshal(args, v); err != nil {
		return fmt.Errorf("bad arguments: %v", err)
	}
	return nil
}

func schema(s string) json.RawMessage { return json.RawMessage(s) }

// Workspace is the project the tools work on.
type Workspace = projectfs.Dir

// OpenWorkspace opens dir for the tools. Close it when done.
func OpenWorkspace(dir string) (*Workspace, error) { return projectfs.Open(dir) }
