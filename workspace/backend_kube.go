package workspace

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cove-sh/cove/container"
	"github.com/cove-sh/cove/devcontainer"
	"github.com/cove-sh/cove/internal/projectwalk"
	"github.com/cove-sh/cove/internal/termtext"
	"github.com/cove-sh/cove/workspace/filesync"
	"github.com/cove-sh/cove/workspace/kube"
	"golang.org/x/term"
)

// Kube runs workspaces as Pods on a Kubernetes cluster: the launcher, the
// window, the agent and the keys stay on this machine, the project too,
// synchronised with the Pod's copy while a launcher holds it.
type Kube struct {
	Config kube.Config
	// Binary is cove's static binary, brought into each Pod.
	Binary string
	// Walk are the ignore rules' options for the project's files.
	Walk *projectwalk.Options
	// Stderr hears the sync's notes (a file changed on both sides).
	Stderr io.Writer
	// DefaultImage is the user's default workspace image ("": cove's).
	DefaultImage string

	once    sync.Once
	cluster *kube.Cluster
	err     error
}

var _ Backend = (*Kube)(nil)

// Cluster connects, once, to the cluster and namespace Config names.
func (b *Kube) Cluster() (*kube.Cluster, error) {
	b.once.Do(func() { b.cluster, b.err = kube.Connect(b.Config) })
	return b.cluster, b.err
}

// Running is false: a Pod's workspace always has its files' sync to start.
func (b *Kube) Running(dir string) bool { return false }

// MadeWith remembers nothing: a cluster's workspace is made as each
// command says.
func (b *Kube) MadeWith(dir string) (Made, error) { return nil, nil }

// Key names a Pod's workspace by its cluster, context and namespace too:
// a Pod of the same project elsewhere is another workspace.
func (b *Kube) Key(name string) string {
	sum := sha256.Sum256([]byte(b.Config.Kubeconfig + "\x00" + b.Config.Context + "\x00" + b.Config.Namespace))
	return "kube-" + hex.EncodeToString(sum[:4]) + "-" + name
}

// Copies is true: the Pod works on a copy of the project kept in step.
func (b *Kube) Copies() bool { return true }

// KeepsRunning is Backend.KeepsRunning: a Pod stops with its launcher
// (shutdownAction is not read for a cluster's workspace).
func (b *Kube) KeepsRunning(string) bool { return false }

func (b *Kube) where(k *kube.Cluster) string { return k.Namespace + " on " + k.Server() }

// Ensure runs s.Dir's workspace as a Pod (started if need be), cove
// brought into it, the project synchronised once and then while the
// Workspace is held: Close it to let go (a last sync round).
func (b *Kube) Ensure(ctx context.Context, s Spec) (Workspace, error) {
	k, err := b.Cluster()
	if err != nil {
		return nil, err
	}
	if s.Confinement.Net != "" || s.Confinement.NoSeccomp {
		return nil, fmt.Errorf("--net and --security-opt are this machine's: a Pod has the cluster's network and the RuntimeDefault seccomp profile")
	}
	if s.Fresh {
		return nil, fmt.Errorf("--fresh is this machine's: cove rm --kube -f NAME, then cove up --kube, starts a Pod and volume anew")
	}
	dc, err := b.devcontainer(ctx, s)
	if err != nil {
		return nil, err
	}
	img := s.Image
	if img == "" && dc != nil {
		if err := dc.CheckImage(); err != nil {
			return nil, err
		}
		img = dc.Image
	}
	if img == "" {
		img = cmp.Or(b.DefaultImage, DefaultImage)
	}
	if dc, err = b.imageMetadata(ctx, dc, img); err != nil {
		return nil, err
	}
	name := Name(s.Dir)
	fmt.Fprintf(b.Stderr, "cove: starting %s as a Pod in %s\n", name, b.where(k))
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	spec := kube.Spec{Name: name, Image: img, Limits: s.Limits}
	if err := b.podRuntime(dc, s.Dir, &spec); err != nil {
		return nil, err
	}
	var env []string
	se, err := k.Start(ctx, spec, kube.SessionOptions{
		Dir: s.Dir, Binary: b.Binary, Walk: b.Walk,
		Report: func(r filesync.Report, err error) { SyncNotes(b.Stderr, s.Dir, r, err) },
		Link: func(err error, away time.Duration) {
			if err != nil {
				fmt.Fprintf(b.Stderr, "cove: lost the connection to the workspace's files (%s): reconnecting\n", termtext.Visible(err.Error()))
			} else {
				fmt.Fprintf(b.Stderr, "cove: the workspace's files are synchronised again (away %v)\n", away.Round(100*time.Millisecond))
			}
		},
		Prepare: func(ctx context.Context, pod *kube.Pod) (err error) {
			if dc != nil {
				env, err = podEnv(ctx, pod, dc)
			}
			return err
		},
	})
	if err != nil {
		return nil, err
	}
	w := &KubeWorkspace{b: b, k: k, name: name, pod: se.Pod, session: se}
	if dc == nil {
		return w, nil
	}
	if err := w.lifecycle(ctx, dc, env, s.Attach); err != nil {
		// Never a workspace left running by a failed start; its volume
		// stays, and the create commands run again next time.
		w.Close()
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		k.Stop(stopCtx, name)
		return nil, fmt.Errorf("%w; the workspace %s is stopped (its volume is kept: cove up --kube runs the create commands again)", err, name)
	}
	return w, nil
}

