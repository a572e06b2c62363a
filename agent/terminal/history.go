package terminal

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/cove-sh/cove/internal/atomicfile"
	"golang.org/x/term"
)

// historyMax is how many lines the prompt history keeps.
const historyMax = 1000

// promptHistory is what was typed at the chat's prompt, in this chat and
// earlier ones, one line an entry: Up and Down at the prompt go through
// it. It is kept in a file of the user's (at most historyMax lines, mode
// 0600) that each chat reads when it starts and rewrites with every line
// it adds. Two chats adding a line at the same moment may lose one of
// them.
type promptHistory struct {
	path    string   // "": kept in memory only
	entries []string // oldest first
}

var _ term.History = (*promptHistory)(nil)

// historyPath is ${XDG_STATE_HOME:-~/.local/state}/cove/agent_history, or
// "" with neither that nor HOME set.
func historyPath(getenv func(string) string) string {
	dir := getenv("XDG_STATE_HOME")
	if !filepath.IsAbs(dir) { // the XDG spec: a relative path is ignored
		home := getenv("HOME")
		if home == "" {
			return ""
		}
		dir = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(dir, "cove", "agent_history")
}

// loadHistory reads the history at path. A missing file is an empty
// history; a file that cannot be read is one too, with the error.
func loadHistory(path string) (*promptHistory, error) {
	h := &promptHistory{path: path}
	if path == "" {
		return h, nil
	}
	lines, err := readHistory(path)
	h.entries = lines
	return h, err
}

func readHistory(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	return lines[max(0, len(lines)-historyMax):], nil
}

// add records a line typed at the prompt, unless it is blank or the same
// as the one before, and saves the history.
func (h *promptHistory) add(line string) error {
	if strings.TrimSpace(line) == "" || strings.ContainsAny(line, "\r\n") ||
		len(h.entries) > 0 && h.entries[len(h.entries)-1] == line {
		return nil
	}
	h.entries = append(h.entries, line)
	h.entries = h.entries[max(0, len(h.entries)-historyMax):]
	if h.path == "" {
		return nil
	}
	// Other chats may have added lines since this one read the file.
	lines, err := readHistory(h.path)
	if err != nil {
		return err
	}
	lines = append(lines, line)
	lines = lines[max(0, len(lines)-historyMax):]
	if err := os.MkdirAll(filepath.Dir(h.path), 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(h.path, []byte(strings.Join(lines, "\n")+"\n"))
}

// Add does nothing: term.Terminal calls it with every line it reads,
// approvals and pasted text too, and the chat adds only the lines typed
// at its prompt (with add).
func (h *promptHistory) Add(string) {}

// Len is how many entries there are.
func (h *promptHistory) Len() int { return len(h.entries) }

// At returns an entry, 0 being the latest.
func (h *promptHistory) At(i int) string { return h.entries[len(h.entries)-1-i] }
