package agent

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// BashTool runs commands in one persistent shell: the working directory
// and exported variables carry over between calls. Standard input is
// closed, pagers are off, each command has a timeout that kills the whole
// process group (the shell is then started again where it was), and long
// output is clipped to its head and tail with the whole of it saved in Out
// for the model to read (the read tool's cove-out: paths).
type BashTool struct {
	W       *Workspace
	Timeout time.Duration // per command; default 120 s
	Env     []string      // added to the environment
	// Out is where long output is saved whole: a host-only directory of
	// the project's agent state, never the project (the workspace must
	// not be able to forge or redirect it); "" saves none.
	Out string
	// Shell, if set, makes the shell process, started in dir (for one in
	// a container: cove exec). The default is bash on this machine.
	Shell func(dir string) *exec.Cmd
	// Sync, if set, brings the workspace's copy of the project and this
	// machine's into agreement before a command (an edit just made is
	// there when it runs) and after it (what it wrote is here for the file
	// tools): a workspace that runs elsewhere (a Pod) sets it.
	Sync func(context.Context) error

	mu    sync.Mutex
	sh    *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	cwd   string
	seq   int
}

var _ Tool = (*BashTool)(nil)

// ShellEnv keeps the commands the agent runs from waiting for a person.
var ShellEnv = []string{"PAGER=cat", "GIT_PAGER=cat", "MANPAGER=cat", "LESS=FRX", "TERM=dumb",
	"GIT_TERMINAL_PROMPT=0", "DEBIAN_FRONTEND=noninteractive", "CI=1", "NO_COLOR=1"}

// clipAt is how much output the model sees in full; beyond it, the head
// and tail.
const clipAt = 16 << 10

// Spec implements Tool.
func (t *BashTool) Spec() ToolSpec {
	return ToolSpec{Name: "bash", Description: "Run a shell command in the project (one persistent bash: cd and export carry over). No input; no pagers. Long output is clipped; the full text is saved to a file you can read.",
		Schema: schema(`{"type":"object","properties":{"command":{"type":"string"},"timeout":{"type":"integer","description":"seconds, default 120"}},"required":["command"]}`)}
}

// Plan implements Tool.
func (t *BashTool) Plan(ctx context.Context, raw json.RawMessage) (*Action, error) {
	var a struct {
		Command string
		Timeout int
	}
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	if strings.TrimSpace(a.Command) == "" {
		return nil, fmt.Errorf("no command given")
	}
	timeout := t.Timeout
	if timeout == 0 {
		timeout = 120 * time.Second
	}
	if a.Timeout > 0 {
		timeout = time.Duration(a.Timeout) * time.Second
	}
	act := &Action{Kind: "command", Summary: "run: " + a.Command}
	act.Do = func(ctx context.Context) (string, error) {
		if t.Sync != nil {
			if err := t.Sync(ctx); err != nil {
				return "", fmt.Errorf("bring the project's files to the workspace: %w", err)
			}
		}
		out, status, err := t.run(ctx, a.Command, timeout, act.Output)
		if err == nil {
			act.Exit = &status
		}
		if t.Sync != nil {
			if serr := t.Sync(ctx); serr != nil && err == nil {
				err = fmt.Errorf("bring the workspace's files here: %w", serr)
			}
		}
		return out, err
	}
	return act, nil
}

func (t *BashTool) start() error {
	if t.cwd == "" {
		t.cwd = t.W.Root
	}
	var sh *exec.Cmd
	if t.Shell != nil {
		sh = t.Shell(t.cwd)
	} else {
		sh = exec.Command("bash", "--noprofile", "--norc")
		sh.Dir = t.cwd
		sh.Env = append(append(os.Environ(), ShellEnv...), t.Env...)
	}
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := sh.StdinPipe()
	if err != nil {
		return err
	}
	pr, pw := io.Pipe()
	sh.Stdout, sh.Stderr = pw, pw
	if err := sh.Start(); err != nil {
		return fmt.Errorf("start bash: %w", err)
	}
	go func() { sh.Wait(); pw.Close() }()
	t.sh, t.stdin, t.out = sh, in, bufio.NewReaderSize(pr, 64<<10)
	return nil
}

func (t *BashTool) kill() {
	if t.sh != nil && t.sh.Process != nil {
		syscall.Kill(-t.sh.Process.Pid, syscall.SIGKILL)
		t.stdin.Close()
	}
	t.sh = nil
}

// Close ends the shell and everything it started.
func (t *BashTool) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.kill()
}

