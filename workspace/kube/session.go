package kube

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cove-sh/cove/internal/projectwalk"
	"github.com/cove-sh/cove/workspace/filesync"
)

// IDEPort is where cove's IDE server listens in the Pod, on its loopback:
// reached only through port-forward.
const IDEPort = 7777

// SyncInterval is how often the project's copies are compared: a save
// on either side is on the other within about this much.
const SyncInterval = 300 * time.Millisecond

// Session is a workspace Pod the launcher serves: cove in it, the
// project's files synchronised both ways while it lasts, the IDE server
// reached by port-forward.
type Session struct {
	Pod *Pod

	local  *filesync.Dir
	remote *filesync.Remote
	syncer *filesync.Syncer
	ide    *Forwarder
	report func(filesync.Report, error)
	stop   context.CancelFunc
	done   sync.WaitGroup

	mu   sync.Mutex
	lost error // the sync's connection to the Pod broke, and is not back
}

// SessionOptions say what a Session needs from this machine.
type SessionOptions struct {
	Dir    string               // the project on this machine
	Binary string               // cove's static binary, brought into the Pod
	Walk   *projectwalk.Options // the ignore rules' options
	// Report hears each sync round that did something or failed
	// (conflicts among them). A round that fails because the stream to
	// the Pod broke is said once, through Link.
	Report func(filesync.Report, error)
	// Prepare, if set, runs once cove is in the Pod, before the IDE
	// server starts (it writes the workspace's EnvFile, for one).
	Prepare func(context.Context, *Pod) error
	// Link hears the sync's connection to the Pod: once with why when it
	// breaks (a sync server killed, an API server restarted, a laptop
	// that slept), once with nil when a new one answers, with how long
	// it was away. Meanwhile the Session opens a new one, backing off up
	// to 1 second between attempts, and loses nothing: the round after
	// it compares both sides again. When nil, the break is said through
	// Report (once) and the return not at all.
	Link func(err error, away time.Duration)
}

// EnvFile is the workspace's environment in the Pod (devcontainer.json's
// containerEnv and remoteEnv, as export and unset lines): the IDE server
// and each command cove runs there read it first. Kubernetes' own env
// cannot hold it: it is resolved against the image's environment, known
// once the Pod runs.
const EnvFile = coveDir + "/env"

