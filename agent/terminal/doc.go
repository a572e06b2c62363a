// Package terminal is the coding agent's front end on a terminal: the
// conversation (Chat: a prompt with line editing and a history, answers
// rendered as they stream, slash commands, /rewind), the trace of what the
// agent does (Trace), approval questions (Approve, and the chat's own),
// diffs coloured as git colours them, and the MCP servers' state
// (WaitMCP).
//
// What the workspace says (commands' output, tools' errors, a project
// server's name) is shown made visible (termtext), never obeyed by the
// terminal. The agent, its tools and its state are the caller's: this
// package only talks to the user.
package terminal
