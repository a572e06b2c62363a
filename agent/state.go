package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/cove-sh/cove/internal/dirs"
)

// State is where the agent keeps a project's state: a host-only directory
// of the invoking user's (dirs.Layout.ProjectState, named as the project's
// workspace is), never the project, which the workspace can write.
// Nothing in the project's .cove is read for it, written or run.
type State struct {
	Dir         string // State/projects/NAME, 0700
	Sessions    string // the session logs: the audit log, what -c/-r and History go on with
	Checkpoints string // the checkpoint store
	Out         string // long command output, saved for the model to read
}

// OpenState makes and returns the agent state of the project whose
// workspace is named name.
func OpenState(layout dirs.Layout, name string) (State, error) {
	d, err := layout.ProjectState(name)
	if err != nil {
		return State{}, err
	}
	return State{Dir: d, Sessions: filepath.Join(d, "sessions"),
		Checkpoints: filepath.Join(d, "checkpoints"), Out: filepath.Join(d, "out")}, nil
}

// legacyNoted marks, in the state directory, that the note about a
// project's old state was given.
const legacyNoted = "legacy-noted"

// LegacyNote is, once for the project dir, what to tell the user about the
// agent state older cove kept in the project (.cove/sessions,
// .cove/checkpoints.git, .cove/out): it is never read, run or trusted
// again (the workspace could have forged or armed it), and left where it
// is, as the user's files are never deleted. "" when there is none or it
// was said before. home, if set, is shown as ~.
func (st State) LegacyNote(dir, home string) string {
	var found []string
	for _, name := range []string{"sessions", "checkpoints.git", "out"} {
		if _, err := os.Lstat(filepath.Join(dir, ".cove", name)); err == nil {
			found = append(found, ".cove/"+name)
		}
	}
	if len(found) == 0 {
		return ""
	}
	marker := filepath.Join(st.Dir, legacyNoted)
	if _, err := os.Lstat(marker); err == nil {
		return ""
	}
	f, err := os.OpenFile(marker, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return "" // said by another cove just now, or the state is not writable: said next time
	}
	if fi, err := os.Lstat(st.Dir); err == nil {
		if s, ok := fi.Sys().(*syscall.Stat_t); ok && int(s.Uid) != os.Geteuid() {
			f.Chown(int(s.Uid), int(s.Gid))
		}
	}
	f.Close()
	where := st.Dir
	if home != "" && strings.HasPrefix(where, home+"/") {
		where = "~" + strings.TrimPrefix(where, home)
	}
	return fmt.Sprintf("%s in this project are no longer used (cove keeps its state in %s); you may delete them",
		strings.Join(found, " and "), where)
}