// Start runs the workspace s as a Pod and makes it ready to serve: cove
// brought in, the project synchronised once (the Pod's copy and the local
// one united: nothing on either side is lost), the sync going on every
// SyncInterval, and the IDE server started.
func (k *Cluster) Start(ctx context.Context, s Spec, o SessionOptions) (*Session, error) {
	pod, err := k.Ensure(ctx, s)
	if err != nil {
		return nil, err
	}
	if err := pod.Bring(ctx, o.Binary); err != nil {
		return nil, err
	}
	if o.Prepare != nil {
		if err := o.Prepare(ctx, pod); err != nil {
			return nil, err
		}
	}
	local, err := filesync.OpenDir(o.Dir, o.Walk)
	if err != nil {
		return nil, err
	}
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	se := &Session{Pod: pod, local: local, stop: stop, report: o.Report}
	// Its own context: the last round, after stop, still needs it.
	se.remote = filesync.DialRemote(pod.SyncDialer(context.WithoutCancel(ctx)), filesync.RemoteOptions{Link: func(err error, away time.Duration) {
		se.mu.Lock()
		se.lost = err
		se.mu.Unlock()
		switch {
		case o.Link != nil:
			o.Link(err, away)
		case err != nil && o.Report != nil:
			o.Report(filesync.Report{}, fmt.Errorf("%w: %w", filesync.ErrAway, err))
		}
	}})
	said := "" // the failure said last: a path that fails every round is said once
	se.report = func(r filesync.Report, err error) {
		if errors.Is(err, filesync.ErrAway) {
			err = nil // Link says it, once
		}
		se.mu.Lock()
		switch {
		case err == nil:
			said = ""
		case err.Error() == said:
			err = nil
		default:
			said = err.Error()
		}
		se.mu.Unlock()
		if o.Report != nil && (err != nil || !r.Empty()) {
			o.Report(r, err)
		}
	}
	se.syncer = &filesync.Syncer{Local: local, Remote: se.remote}
	rep, err := se.syncer.Sync(ctx)
	if err != nil {
		se.close()
		return nil, fmt.Errorf("the first sync with the Pod: %w", err)
	}
	if o.Report != nil && !rep.Empty() {
		o.Report(rep, nil)
	}
	se.done.Add(1)
	go func() {
		defer se.done.Done()
		se.syncer.Run(sctx, SyncInterval, se.report)
	}()
	// One server a Pod: a second launcher (or a restart) finds it up.
	script := "pid=$(cat " + coveDir + "/ide.pid 2>/dev/null) && kill -0 \"$pid\" 2>/dev/null && exit 0; " +
		"[ -r " + EnvFile + " ] && . " + EnvFile + "; " +
		"setsid " + CovePath + " ide serve --tcp 127.0.0.1:" + strconv.Itoa(IDEPort) + " --dir " + WorkspaceDir +
		" </dev/null >" + coveDir + "/ide.log 2>&1 & echo $! >" + coveDir + "/ide.pid"
	var errb bytes.Buffer
	if code, err := pod.Exec(ctx, []string{"/bin/sh", "-c", script}, ExecOptions{Stderr: &limited{w: &errb, n: 4096}}); err != nil || code != 0 {
		se.Close()
		if err == nil {
			err = fmt.Errorf("exit %d: %s", code, strings.TrimSpace(errb.String()))
		}
		return nil, fmt.Errorf("start the IDE server in the Pod: %w", err)
	}
	se.ide = pod.Forward(IDEPort)
	// It answers once it listens.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		c, err := se.DialIDE(ctx)
		if err == nil {
			c.Write([]byte("HEAD /api/tree HTTP/1.0\r\n\r\n"))
			var b [12]byte
			n, _ := c.Read(b[:])
			c.Close()
			if n > 0 {
				break
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			se.Close()
			return nil, fmt.Errorf("the IDE server in the Pod does not answer")
		}
	}
	return se, nil
}

// flushWait is how long Flush waits for a broken sync stream to be
// opened again before it fails.
const flushWait = 20 * time.Second

// Flush runs a sync round now: before a command runs in the Pod, what
// was just saved here is there. While the stream to the Pod is broken it
// waits for a new one (up to 20 seconds, within ctx): the command would
// otherwise run on files older than the user's.
func (se *Session) Flush(ctx context.Context) error {
	deadline := time.Now().Add(flushWait)
	for {
		rep, err := se.syncer.Sync(ctx)
		if !rep.Empty() {
			se.report(rep, nil) // its conflicts are said as the loop's are
		}
		if !errors.Is(err, filesync.ErrAway) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// DialIDE connects to the IDE server in the Pod.
func (se *Session) DialIDE(context.Context) (net.Conn, error) { return se.ide.Dial() }

// Close ends the session: a last sync round (what was saved on either side
// is on both), then the sync server and the port-forward. The Pod runs on.
// If the connection to the Pod is broken then, it waits for it as Flush
// does, and says so in its error if it does not come back: what changed
// in the Pod since the break is not here.
func (se *Session) Close() error {
	se.stop()
	se.done.Wait()
	var err error
	if away := se.away(); away != nil {
		ctx, cancel := context.WithTimeout(context.Background(), flushWait+time.Second)
		if ferr := se.Flush(ctx); ferr != nil {
			err = fmt.Errorf("the last sync with the Pod: %w", ferr)
		}
		cancel()
	}
	if cerr := se.close(); err == nil {
		err = cerr
	}
	return err
}

// Drop ends the session without a last round: the Pod is gone (cove
// stop, deleted), and waiting for it to answer again would only hold the
// caller up.
func (se *Session) Drop() error {
	se.stop()
	se.done.Wait()
	return se.close()
}

// away is why the sync's connection to the Pod is broken, nil while it
// answers.
func (se *Session) away() error {
	se.mu.Lock()
	defer se.mu.Unlock()
	return se.lost
}

func (se *Session) close() error {
	se.stop()
	se.remote.Close()
	return se.local.Close()
}