// Open returns the named workspace's Pod if it runs (no sync: that is
// its launcher's).
func (b *Kube) Open(ctx context.Context, name string) (Workspace, error) {
	k, err := b.Cluster()
	if err != nil {
		return nil, err
	}
	pod, err := k.Pod(ctx, name)
	if err != nil {
		return nil, err
	}
	return &KubeWorkspace{b: b, k: k, name: name, pod: pod}, nil
}

// List lists cove's workspaces in the namespace, stopped ones (their
// volume left) among them only with all.
func (b *Kube) List(ctx context.Context, all bool) ([]Info, error) {
	k, err := b.Cluster()
	if err != nil {
		return nil, err
	}
	list, err := k.List(ctx)
	if err != nil {
		return nil, err
	}
	var out []Info
	for _, w := range list {
		if w.Phase == "stopped" && !all {
			continue
		}
		out = append(out, Info{Name: w.Name, Image: w.Image, Status: strings.ToLower(w.Phase), Where: b.where(k), Created: w.Started})
	}
	return out, nil
}

// Stop deletes the workspace's Pod; its volume stays.
func (b *Kube) Stop(ctx context.Context, name string, grace time.Duration) error {
	k, err := b.Cluster()
	if err != nil {
		return err
	}
	return k.Stop(ctx, name)
}

// Remove deletes the workspace's Pod and volume; a running one only with
// force.
func (b *Kube) Remove(ctx context.Context, name string, force bool) error {
	k, err := b.Cluster()
	if err != nil {
		return err
	}
	if !force {
		if _, err := k.Pod(ctx, name); err == nil {
			return fmt.Errorf("the workspace %s is running: cove stop --kube %s first, or cove rm --kube -f", name, name)
		}
	}
	return k.Remove(ctx, name)
}

// KubeWorkspace is a workspace's Pod, and while a launcher holds it, the
// sync of its files.
type KubeWorkspace struct {
	b       *Kube
	k       *kube.Cluster
	name    string
	pod     *kube.Pod
	session *kube.Session // nil when opened, not ensured

	mu      sync.Mutex
	ide     *kube.Forwarder
	checked time.Time // when Running last asked
	gone    bool
}

// Name is the workspace's name.
func (w *KubeWorkspace) Name() string { return w.name }

// ID is the Pod's name: one Pod a workspace.
func (w *KubeWorkspace) ID() string { return w.pod.Namespace + "/" + w.pod.Name }

// Where is the namespace and the API server.
func (w *KubeWorkspace) Where() string { return w.b.where(w.k) }

// Pod is the workspace's Pod.
func (w *KubeWorkspace) Pod() *kube.Pod { return w.pod }

// Exec runs req in the Pod through the API server. Kubernetes' exec has
// no working directory, environment or user of its own: env and cd do the
// first two, as kubectl users do; another user is refused.
func (w *KubeWorkspace) Exec(ctx context.Context, req container.ExecRequest, stdio [3]*os.File) (int, error) {
	o := kube.ExecOptions{TTY: req.Terminal}
	if req.Terminal {
		o.Stdin, o.Stdout = os.Stdin, os.Stdout
		restore, sizes, err := relayTerminal()
		if err != nil {
			return 0, err
		}
		defer restore()
		o.Resize = sizes
	} else {
		if stdio[0] != nil {
			o.Stdin = stdio[0]
		}
		if stdio[1] != nil {
			o.Stdout = stdio[1]
		}
		if stdio[2] != nil {
			o.Stderr = stdio[2]
		}
	}
	return w.exec(ctx, req, o)
}

