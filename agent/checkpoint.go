package agent

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// Checkpoints snapshot the project's files at each prompt, so that a
// rewind can put them back. They live in a git repository of their own
// (DIR/.cove/checkpoints.git) whose work tree is the project: the user's
// repository, its history, index and refs are never touched, and it works
// where there is no repository at all. The project's .gitignore is
// honoured; .cove/ itself is left out.
type Checkpoints struct {
	Dir string // the project
	git string // the checkpoint repository
	// as is whom git runs as: the project's owner when cove is root (its
	// repository, and the files a rewind brings back, are theirs).
	as *syscall.Credential
}

const checkpointRef = "refs/cove/checkpoints"

// keepOutOfGit writes DIR/.cove/.gitignore for the state the agent keeps
// there (checkpoints, sessions, saved output), so that the user's git
// status stays clean; .cove/config.json and .cove/tools/ stay visible,
// as the project may want to commit them.
func keepOutOfGit(dir string) {
	p := filepath.Join(dir, ".cove", ".gitignore")
	if _, err := os.Stat(p); err == nil {
		return
	}
	os.MkdirAll(filepath.Dir(p), 0o755)
	os.WriteFile(p, []byte("# cove's own state\n/checkpoints.git/\n/sessions/\n/out/\n/.gitignore\n"), 0o644)
	handOver(projectOwner(dir), false, filepath.Dir(p), p)
}

// OpenCheckpoints prepares the checkpoint repository of dir.
func OpenCheckpoints(ctx context.Context, dir string) (*Checkpoints, error) {
	keepOutOfGit(dir)
	cp := &Checkpoints{Dir: dir, git: filepath.Join(dir, ".cove", "checkpoints.git"), as: projectOwner(dir)}
	// One made by root before is handed over once (git runs as the owner).
	if fi, err := os.Stat(cp.git); err == nil && cp.as != nil && fi.Sys().(*syscall.Stat_t).Uid != cp.as.Uid {
		handOver(cp.as, true, cp.git)
	}
	if _, err := os.Stat(filepath.Join(cp.git, "HEAD")); err != nil {
		if _, err := cp.run(ctx, nil, "init", "--quiet", "--bare", cp.git); err != nil {
			return nil, err
		}
		exclude := filepath.Join(cp.git, "info", "exclude")
		os.MkdirAll(filepath.Dir(exclude), 0o755)
		if err := os.WriteFile(exclude, []byte("/.cove/\n/.git/\n"), 0o644); err != nil {
			return nil, err
		}
		handOver(cp.as, false, filepath.Dir(exclude), exclude)
	}
	return cp, nil
}

func (cp *Checkpoints) run(ctx context.Context, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = cp.Dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=cove", "GIT_AUTHOR_EMAIL=cove@localhost",
		"GIT_COMMITTER_NAME=cove", "GIT_COMMITTER_EMAIL=cove@localhost")
	if args[0] != "init" {
		cmd.Env = append(cmd.Env, "GIT_DIR="+cp.git, "GIT_WORK_TREE="+cp.Dir)
	}
	cmd.Env = append(cmd.Env, env...)
	if cp.as != nil {
		// As the owner, not root: root's git configuration is none of
		// theirs (and git would refuse to read it).
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cp.as}
		cmd.Env = append(cmd.Env, "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "HOME="+cp.Dir)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("checkpoint: git %s: %v: %s", args[0], err, strings.TrimSpace(errb.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

// withIndex runs fn with a temporary index file, removed after.
func (cp *Checkpoints) withIndex(fn func(env []string) error) error {
	f, err := os.CreateTemp(cp.git, "index-*")
	if err != nil {
		return err
	}
	name := f.Name()
	f.Close()
	os.Remove(name) // git wants to create it
	defer os.Remove(name)
	return fn([]string{"GIT_INDEX_FILE=" + name})
}

// Save records the project's files now, labelled, and returns the
// checkpoint's id.
func (cp *Checkpoints) Save(ctx context.Context, label string) (string, error) {
	var commit string
	err := cp.withIndex(func(env []string) error {
		if _, err := cp.run(ctx, env, "add", "--all", "."); err != nil {
			return err
		}
		tree, err := cp.run(ctx, env, "write-tree")
		if err != nil {
			return err
		}
		args := []string{"commit-tree", tree, "-m", label}
		if parent, err := cp.run(ctx, nil, "rev-parse", "--verify", "--quiet", checkpointRef); err == nil && parent != "" {
			args = append(args, "-p", parent)
		}
		if commit, err = cp.run(ctx, nil, args...); err != nil {
			return err
		}
		_, err = cp.run(ctx, nil, "update-ref", checkpointRef, commit)
		return err
	})
	return commit, err
}

// Checkpoint is one saved state.
type Checkpoint struct {
	ID    string
	Label string
}

// List returns the checkpoints, oldest first.
func (cp *Checkpoints) List(ctx context.Context) ([]Checkpoint, error) {
	out, err := cp.run(ctx, nil, "log", "--reverse", "--format=%H %s", checkpointRef)
	if err != nil {
		return nil, nil // none yet
	}
	var list []Checkpoint
	for _, line := range strings.Split(out, "\n") {
		if id, label, ok := strings.Cut(line, " "); ok {
			list = append(list, Checkpoint{ID: id, Label: label})
		}
	}
	return list, nil
}

// Rewind puts the project's files back as they were at checkpoint id:
// changed files get their content back, removed ones return, and files
// made since go. Ignored files are left alone.
func (cp *Checkpoints) Rewind(ctx context.Context, id string) error {
	return cp.withIndex(func(env []string) error {
		// The index describes the files now, so that read-tree knows what
		// to remove; then it makes the work tree match the checkpoint.
		if _, err := cp.run(ctx, env, "add", "--all", "."); err != nil {
			return err
		}
		_, err := cp.run(ctx, env, "read-tree", "--reset", "-u", id)
		return err
	})
}
