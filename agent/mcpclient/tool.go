package mcpclient

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/cove-sh/cove/agent"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxToolName is the longest tool name the providers take: OpenAI's
// function names and Anthropic's tool names are ^[a-zA-Z0-9_-]{1,64}$.
const maxToolName = 64

// ToolName is the model's name for server's tool: "mcp__SERVER__TOOL", as
// Claude Code names them, with any character the providers refuse made
// "_", and cut to 64 characters with a hash of the whole kept, so that
// two long names stay apart. A name already in used gets the hash too;
// the name returned is added to used.
func ToolName(server, tool string, used map[string]bool) string {
	full := "mcp__" + clean(server) + "__" + clean(tool)
	name := full
	if len(name) > maxToolName || used[name] {
		sum := sha256.Sum256([]byte(server + "\x00" + tool))
		suffix := "_" + hex.EncodeToString(sum[:4])
		name = full[:min(len(full), maxToolName-len(suffix))] + suffix
	}
	used[name] = true
	return name
}

func clean(s string) string {
	var b strings.Builder
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			c = '_'
		}
		b.WriteRune(c)
	}
	return b.String()
}

func toolSpec(name, server string, t *sdk.Tool) agent.ToolSpec {
	desc := t.Description
	if len(desc) > maxDescription {
		desc = desc[:maxDescription] + "…"
	}
	schema, err := json.Marshal(t.InputSchema)
	if err != nil || len(schema) > maxSchema || t.InputSchema == nil || string(schema) == "null" {
		schema = []byte(`{"type":"object","properties":{}}`)
	}
	return agent.ToolSpec{Name: name, Description: fmt.Sprintf("(from the MCP server %q) %s", server, desc), Schema: schema}
}

// AlwaysKeys are the keys a call to server's tool may be allowed by for
// the session, narrowest first: "mcp:WHERE:SERVER/TOOL", then
// "mcp:WHERE:SERVER". WHERE is the server's origin (OnHost for the
// user's own, InWorkspace for the project's), so that no project server
// makes a key of the user's servers, whatever it is named; a server's
// name holds no "/" or ":" (checkName), so SERVER ends at the first "/".
// No built-in tool's key starts with "mcp:".
func AlwaysKeys(where, server, tool string) []string {
	prefix := "mcp:" + where + ":" + server
	return []string{prefix + "/" + tool, prefix}
}

// tool is one of a server's tools, as the agent's loop sees it.
type tool struct {
	s       *server
	mcpName string
	spec    agent.ToolSpec
}

var _ agent.Tool = (*tool)(nil)

// Spec implements agent.Tool.
func (t *tool) Spec() agent.ToolSpec { return t.spec }

// Plan implements agent.Tool: a call to an MCP tool is approved as a
// command is, and may be allowed for the session per tool or per server.
func (t *tool) Plan(ctx context.Context, raw json.RawMessage) (*agent.Action, error) {
	var args map[string]any
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &args); err != nil {
			return nil, fmt.Errorf("bad arguments: %v (an MCP tool takes a JSON object)", err)
		}
	}
	shown := string(raw)
	if len(shown) > 200 {
		shown = shown[:200] + "…"
	}
	server := t.s.spec.Name
	act := &agent.Action{
		Kind:    "command",
		Summary: fmt.Sprintf("MCP %s (%s): %s %s", server, t.s.spec.Where, t.mcpName, shown),
		Always:  AlwaysKeys(t.s.spec.Where, server, t.mcpName),
	}
	act.Do = func(ctx context.Context) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		sess, err := t.s.current(ctx)
		if err != nil {
			return "", err
		}
		res, err := sess.CallTool(ctx, &sdk.CallToolParams{Name: t.mcpName, Arguments: args})
		if err != nil {
			if ctx.Err() != nil {
				return "", fmt.Errorf("the call to %s on the MCP server %q did not finish: %w", t.mcpName, server, ctx.Err())
			}
			return "", fmt.Errorf("the call to %s failed: the MCP server %q: %v (a server that dies is started again once; the call was not retried)", t.mcpName, server, err)
		}
		text, images := Render(res)
		act.Images = images
		if res.IsError {
			if text == "" {
				text = "the tool reported an error"
			}
			return "", errors.New(text)
		}
		return text, nil
	}
	return act, nil
}

// Render turns a tool's result into text for the model and its images:
// text as it is, images kept (up to a size), audio and binary resources
// described, resource links and embedded text resources given with their
// URIs; structured content, when there is nothing else, as JSON.
func Render(res *sdk.CallToolResult) (string, []agent.Image) {
	var parts []string
	var images []agent.Image
	size := 0
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			parts = append(parts, c.Text)
		case *sdk.ImageContent:
			if size+len(c.Data) <= maxImageBytes && imageMIME(c.MIMEType) {
				images = append(images, agent.Image{MIME: c.MIMEType, Data: c.Data})
				size += len(c.Data)
				parts = append(parts, fmt.Sprintf("[image %d: %s, %d bytes]", len(images), c.MIMEType, len(c.Data)))
			} else {
				parts = append(parts, fmt.Sprintf("[an image (%s, %d bytes) was left out]", c.MIMEType, len(c.Data)))
			}
		case *sdk.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio (%s, %d bytes), not shown]", c.MIMEType, len(c.Data)))
		case *sdk.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource %s %q]", c.URI, c.Name))
		case *sdk.EmbeddedResource:
			if r := c.Resource; r != nil {
				if r.Text != "" {
					parts = append(parts, fmt.Sprintf("[resource %s]\n%s", r.URI, r.Text))
				} else {
					parts = append(parts, fmt.Sprintf("[resource %s: %s, %d bytes, not shown]", r.URI, r.MIMEType, len(r.Blob)))
				}
			}
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			parts = append(parts, string(b))
		}
	}
	text := strings.Join(parts, "\n")
	if len(text) > maxResultText {
		text = text[:maxResultText] + fmt.Sprintf("\n[… cut at %d bytes]", maxResultText)
	}
	return text, images
}

func imageMIME(m string) bool {
	switch m {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		return true
	}
	return false
}