// exec runs req in the Pod with the workspace's environment (EnvFile),
// in req.Cwd, with req.Env on top.
func (w *KubeWorkspace) exec(ctx context.Context, req container.ExecRequest, o kube.ExecOptions) (int, error) {
	if req.User != "" {
		return 0, fmt.Errorf("exec --kube runs as the Pod's user: --user is not supported there")
	}
	cwd := req.Cwd
	if cwd == "" {
		cwd = kube.WorkspaceDir
	}
	argv := []string{"/bin/sh", "-c", `[ -r ` + kube.EnvFile + ` ] && . ` + kube.EnvFile + `; cd "$0" && exec "$@"`, cwd}
	if len(req.Env) > 0 {
		argv = append(append(argv, "env"), req.Env...)
	}
	return w.pod.Exec(ctx, append(argv, req.Args...), o)
}

// relayTerminal makes this process's terminal raw and follows its size,
// for a command's terminal in the Pod.
func relayTerminal() (restore func(), sizes chan kube.TermSize, err error) {
	fd := int(os.Stdin.Fd())
	if !term.IsTerminal(fd) {
		return nil, nil, fmt.Errorf("exec -t: standard input is not a terminal")
	}
	old, err := term.MakeRaw(fd)
	if err != nil {
		return nil, nil, err
	}
	sizes = make(chan kube.TermSize, 1)
	if w, h, err := term.GetSize(fd); err == nil {
		sizes <- kube.TermSize{Width: uint16(w), Height: uint16(h)}
	}
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	go func() {
		for range winch {
			if w, h, err := term.GetSize(fd); err == nil {
				select {
				case sizes <- kube.TermSize{Width: uint16(w), Height: uint16(h)}:
				default:
				}
			}
		}
	}()
	return func() {
		signal.Stop(winch)
		term.Restore(fd, old)
	}, sizes, nil
}

// DialIDE connects to the IDE server in the Pod through a port-forward.
func (w *KubeWorkspace) DialIDE(ctx context.Context) (net.Conn, error) {
	if w.session != nil {
		return w.session.DialIDE(ctx)
	}
	w.mu.Lock()
	if w.ide == nil {
		w.ide = w.pod.Forward(kube.IDEPort)
	}
	f := w.ide
	w.mu.Unlock()
	return f.Dial()
}

// Sync runs a sync round now, when this process holds the sync.
func (w *KubeWorkspace) Sync(ctx context.Context) error {
	if w.session == nil {
		return nil
	}
	return w.session.Flush(ctx)
}

// Running says whether the Pod is still there: false once it is deleted
// (cove stop --kube). An API server that does not answer (asleep, a
// restart) is not taken for a stop: the launcher waits for it. Asked at
// most every few seconds.
func (w *KubeWorkspace) Running() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if time.Since(w.checked) < 3*time.Second {
		return !w.gone
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if gone, err := w.k.Gone(ctx, w.name); err == nil {
		w.gone = gone
	}
	w.checked = time.Now()
	return !w.gone
}