// run runs command in the shell and returns its output, clipped, and its
// exit status as the shell reported it (-1 when it timed out and was
// killed).
func (t *BashTool) run(ctx context.Context, command string, timeout time.Duration, output func(string)) (string, int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sh == nil {
		if err := t.start(); err != nil {
			return "", -1, err
		}
	}
	b := make([]byte, 8)
	rand.Read(b)
	marker := "__cove_done_" + hex.EncodeToString(b)
	// The command reads nothing (stdin is /dev/null); afterwards the shell
	// reports the status and where it is.
	script := fmt.Sprintf("{\n%s\n} </dev/null 2>&1\nprintf '\\n%s %%s %%s\\n' \"$?\" \"$PWD\"\n", command, marker)
	if _, err := io.WriteString(t.stdin, script); err != nil {
		t.kill()
		return "", -1, fmt.Errorf("the shell died; it starts again on the next command: %w", err)
	}
	type result struct {
		out    string
		status int
		err    error
	}
	done := make(chan result, 1)
	go func() {
		var out keptOutput
		// Lines go on to output as they come, but for a blank one, held
		// until the next: the last, before the marker, is the newline the
		// script adds.
		held := false
		pass := func(line string) {
			if output == nil {
				return
			}
			if held {
				line = "\n" + line
			}
			if held = strings.HasSuffix(line, "\n\n") || line == "\n"; held {
				line = line[:len(line)-1]
			}
			if line != "" {
				output(line)
			}
		}
		// Read a line at a time, at most the reader's buffer of one: a
		// line without end comes in pieces, and only a line's start can
		// be the marker.
		midLine := false
		for {
			chunk, err := t.out.ReadSlice('\n')
			line := string(chunk)
			if rest, ok := strings.CutPrefix(line, marker+" "); ok && !midLine {
				f := strings.SplitN(strings.TrimSpace(rest), " ", 2)
				status, _ := strconv.Atoi(f[0])
				if len(f) == 2 {
					t.cwd = f[1]
				}
				done <- result{strings.TrimRight(out.String(), "\n"), status, nil}
				return
			}
			out.write(line)
			pass(line)
			midLine = errors.Is(err, bufio.ErrBufferFull)
			if err != nil && !midLine {
				done <- result{out.String(), -1, fmt.Errorf("the shell ended: %w", err)}
				return
			}
		}
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var r result
	select {
	case r = <-done:
	case <-timer.C:
		t.kill()
		r = <-done
		return t.clip(r.out) + fmt.Sprintf("\n[timed out after %s: the command and all it started were killed; the shell starts again in %s]", timeout, t.cwd), -1, nil
	case <-ctx.Done():
		t.kill()
		<-done
		return "", -1, ctx.Err()
	}
	if r.err != nil {
		t.kill()
		return t.clip(r.out), -1, r.err
	}
	out := t.clip(r.out)
	if r.status != 0 {
		out += fmt.Sprintf("\n[exit status %d]", r.status)
	}
	return out, r.status, nil
}

// maxKeptOutput is the most of one command's output the launcher keeps
// (in memory, then in the saved file): the workspace chooses what a
// command prints, and it may print without end. Beyond it, the head and
// the last clipAt/2 bytes are kept, and what was left out is said.
const maxKeptOutput = 32 << 20

// keptOutput gathers a command's output, bounded: all of it up to
// maxKeptOutput, then the head and a rolling tail.
type keptOutput struct {
	head    strings.Builder
	tail    []byte // the newest bytes past the head, at most clipAt/2
	dropped int64  // bytes between the head and the tail, left out
}

func (k *keptOutput) write(s string) {
	if room := maxKeptOutput - k.head.Len(); room > 0 {
		n := min(room, len(s))
		k.head.WriteString(s[:n])
		s = s[n:]
	}
	if s == "" {
		return
	}
	k.tail = append(k.tail, s...)
	if over := len(k.tail) - clipAt/2; over > 0 {
		k.dropped += int64(over)
		k.tail = append(k.tail[:0], k.tail[over:]...)
	}
}

func (k *keptOutput) String() string {
	if k.dropped == 0 {
		return k.head.String() + string(k.tail)
	}
	return fmt.Sprintf("%s\n[… %d bytes not kept: only the first %d MiB and the end of a command's output are …]\n%s",
		k.head.String(), k.dropped, maxKeptOutput>>20, k.tail)
}

// clip keeps the head and tail of long output and saves all of it.
func (t *BashTool) clip(out string) string {
	if len(out) <= clipAt {
		return out
	}
	saved := ""
	if name, err := t.save(out); err == nil {
		saved = fmt.Sprintf(" (all of it is saved: read %s%s)", savedOutputPrefix, name)
	}
	head, tail := out[:clipAt/2], out[len(out)-clipAt/2:]
	return fmt.Sprintf("%s\n[… %d bytes left out%s …]\n%s", head, len(out)-clipAt, saved, tail)
}

// save writes out to a new file in Out and returns its name.
func (t *BashTool) save(out string) (string, error) {
	if t.Out == "" {
		return "", errors.New("no directory for saved output")
	}
	if err := mkdirState(t.Out); err != nil {
		return "", err
	}
	for range 100 { // another cove on this project may save in the same second
		t.seq++
		name := fmt.Sprintf("%d-%d.txt", time.Now().Unix(), t.seq)
		f, err := openState(filepath.Join(t.Out, name), os.O_CREATE|os.O_EXCL|os.O_WRONLY)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		_, err = f.WriteString(out)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return name, err
	}
	return "", errors.New("no free name for saved output")
}
