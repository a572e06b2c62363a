package task

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/cove-sh/cove/internal/atomicfile"
	"github.com/cove-sh/cove/internal/projectfs"
	"github.com/cove-sh/cove/workspace"
)

// A workspace that works on a copy of the project (a cluster's,
// workspace.Backend.Copies) has no .git: the sync never carries it. A
// task there gets the project's history from here instead: the files of
// its .git that hold history (HEAD, refs, objects, shallow) read as bytes
// through projectfs (beneath the project, no symlink followed out of it,
// regular files only, never blocking on a FIFO) and carried as a tar into
// the task's workspace, where git makes the task's branch. Nothing of
// them is interpreted here: which commit HEAD names is the workspace's to
// say. The merge comes back as a patch the project's workspace applies to
// its files, which the sync brings home; the user commits it.

// historyPaths are what of the project's .git a task's workspace gets:
// its history and which commit is checked out. Not the config, hooks,
// index or logs: the task's repository is its own, as on this machine.
var historyPaths = []string{"HEAD", "packed-refs", "refs", "objects", "shallow"}

// CreateForCopy records a new task of the project for a workspace that
// works on a copy (a cluster's) and makes its tree, holding for now the
// project's .devcontainer (and .devcontainer.json) as they are on disk
// (there is no git here to read the committed ones). Its base is set by
// CarryHistory, in the task's workspace.
func (m *Manager) CreateForCopy(name, prompt string) (Record, error) {
	if err := CheckName(name); err != nil {
		return Record{}, err
	}
	if _, err := m.Get(name); err == nil {
		return Record{}, fmt.Errorf("task %s exists (cove tasks lists them; cove task discard %s removes it)", name, name)
	}
	d, err := projectfs.Open(m.Project)
	if err != nil {
		return Record{}, err
	}
	defer d.Close()
	if fi, err := d.Lstat(".git"); err != nil || !fi.IsDir() {
		return Record{}, fmt.Errorf("task %s: a task is a branch: the project needs a git repository of its own (a .git directory; a worktree's or a submodule's .git file is not one a cluster's task can carry)", name)
	}
	var config bytes.Buffer
	if err := projectTar(d, &config, []string{".devcontainer", ".devcontainer.json"}, ""); err != nil {
		return Record{}, fmt.Errorf("task %s: the project's .devcontainer: %w", name, err)
	}
	r := Record{Name: name, Project: m.Project, Prompt: prompt, Created: time.Now().UTC()}
	return r, m.make(r, config.Bytes())
}

// make writes the task's tree, with the .devcontainer in config (a tar),
// and then its record.
func (m *Manager) make(r Record, config []byte) error {
	if err := os.MkdirAll(m.dir(), 0o700); err != nil {
		return err
	}
	tree := m.Tree(r.Name)
	if err := os.Mkdir(tree, 0o755); err != nil {
		return fmt.Errorf("task %s: %w", r.Name, err)
	}
	if err := extractConfig(tree, config); err != nil {
		os.RemoveAll(tree)
		return fmt.Errorf("task %s: the project's .devcontainer: %w", r.Name, err)
	}
	if err := m.save(r); err != nil {
		os.RemoveAll(tree)
		return err
	}
	return nil
}

// save writes the task's record, whole or not at all.
func (m *Manager) save(r Record) error {
	b, _ := json.MarshalIndent(r, "", "  ")
	return atomicfile.WriteFile(m.recordPath(r.Name), b)
}

// CarryHistory makes the task's tree, in its workspace tw (one that works
// on a copy), a checkout of the project's HEAD on the task's branch, from
// the history in the project's .git carried there, and records the base
// its workspace names. A task whose base is recorded has it already.
func (m *Manager) CarryHistory(ctx context.Context, tw workspace.Workspace, r Record) (Record, error) {
	if r.Base != "" {
		return r, nil
	}
	d, err := projectfs.Open(m.Project)
	if err != nil {
		return r, err
	}
	defer d.Close()
	if fi, err := d.Lstat(".git/objects/info/alternates"); err == nil && fi.Size() > 0 {
		return r, fmt.Errorf("task %s: the project's history is not all in its .git (objects/info/alternates names another store): a cluster's task cannot carry it", r.Name)
	}
	// The object format is the only thing of the config the task's
	// repository needs; the workspace reads it from its copy. The tar is
	// delivered to a file there (a cluster may lose an exec's standard
	// input, see deliver), made again from the project for each try.
	history := "/tmp/cove-task-" + r.Name + ".history.tar"
	err = deliver(ctx, tw, history, func() (io.ReadCloser, error) {
		pr, pw := io.Pipe()
		go func() {
			pw.CloseWithError(projectTar(d, pw, append(historyPaths, "config"), ".git"))
		}()
		return pr, nil
	})
	if err != nil {
		run(ctx, tw, nil, 4<<10, "rm", "-f", history)
		return r, fmt.Errorf("task %s: the project's history to its workspace: %w", r.Name, err)
	}
	const script = `set -e; cd /workspace; rm -rf .git; tar -xo -f "$1"; rm -f "$1"
f=$(git config -f .git/config extensions.objectformat || echo sha1)
rm -f .git/config; git init -q --template= --object-format="$f"
b=$(git -c safe.directory='*' rev-parse --verify HEAD^{commit})
git -c safe.directory='*' checkout -q -f -B "$0" "$b"
echo "$b"`
	out, err := run(ctx, tw, nil, 4<<10, "sh", "-c", script, r.Branch(), history)
	if err != nil {
		run(ctx, tw, nil, 4<<10, "rm", "-rf", "/workspace/.git", history)
		return r, fmt.Errorf("task %s: the project's history in its workspace: %w", r.Name, err)
	}
	// The commit is the last line of the output that is one (run keeps
	// stderr apart: git init's warning, printed first, once came after
	// the commit from a cluster's exec and was read as it, in CI).
	base := lastCommitLine(out)
	if base == "" {
		return r, fmt.Errorf("task %s: the workspace gave no commit as HEAD: %q", r.Name, truncate(strings.TrimSpace(string(out))))
	}
	r.Base = base
	if err := m.save(r); err != nil {
		return r, err
	}
	// The checkout is on this side too before the agent reads it.
	return r, tw.Sync(ctx)
}