// Stopped is closed once Running says the Pod is gone, asked every few
// seconds.
func (w *KubeWorkspace) Stopped(ctx context.Context) <-chan struct{} {
	gone := make(chan struct{})
	go func() {
		tick := time.NewTicker(3 * time.Second)
		defer tick.Stop()
		for w.Running() {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
		close(gone)
	}()
	return gone
}

// Published is none: a Pod's ports reach this machine only through the
// launcher's tunnels (the IDE server's, by port-forward).
func (w *KubeWorkspace) Published() []container.Port { return nil }

// ExecFlags reach the same Pod: --kube and the cluster's flags.
func (w *KubeWorkspace) ExecFlags() []string {
	flags := []string{"--kube"}
	for _, f := range [][2]string{{"kubeconfig", w.b.Config.Kubeconfig}, {"context", w.b.Config.Context}, {"namespace", w.b.Config.Namespace}} {
		if f[1] != "" {
			flags = append(flags, "--"+f[0], f[1])
		}
	}
	return flags
}

// Close lets go of the workspace: a last sync round (what was saved in
// the Pod is here), then the sync and the port-forward end. The Pod runs
// on. Once Running has found the Pod gone, there is no last round.
func (w *KubeWorkspace) Close() error {
	if w.session == nil {
		return nil
	}
	w.mu.Lock()
	gone := w.gone
	w.mu.Unlock()
	if gone {
		// Stopped from elsewhere: no Pod to take a last round from (what
		// it had is in its volume, for the next start).
		return w.session.Drop()
	}
	return w.session.Close()
}

// SyncNotes says what a sync round did that the user should know: a file
// changed on both sides (both kept), files too large to carry, paths a
// side cannot read (left alone: dir is the project here, for the command
// that makes them readable), a failure.
func SyncNotes(w io.Writer, dir string, r filesync.Report, err error) {
	for _, cf := range r.Conflicts {
		if cf.Dir {
			fmt.Fprintf(w, "cove: %s is a directory on one side and a file on the other: the directory stays, the file is %s\n", termtext.Visible(cf.Path), termtext.Visible(cf.Kept))
		} else if cf.Kept != "" {
			fmt.Fprintf(w, "cove: %s changed here and in the workspace: yours stays, the workspace's is %s\n", termtext.Visible(cf.Path), termtext.Visible(cf.Kept))
		} else {
			fmt.Fprintf(w, "cove: %s was deleted on one side and changed on the other: the change is kept\n", termtext.Visible(cf.Path))
		}
	}
	for _, p := range r.TooLarge {
		fmt.Fprintf(w, "cove: %s is over %d MiB and is not synchronised\n", termtext.Visible(p), filesync.MaxFileSize>>20)
	}
	for _, u := range r.UnreadableLocal {
		fmt.Fprintf(w, "cove: %s cannot be read here (%s): it is left as it is on both sides, not synchronised, until it can be; make it readable: %s\n",
			termtext.Visible(u.Path), termtext.Visible(u.Why), termtext.Visible(chmodReadable(filepath.Join(dir, u.Path), u.Dir)))
	}
	for _, u := range r.UnreadableRemote {
		fmt.Fprintf(w, "cove: %s cannot be read in the workspace (%s): it is left as it is on both sides, not synchronised, until it can be; make it readable there: %s\n",
			termtext.Visible(u.Path), termtext.Visible(u.Why), termtext.Visible(chmodReadable(kube.WorkspaceDir+"/"+u.Path, u.Dir)))
	}
	if err != nil {
		fmt.Fprintf(w, "cove: sync: %s (tried again)\n", termtext.Visible(err.Error()))
	}
}

// chmodReadable is the command that makes p readable by its owner: a
// directory with all it holds, and searchable.
func chmodReadable(p string, dir bool) string {
	plain := func(r rune) bool {
		return r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+@%,:=", r))
	}
	if strings.ContainsFunc(p, func(r rune) bool { return !plain(r) }) {
		p = shellQuote(p)
	}
	if dir {
		return "chmod -R u+rX " + p
	}
	return "chmod u+r " + p
}

// KubeChoice is the cluster s.Dir's devcontainer.json chooses for its
// workspace (customizations.cove.kube), nil when it chooses none. The
// file is the project's to write: its choice (which sends the project's
// files to that cluster) is followed only once the user trusted the file
// (or trusts it now, s.Trust); until then it is said on w. A file cove
// cannot read chooses nothing here: Ensure says why.
func KubeChoice(w io.Writer, s Spec) *kube.Config {
	dc, err := devcontainer.Load(s.Dir, devcontainerOptions(s))
	if err != nil || dc == nil {
		return nil
	}
	choice, err := dc.Kube()
	if err != nil || choice == nil {
		return nil
	}
	if !dc.Trusted && !s.Trust {
		fmt.Fprintf(w, "cove: note: %s asks for the workspace to run on a Kubernetes cluster (customizations.cove.kube): it does once you trust the file (cove up --trust), or with cove up --kube; it runs here now\n", dc.Path)
		return nil
	}
	return &kube.Config{Context: choice.Context, Namespace: choice.Namespace}
}
