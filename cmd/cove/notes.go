package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"

	"github.com/cove-sh/cove/ide"
	"github.com/cove-sh/cove/internal/atomicfile"
	"github.com/urfave/cli/v2"
)

// launcherNotes serves n, what the launcher said while it started the
// workspace (its notes, the lifecycle commands' output), to the IDE's
// workspace log at /api/notes, behind the proxy's checks.
func launcherNotes(proxy *ide.Proxy, n *ide.Notes) {
	proxy.Handle("/api/notes", n)
}

// teeNotes makes what the command says on stderr go to n too, until
// restore is called: the notes and the lifecycle commands' output are
// said where the user is, the terminal and the IDE (and kept for the
// background launcher under --detach: keepNotes).
func teeNotes(c *cli.Context, n *ide.Notes) (restore func()) {
	was := c.App.ErrWriter
	c.App.ErrWriter = notesTee{w: was, notes: n}
	return func() { c.App.ErrWriter = was }
}

// notesTee writes to the launcher's stderr and its notes.
type notesTee struct {
	w     io.Writer
	notes *ide.Notes
}

func (t notesTee) Write(b []byte) (int, error) {
	t.notes.Write(b)
	return t.w.Write(b)
}

// Terminal is the stderr under the tee, where a pull's progress bars are
// drawn (they are not notes).
func (t notesTee) Terminal() io.Writer { return t.w }

// keepNotes leaves n beside the launcher's record at recPath, for the
// background launcher of cove up --detach, which finds the workspace
// started: its IDE shows what was said here, each line of its kind. The
// directory is the launcher's, which the workspace never sees.
func keepNotes(recPath string, n *ide.Notes) error {
	lines, _ := n.Lines(0)
	b, err := json.Marshal(lines)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(filepath.Dir(recPath), "notes.json"), b)
}

// keptNotes adds to n what cove up --detach kept beside the launcher's
// record at recPath for this background launcher (--serve).
func keptNotes(n *ide.Notes, recPath string) {
	f, err := os.Open(filepath.Join(filepath.Dir(recPath), "notes.json"))
	if err != nil {
		return
	}
	defer f.Close()
	var lines []ide.NoteLine
	if json.NewDecoder(io.LimitReader(f, 4*ide.DefaultNotesLimit)).Decode(&lines) == nil {
		n.Restore(lines)
	}
}