// maxPatch bounds a task's diff on its way to the project's workspace
// (kept on this machine's disk meanwhile; the task's workspace writes it).
const maxPatch = 256 << 20

// Apply brings the task's work into the project's files in its workspace
// main, one that works on a copy (no .git there): the task's diff since
// its base (binary), applied by git apply; hunks that do not apply are
// left beside their files as FILE.rej and named in the error. The sync
// brings the result home, where the user commits it.
func (m *Manager) Apply(ctx context.Context, main, tw workspace.Workspace, r Record) ([]byte, error) {
	patch := "/tmp/cove-task-" + r.Name + ".patch"
	if err := carryThroughFile(ctx, tw, []string{"git", "-c", "safe.directory=*", "diff", "--binary", "--full-index", r.Base, r.Branch()}, main, patch, maxPatch); err != nil {
		return nil, fmt.Errorf("task %s: its diff: %w", r.Name, err)
	}
	const script = `[ -s "$0" ] || { rm -f "$0"; echo "nothing to apply: the task changed nothing since its base"; exit 0; }
git apply --reject --whitespace=nowarn "$0"; s=$?; rm -f "$0"; exit $s`
	out, err := run(ctx, main, nil, 64<<10, "sh", "-c", script, patch)
	var ee *exitError
	if errors.As(err, &ee) {
		rejects := regexp.MustCompile(`(?m)^Rejected hunk #\d+\.$|^error: .*$`).FindAllString(string(ee.out), -1)
		if len(rejects) > 0 {
			main.Sync(ctx) // what applied, and the .rej files, home
			err = fmt.Errorf("task %s: %w: the hunks that did not apply are beside their files as FILE.rej (%s); resolve them, then commit", r.Name, ErrConflict, truncate(strings.Join(rejects, "; ")))
		}
		return ee.out, err
	}
	if err != nil {
		return out, err
	}
	return out, main.Sync(ctx)
}

// projectTar writes to w a tar of the named paths of d (files and the
// directories under them; what is missing is left out), named under
// prefix in the tar, as d reads them: regular files and directories
// only, a symlink or a FIFO skipped, nothing followed out of d.
func projectTar(d *projectfs.Dir, w io.Writer, names []string, prefix string) error {
	tw := tar.NewWriter(w)
	for _, name := range names {
		p := path.Join(prefix, name)
		if fi, err := d.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			continue
		} else if err != nil {
			return err
		} else if !fi.IsDir() && !fi.Mode().IsRegular() {
			continue // a symlink: the workspace's to follow, not this side's
		}
		err := fs.WalkDir(d.FS(), p, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			switch {
			case e.IsDir():
				return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: p + "/", Mode: 0o755})
			case !e.Type().IsRegular():
				return nil
			}
			f, fi, err := d.OpenRegular(p)
			if errors.Is(err, projectfs.ErrNotRegular) || errors.Is(err, fs.ErrNotExist) {
				return nil // replaced meanwhile
			}
			if err != nil {
				return err
			}
			defer f.Close()
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: int64(fi.Mode().Perm()), Size: fi.Size()}); err != nil {
				return err
			}
			// A file that shrinks while it is read is padded, one that
			// grows cut: the header's size holds.
			n, err := io.Copy(tw, io.LimitReader(f, fi.Size()))
			if err == nil && n < fi.Size() {
				_, err = io.CopyN(tw, zeros{}, fi.Size()-n)
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	return tw.Close()
}

type zeros struct{}

func (zeros) Read(b []byte) (int, error) {
	clear(b)
	return len(b), nil
}

// commitLine is a commit's name, SHA-1 or SHA-256.
var commitLine = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`) })

// lastCommitLine is the last line of out that is a commit's name alone,
// or "".
func lastCommitLine(out []byte) string {
	lines := strings.Split(string(out), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); commitLine().MatchString(l) {
			return l
		}
	}
	return ""
}
