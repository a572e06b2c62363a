package workspace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cove-sh/cove/container"
	"github.com/cove-sh/cove/devcontainer"
	"github.com/cove-sh/cove/devcontainer/devimage"
	"github.com/cove-sh/cove/image"
	"github.com/cove-sh/cove/image/progress"
	"github.com/cove-sh/cove/internal/projectfs"
	"github.com/cove-sh/cove/internal/termtext"
	securejoin "github.com/cyphar/filepath-securejoin"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// devcontainerOptions are where cove finds the project's devcontainer.json
// and what the host gives it: the user's trust record, and the host's
// environment for a trusted file's ${localEnv:…}.
func devcontainerOptions(s Spec) devcontainer.Options {
	home, _ := os.UserHomeDir()
	return devcontainer.Options{ConfigPath: s.Config, Home: home, Getenv: os.Getenv}
}

// FilesBeforeStart says whether s.Dir's workspace reads the project's
// files before its container runs: its initializeCommand (run in the
// project, on this machine), an image built with the project as its
// context (build, Compose), or bind mounts that may name paths inside it
// (the last two only once the user trusts the file). A devcontainer.json
// that cannot be read says yes: the start will say why.
func FilesBeforeStart(s Spec) bool {
	dc, err := devcontainer.Load(s.Dir, devcontainerOptions(s))
	if err != nil {
		return true
	}
	if dc == nil {
		return false
	}
	if dc.InitializeCommand != nil || dc.Build != nil || dc.DockerComposeFile != nil {
		return true
	}
	return slices.ContainsFunc(dc.Mounts, func(m devcontainer.Mount) bool { return m.Type == "bind" })
}

// trust records that the user trusts the project's devcontainer.json as
// it is now, and shows what that lets take effect (when: now, or at the
// next start of a workspace that runs), each host path as it is bound.
func trust(errw io.Writer, s Spec, dir, when string) error {
	opts := devcontainerOptions(s)
	path, grants, err := devcontainer.Trust(dir, opts)
	if err != nil {
		return fmt.Errorf("--trust: %w", err)
	}
	what := "nothing in it reaches outside the workspace"
	if len(grants) > 0 {
		for i, g := range grants {
			grants[i] = strings.ReplaceAll(g, "\n", `\n`) // one line each, whatever the file holds
		}
		what = "what takes effect " + when + ":\n  - " + strings.Join(grants, "\n  - ")
	}
	// The file is the workspace's: its text is shown as text.
	fmt.Fprintf(errw, "cove: trusting %s as it is now (recorded in %s); %s\n",
		path, devcontainer.TrustPath(opts.Home), termtext.Visible(what))
	return nil
}

// TrustRunning records the trust --trust asks for when s.Dir's workspace
// runs already (cove up or cove shell finds it running): what it lets
// take effect does at the workspace's next start, which it says.
func TrustRunning(errw io.Writer, s Spec, name string) error {
	if err := trust(errw, s, s.Dir, "at the next start"); err != nil {
		return err
	}
	fmt.Fprintf(errw, "cove: the workspace %s runs already: the trusted file takes effect at its next start (cove stop %s, then cove up)\n", name, name)
	return nil
}

// loadDevcontainer reads the project's devcontainer.json, trusting it
// first when --trust says so, and says once on stderr what of it is not
// applied.
func loadDevcontainer(errw io.Writer, s Spec, dir string) (*devcontainer.Config, error) {
	opts := devcontainerOptions(s)
	if s.Trust {
		if err := trust(errw, s, dir, "now"); err != nil {
			return nil, err
		}
	}
	dc, err := devcontainer.Load(dir, opts)
	if err != nil || dc == nil {
		return dc, err
	}
	for _, n := range dc.Notes {
		fmt.Fprintf(errw, "cove: note: devcontainer.json: %s\n", termtext.Visible(n))
	}
	if n := dc.UntrustedNote(); n != "" {
		fmt.Fprintf(errw, "cove: note: %s\n", termtext.Visible(n))
	}
	return dc, nil
}

// buildWorkspaceImage builds the image devcontainer.json's build section
// describes (its RUN steps in confined containers, with a network of their own),
// stored under a tag of the workspace's own, and returns that tag and the
// image's digest; without a build section, ref and "". An unchanged
// Dockerfile and context rebuild from the cache to the same digest.
func (lo *Local) buildImage(ctx context.Context, dc *devcontainer.Config, dir, name, ref string) (string, string, error) {
	ib, err := dc.ImageBuild()
	if err != nil || ib == nil {
		return ref, "", err
	}
	store, err := lo.store()
	if err != nil {
		return "", "", err
	}
	bin, err := lo.binary()
	if err != nil {
		return "", "", err
	}
	tag := "cove-devcontainer/" + name + ":build"
	fmt.Fprintf(lo.Stderr, "cove: building the workspace image from %s\n", termtext.Visible(filepath.Join(dir, ib.Dockerfile)))
	// FROM's pull, a line a layer (bars would fight the build's output).
	bars := progress.New(struct{ io.Writer }{lo.Stderr}, "the Dockerfile's base image", false)
	res, err := devimage.Build(ctx, dir, ib, tag, devimage.Options{
		Store: store, Binary: bin, CacheDir: filepath.Join(lo.Layout.Data, "build"),
		// The Dockerfile is the project's: its output is shown as text.
		Output: commandOutput(lo.Stderr), Pull: []image.Option{image.WithProgress(bars.Update)},
	})
	if err != nil {
		return "", "", err
	}
	fmt.Fprintf(lo.Stderr, "cove: built %s (%d of %d layer steps cached)\n", res.Ref, res.Hits, res.Steps)
	return tag, res.Image.Digest.String(), nil
}

// installWorkspaceFeatures installs the Features devcontainer.json asks
// for on the image base (each install.sh as root in a confined build
// container, with a network of its own, cached by the Feature's content and
// options), stored under a tag of the workspace's own; nil when it asks
// for none. Fetching a Feature from a registry is as pulling the image:
// the project chooses both, and what they run runs in containers. With
// refresh (--fresh) each reference is asked for again.
func (lo *Local) installFeatures(ctx context.Context, dc *devcontainer.Config, base, name string, refresh bool) (*devimage.FeatureResult, error) {
	if want, err := dc.Features(); err != nil || len(want) == 0 {
		return nil, err
	}
	store, err := lo.store()
	if err != nil {
		return nil, err
	}
	bin, err := lo.binary()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	// The base image's pull, a line a layer (bars would fight the build's
	// output for the terminal).
	bars := progress.New(struct{ io.Writer }{lo.Stderr}, base, false)
	res, err := devimage.InstallFeatures(ctx, dc, base, "cove-devcontainer/"+name+":features", devimage.Options{
		Store: store, Binary: bin, CacheDir: filepath.Join(lo.Layout.Data, "build"),
		Output: commandOutput(lo.Stderr), Pull: []image.Option{image.WithProgress(bars.Update)}, Refresh: refresh,
	})
	if err != nil {
		return nil, err
	}
	for _, n := range res.Notes {
		fmt.Fprintf(lo.Stderr, "cove: note: %s\n", termtext.Visible(n))
	}
	if res.Digest == "" {
		return nil, nil // every one held back, and said
	}
	fmt.Fprintf(lo.Stderr, "cove: Features installed: %s (%d of %d layer steps cached, %v)\n",
		termtext.Visible(strings.Join(res.Order, ", ")), res.Hits, res.Steps, time.Since(start).Round(time.Millisecond))
	return res, nil
}

// initializeCommand runs a trusted file's initializeCommand on the host,
// in the project, with pipes (never the terminal); an untrusted file's
// was dropped when it was read.
func initializeCommand(ctx context.Context, errw io.Writer, dc *devcontainer.Config, dir, home string) error {
	steps := dc.Steps("initializeCommand", os.Environ())
	if len(steps) == 0 {
		return nil
	}
	// Again, just before it runs: the trust binds the scripts it names,
	// and the workspace (one still running, or a container with the
	// project bound) may have changed them since the file was read.
	if !devcontainer.Trusted(home, dir, dc.Path, dc.Raw) {
		return fmt.Errorf("initializeCommand: what it runs changed since %s was read, and is not what you trusted: look at it, then cove up --trust", dc.Path)
	}
	fmt.Fprintf(errw, "cove: initializeCommand (on this host, as you trusted it): %s\n", termtext.Visible(stepsString(steps)))
	out := &lockedWriter{w: commandOutput(errw)}
	return runParallel(steps, "initializeCommand", func(s devcontainer.Step) (int, error) {
		cmd := exec.CommandContext(ctx, s.Argv[0], s.Argv[1:]...)
		cmd.Dir, cmd.Stdout, cmd.Stderr = dir, out, out
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), nil
		}
		return 0, err
	})
}

func stepsString(steps []devcontainer.Step) string {
	var parts []string
	for _, s := range steps {
		parts = append(parts, s.String())
	}
	return strings.Join(parts, "; ")
}

// lockedWriter serialises the writes of commands run in parallel.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// runParallel runs steps at once (the object form; one step otherwise)
// and says which failed, with its exit status.
func runParallel(steps []devcontainer.Step, key string, run func(devcontainer.Step) (int, error)) error {
	errs := make([]error, len(steps))
	var wg sync.WaitGroup
	for i, s := range steps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, err := run(s)
			switch {
			case err != nil:
				errs[i] = fmt.Errorf("%s (%s): %w", key, termtext.Visible(s.String()), err)
			case code != 0:
				errs[i] = fmt.Errorf("%s (%s) failed with exit status %d", key, termtext.Visible(s.String()), code)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// lifecycle runs the lifecycle commands of the workspace st as the spec
// orders them: on its first start onCreateCommand, updateContentCommand
// and postCreateCommand (a marker beside its layer says they ran: cove rm
// or --fresh runs them again), on every start postStartCommand, and
// postAttachCommand where a user attaches (cove up, cove shell). Each runs
// in the workspace folder as the workspace's user, with pipes; its output
// is shown with control characters made visible.
func (lo *Local) lifecycle(ctx context.Context, st *container.State, dc *devcontainer.Config, layerDir string, env []string, started, attach bool) error {
	if dc == nil {
		return nil
	}
	marker := filepath.Join(layerDir, "created-done")
	_, err := os.Stat(marker)
	created := err == nil
	if _, err := os.Stat(filepath.Join(layerDir, "post-create-done")); err == nil {
		created = true // the marker of cove before onCreateCommand
	}
	var keys []string
	if started && !created {
		keys = append(keys, devcontainer.OnCreate, devcontainer.UpdateContent, devcontainer.PostCreate)
	}
	if started {
		keys = append(keys, devcontainer.PostStart)
	}
	if attach {
		keys = append(keys, devcontainer.PostAttach)
	}
	if started {
		// For a user attaching later to the workspace as it runs now.
		b, _ := json.Marshal(attachRecord{Folder: dc.Folder(), Groups: dc.Lifecycle(devcontainer.PostAttach, env)})
		if err := os.WriteFile(filepath.Join(layerDir, "post-attach.json"), b, 0o600); err != nil {
			return err
		}
	}
	if err := runLifecycle(ctx, lo.Stderr, dc, env, keys, lo.stepIn(st, dc.Folder())); err != nil {
		return err
	}
	if started && !created {
		return os.WriteFile(marker, nil, 0o600)
	}
	return nil
}

// runStep runs one lifecycle step's argv in the workspace, its output to
// out, and returns its exit status.
type runStep func(ctx context.Context, argv []string, out io.Writer) (int, error)

// stepIn runs steps in the workspace st, in dir.
func (lo *Local) stepIn(st *container.State, dir string) runStep {
	return func(ctx context.Context, argv []string, out io.Writer) (int, error) {
		return lo.execPiped(ctx, st, container.ExecRequest{Args: argv, Cwd: dir}, out)
	}
}

// runLifecycle runs the lifecycle commands keys of dc in order, a group
// after the other (see runGroup). A create command's failure is the
// error; postStartCommand's and postAttachCommand's are warnings.
func runLifecycle(ctx context.Context, errw io.Writer, dc *devcontainer.Config, env []string, keys []string, run runStep) error {
	for _, key := range keys {
		for _, steps := range dc.Lifecycle(key, env) {
			if err := runGroup(ctx, errw, key, steps, run); err != nil {
				if key == devcontainer.PostStart || key == devcontainer.PostAttach {
					fmt.Fprintf(errw, "cove: warning: %v\n", err)
					continue
				}
				return err
			}
		}
	}
	return nil
}

// runGroup runs steps, a group of the lifecycle command key, at once;
// their output is shown on errw as the project's (commandOutput).
func runGroup(ctx context.Context, errw io.Writer, key string, steps []devcontainer.Step, run runStep) error {
	fmt.Fprintf(errw, "cove: %s: %s\n", key, termtext.Visible(stepsString(steps)))
	out := &lockedWriter{w: commandOutput(errw)}
	return runParallel(steps, key, func(s devcontainer.Step) (int, error) { return run(ctx, s.Argv, out) })
}

// execPiped runs req in the workspace with /dev/null for input and a pipe
// to out for its output: the command is the workspace's, and never gets
// the host's terminal.
func (lo *Local) execPiped(ctx context.Context, st *container.State, req container.ExecRequest, out io.Writer) (int, error) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		return 0, err
	}
	defer null.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	copied := make(chan struct{})
	go func() {
		io.Copy(out, pr)
		pr.Close()
		close(copied)
	}()
	code, err := container.Exec(filepath.Join(lo.states().Dir(st.Name), "ctl.sock"), req, [3]*os.File{null, pw, pw}, nil)
	pw.Close()
	select {
	case <-copied:
	case <-time.After(time.Second):
		pr.Close() // a job it left in the background keeps the pipe: no more of it is shown
	case <-ctx.Done():
	}
	return code, err
}

// workspaceUser makes the workspace run as devcontainer.json's user
// (remoteUser, else containerUser, the file's over the image's metadata):
// the IDE server, so its terminals and its writes are that user's, and
// with it cove exec, cove shell and the lifecycle commands (they default
// to the workload's user), with the user's HOME. As root, the project
// stays its owner's on the host and is that user's inside (the ID-mapped
// bind maps its owner to the user's ids): devcontainer.json's
// updateRemoteUserUID, without changing the image's /etc/passwd.
//
// Rootless, the user namespace does it: with subordinate ids, the user
// is mapped to the workspace user's ids (keep-id, returned for the
// launch), so that the project, and the image a rootless store holds as
// the user's, are that user's inside; note says what that costs, or, where
// it cannot be, what the user cannot do and how to get it. Without
// keep-id a new volume cannot be given to the user from here (its id is
// in the user's subordinate range): chown names it (the ids and the
// volumes' targets), for the workspace's root to do once it runs.
func workspaceUser(dc *devcontainer.Config, rootfs, upper, sockDir, project string, proc *container.Process, binds []container.Bind, chown *[]string, wsName string, note func(string)) (*container.KeepID, error) {
	name := dc.User()
	if name == "" {
		return nil, nil
	}
	proc.User = name
	// The user's HOME from /etc/passwd, unless the file sets one.
	if _, set := dc.ContainerEnv["HOME"]; !set {
		if _, set := dc.RemoteEnv["HOME"]; !set {
			proc.Env = slices.DeleteFunc(proc.Env, func(kv string) bool { return strings.HasPrefix(kv, "HOME=") })
		}
	}
	tmp, err := os.MkdirTemp("", "cove-accounts-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	var passwd, group string
	if _, err := os.Lstat(filepath.Join(upper, "etc", "passwd")); err == nil {
		// The kept layer's accounts (an onCreateCommand's adduser). The
		// layer is the workspace's to write: its files are read confined
		// to it (a symlink to the host's /etc/shadow, or a FIFO, is not
		// followed), from a copy.
		if passwd, group, err = copyAccounts(upper, tmp); err != nil {
			return nil, fmt.Errorf("the workspace's /etc/passwd: %w", err)
		}
	} else if passwd, group, err = imageAccounts(rootfs, tmp); err != nil {
		return nil, fmt.Errorf("the image's /etc/passwd: %w", err)
	}
	u, err := container.LookupUser(name, passwd, group)
	if err != nil {
		return nil, fmt.Errorf("devcontainer.json: remoteUser/containerUser %q: %w; add the user to the image, or name one it has", name, err)
	}
	if u.UID == 0 {
		return nil, nil
	}
	update := dc.UpdateRemoteUserUID == nil || *dc.UpdateRemoteUserUID
	var keep *container.KeepID
	if os.Geteuid() != 0 {
		kept := strings.HasPrefix(image.OwnersAt(rootfs), "subids ")
		keep = rootlessKeepID(name, u, wsName, update, container.RootlessIDMap().Ranged, kept, note)
	}
	// The server, as that user, makes its socket here; the directory is
	// the workspace's to write anyway, and its parent (0700) keeps the
	// host's other users out.
	if err := os.Chmod(sockDir, 0o777); err != nil {
		return nil, err
	}
	// A new volume (still empty) is the user's to write, as a Docker
	// volume takes its mount point's owner; one in use keeps its owner.
	volumes := filepath.Join(filepath.Dir(upper), "volumes") + "/"
	for _, b := range binds {
		if keep != nil {
			break // the user's directories are the user's inside
		}
		if strings.HasPrefix(b.Source, volumes) {
			if names, err := os.ReadDir(b.Source); err == nil && len(names) == 0 {
				if os.Geteuid() != 0 {
					if len(*chown) == 0 {
						*chown = append(*chown, fmt.Sprintf("%d:%d", u.UID, u.GID))
					}
					*chown = append(*chown, b.Target)
					continue
				}
				if err := os.Lchown(b.Source, int(u.UID), int(u.GID)); err != nil {
					return nil, fmt.Errorf("volume %s: %w", b.Target, err)
				}
			}
		}
	}
	if os.Geteuid() != 0 {
		return keep, nil // rootless: the user namespace maps the ids
	}
	// The project's owner on the host is the user inside (an ID-mapped
	// bind), whoever owns it: a user (their files stay theirs), or root
	// (cove run as root on a CI box, a sudo git clone), where the user
	// could otherwise write nothing in /workspace. What the user makes
	// there is the owner's on the host, as what root makes inside is
	// root's without the map: the map gives the workspace no id on the
	// project it did not have.
	if fi, err := os.Stat(project); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && update {
			for i := range binds {
				if binds[i].Source == project {
					binds[i].MapOwner, binds[i].OwnerUID, binds[i].OwnerGID = true, int(u.UID), int(u.GID)
				}
			}
		} else if ok && st.Uid != u.UID {
			note(fmt.Sprintf("the project is uid %d's on this host and devcontainer.json's updateRemoteUserUID is false: %s (uid %d) cannot write /workspace; chown -R %d %s, or drop updateRemoteUserUID (the project's owner is then %s inside)",
				st.Uid, name, u.UID, u.UID, project, name))
		}
	}
	return nil, nil
}

// rootlessKeepID decides, for a rootless workspace (wsName) whose user
// (name, u) is not root, whether the user namespace maps the launching user to u
// (keep-id: the project and the image's files are u's inside), and says
// once what the choice means: with keep-id, where the image's files kept
// their owners (kept: the launch runs on a copy of the image with them
// moved for the mapping), that root is cove exec -u root; where they are
// all the user's, that they are u's too (so setuid-root programs such as
// sudo do nothing); without it (updateRemoteUserUID
// false, or no subordinate ids: ranged false), that u cannot write the
// project, and how to have it.
func rootlessKeepID(name string, u container.User, wsName string, update, ranged, kept bool, note func(string)) *container.KeepID {
	who := fmt.Sprintf("the workspace's user %s (uid %d)", name, u.UID)
	switch {
	case !update:
		note(fmt.Sprintf("updateRemoteUserUID is false: the project and the image's files are root's inside, and %s cannot write them", who))
		return nil
	case !ranged:
		note(fmt.Sprintf("%s cannot write the project: inside, your files are root's. To map you to that user, as with updateRemoteUserUID, install newuidmap/newgidmap (the uidmap package) and give your user subordinate ids in /etc/subuid and /etc/subgid (usermod --add-subuids 100000-165535 --add-subgids 100000-165535 USER), or run cove as root", who))
		return nil
	}
	if kept {
		note(fmt.Sprintf("rootless, you are %s inside (your user namespace maps you to it): the project is that user's to write; for root, cove exec -u root %s …", who, wsName))
	} else {
		note(fmt.Sprintf("rootless, you are %s inside (your user namespace maps you to it): the project is that user's to write, and so are the image's files, which your rootless store holds as yours (stored before cove kept their owners: cove rmi and pull it again), so setuid-root programs such as sudo give nothing; for root, cove exec -u root %s …", who, wsName))
	}
	return &container.KeepID{UID: int(u.UID), GID: int(u.GID)}
}

// workspaceMounts are devcontainer.json's mounts as binds: a volume is a
// directory cove keeps beside the workspace's layer (volumes/NAME, gone
// with cove rm or --fresh); a bind of a host path is there only when the
// user trusted the file (an untrusted one's were dropped when it was read).
func workspaceMounts(ms []devcontainer.Mount, trusted bool, project, layerDir string) ([]container.Bind, []container.Tmpfs, error) {
	var binds []container.Bind
	var tmpfs []container.Tmpfs
	for _, m := range ms {
		switch m.Type {
		case "tmpfs":
			t := container.Tmpfs{Target: m.Target, ReadOnly: m.ReadOnly}
			if err := t.SetOptions(m.Options...); err != nil {
				return nil, nil, fmt.Errorf("devcontainer.json: mounts: %w", err)
			}
			tmpfs = append(tmpfs, t)
		case "volume":
			name := m.Source
			if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
				name = "anon-" + strings.ReplaceAll(strings.Trim(m.Target, "/"), "/", "-")
			}
			dir := filepath.Join(layerDir, "volumes", name)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, nil, fmt.Errorf("devcontainer.json: mounts: volume %s: %w", m.Source, err)
			}
			binds = append(binds, container.Bind{Source: dir, Target: m.Target, ReadOnly: m.ReadOnly})
		case "bind":
			if !trusted {
				continue
			}
			if _, err := os.Stat(m.Source); errors.Is(err, fs.ErrNotExist) {
				hint := "create it, or take the mount out"
				if filepath.Base(m.Source) == "docker.sock" {
					hint = "it is Docker's socket, and this machine runs no Docker engine (podman's, from podman system service, is $XDG_RUNTIME_DIR/podman/podman.sock); take the mount out, or point it there"
				}
				return nil, nil, fmt.Errorf("devcontainer.json: mounts: the host path %s does not exist on this machine: %s", m.Source, hint)
			}
			if err := stayInProject(project, m.Source); err != nil {
				return nil, nil, fmt.Errorf("devcontainer.json: mounts: %w", err)
			}
			binds = append(binds, container.Bind{Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly})
		}
	}
	return binds, tmpfs, nil
}

// stayInProject refuses a bind source in the project that leads out of
// it. The project is the workspace's to write: it can make any path in it
// a symlink to one of this machine's, which the bind would follow (a
// trusted file's "source=${localWorkspaceFolder}/cache" giving it ~/.ssh
// at the next start).
func stayInProject(project, src string) error {
	if project == "" || !(devcontainer.Mount{Source: src}).InProject(project) {
		return nil
	}
	root, err := filepath.EvalSymlinks(project)
	if err != nil {
		return err
	}
	real, err := filepath.EvalSymlinks(src)
	if err != nil {
		return err
	}
	if rel, err := filepath.Rel(root, real); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return fmt.Errorf("%s is in the project but leads out of it (to %s): the workspace can write the project, so cove binds only what stays in it; make it a directory there, or name the host path itself", src, real)
	}
	return nil
}

// workspaceEnv applies devcontainer.json's containerEnv and remoteEnv to
// env (the image's): values set, and names remoteEnv unsets (null) gone.
func workspaceEnv(dc *devcontainer.Config, env []string) []string {
	set, unset := dc.Env(env)
	out := make([]string, 0, len(env)+len(set))
	seen := map[string]int{}
	for _, kv := range append(append([]string{}, env...), set...) {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := seen[k]; ok {
			out[i] = kv
			continue
		}
		seen[k] = len(out)
		out = append(out, kv)
	}
	return slices.DeleteFunc(out, func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return slices.Contains(unset, k)
	})
}

// copyAccounts copies the layer's etc/passwd and etc/group, read through
// projectfs (confined to the layer, regular files only, bounded), into
// dir, and returns their copies' paths ("" for one the layer lacks, which
// LookupUser takes as empty).
func copyAccounts(layer, dir string) (passwd, group string, err error) {
	d, err := projectfs.Open(layer)
	if err != nil {
		return "", "", err
	}
	defer d.Close()
	var out [2]string
	for i, name := range []string{"passwd", "group"} {
		b, err := d.ReadFileLimit(filepath.Join("etc", name), 4<<20)
		if errors.Is(err, fs.ErrNotExist) {
			out[i] = filepath.Join(dir, "missing-"+name)
			continue
		}
		if err != nil {
			return "", "", err
		}
		out[i] = filepath.Join(dir, name)
		if err := os.WriteFile(out[i], b, 0o600); err != nil {
			return "", "", err
		}
	}
	return out[0], out[1], nil
}

// imageAccounts copies the image's etc/passwd and etc/group into dir, as
// copyAccounts does the layer's. The project chose the image: its
// symlinks are resolved inside its root filesystem, as they are in the
// container (an etc/passwd -> /etc/shadow names the image's, not this
// machine's, which the lookup's errors would show a field of), and only
// a regular file is read, bounded.
func imageAccounts(rootfs, dir string) (passwd, group string, err error) {
	var out [2]string
	for i, name := range []string{"passwd", "group"} {
		out[i] = filepath.Join(dir, "missing-"+name)
		p, err := securejoin.SecureJoin(rootfs, filepath.Join("etc", name))
		if err != nil {
			return "", "", err
		}
		// The image's tree does not change under us: what SecureJoin
		// resolved is opened as it is, its last component not followed.
		f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", "", err
		}
		b, err := readRegular(f, 4<<20)
		if err != nil {
			return "", "", fmt.Errorf("etc/%s: %w", name, err)
		}
		out[i] = filepath.Join(dir, name)
		if err := os.WriteFile(out[i], b, 0o600); err != nil {
			return "", "", err
		}
	}
	return out[0], out[1], nil
}

// readRegular reads f, then closes it, if it is a regular file of at most
// limit bytes.
func readRegular(f *os.File, limit int64) ([]byte, error) {
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > limit {
		return nil, fmt.Errorf("not a regular file of at most %d bytes", limit)
	}
	return io.ReadAll(io.LimitReader(f, limit))
}

// fileRuntime reads what devcontainer.json's runArgs, capAdd and
// securityOpt ask of the runtime (a trusted file's: an untrusted one's
// were dropped when it was read), and applies its limits, network and
// seccomp where the command line says nothing.
func fileRuntime(dc *devcontainer.Config, limits *container.Limits, conf *Confinement) (*devcontainer.Runtime, error) {
	rt, err := dc.Runtime()
	if err != nil {
		return nil, err
	}
	if rt.Memory != "" && limits.Memory == 0 {
		if limits.Memory, err = container.ParseSize(rt.Memory); err != nil {
			return nil, fmt.Errorf("%s: runArgs --memory: %w", dc.Path, err)
		}
	}
	if rt.CPUs != "" && limits.CPUs == 0 {
		if limits.CPUs, err = strconv.ParseFloat(rt.CPUs, 64); err != nil || limits.CPUs <= 0 {
			return nil, fmt.Errorf("%s: runArgs --cpus %q: want a number of CPUs, as 1.5", dc.Path, rt.CPUs)
		}
	}
	if rt.PIDs != "" && limits.PIDs == 0 {
		if limits.PIDs, err = strconv.ParseInt(rt.PIDs, 10, 64); err != nil {
			return nil, fmt.Errorf("%s: runArgs --pids-limit %q: want a number", dc.Path, rt.PIDs)
		}
	}
	if rt.Net != "" && conf.Net == "" {
		conf.Net = rt.Net
	}
	conf.NoSeccomp = conf.NoSeccomp || rt.NoSeccomp
	return rt, nil
}

// workspaceMountBind is devcontainer.json's workspaceMount: the project
// (or, trusted, another host path) bound where it says, or a volume kept
// per workspace there; nil when the file has none.
func workspaceMountBind(dc *devcontainer.Config, project, layerDir string) (*container.Bind, error) {
	if dc == nil || dc.WorkspaceMount == "" {
		return nil, nil
	}
	m, err := devcontainer.ParseMount(dc.WorkspaceMount)
	if err != nil {
		return nil, fmt.Errorf("%s: workspaceMount: %w", dc.Path, err)
	}
	if m.Type == "bind" && filepath.Clean(m.Source) != project && !dc.Trusted {
		return nil, nil // held back, and said, when the file was read
	}
	binds, _, err := workspaceMounts([]devcontainer.Mount{m}, true, project, layerDir)
	if err != nil || len(binds) == 0 {
		return nil, err
	}
	return &binds[0], nil
}

// applyRuntime applies, once the image's metadata is merged into dc, its
// capabilities and security options (the file's with the image's and the
// Features') and the mounts the metadata added (from index before on).
func (lo *Local) applyRuntime(dc *devcontainer.Config, l *Launch, project, layerDir string, before int) error {
	if dc == nil {
		return nil
	}
	rt, err := dc.Runtime()
	if err != nil {
		return err
	}
	for _, n := range append(append([]string{}, rt.CapAdd...), rt.CapDrop...) {
		if _, err := container.ParseCap(n); err != nil {
			return fmt.Errorf("%s: %w", dc.Path, err)
		}
	}
	l.CapAdd, l.CapDrop = rt.CapAdd, rt.CapDrop
	if l.Net == container.NetPrivate && slices.ContainsFunc(rt.CapAdd, func(n string) bool {
		return strings.EqualFold(strings.TrimPrefix(strings.ToUpper(n), "CAP_"), "NET_RAW")
	}) {
		fmt.Fprintf(lo.Stderr, "cove: note: capAdd NET_RAW is not given in the private network: raw packets would reach around the routes that keep your host out of reach (--net host gives it)\n")
	}
	l.NoNewPrivileges = rt.NoNewPrivileges
	l.NoSeccomp = l.NoSeccomp || rt.NoSeccomp
	if before < len(dc.Mounts) {
		extra, tmpfs, err := workspaceMounts(dc.Mounts[before:], dc.Trusted, project, layerDir)
		if err != nil {
			return err
		}
		l.Binds = append(l.Binds, extra...)
		l.Tmpfs = append(l.Tmpfs, tmpfs...)
	}
	return nil
}

// startCommand is what runs as the workspace starts, beside its server
// and before the lifecycle commands, as containerUser (else the image's
// USER, else root): the metadata's entrypoints in turn (a Feature's
// daemon: they start it and return), as the devcontainers CLI runs them,
// then, with overrideCommand false, the image's own ENTRYPOINT and CMD in
// the background. Nil when there is nothing to run.
func startCommand(dc *devcontainer.Config, cfg *v1.ConfigFile) (argv []string, user string, err error) {
	if dc == nil || cfg == nil {
		return nil, "", nil
	}
	rt, err := dc.Runtime()
	if err != nil {
		return nil, "", err
	}
	var image []string
	if dc.OverrideCommand != nil && !*dc.OverrideCommand {
		image = append(append(image, cfg.Config.Entrypoint...), cfg.Config.Cmd...)
	}
	if len(rt.Entrypoints) == 0 && len(image) == 0 {
		return nil, "", nil
	}
	script := strings.Join(rt.Entrypoints, "\n") + "\n"
	if len(image) > 0 {
		script += "\"$@\" </dev/null >/tmp/cove-image-command.log 2>&1 &\n"
	}
	user = firstNonEmpty(dc.ContainerUser, cfg.Config.User, "0")
	return append([]string{"/bin/sh", "-c", script, "cove-start"}, image...), user, nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// attachRecord is the postAttachCommand of a running workspace, as it was
// resolved when it started (beside its layer, in cove's data: not the
// workspace's to write).
type attachRecord struct {
	Folder string                `json:"folder"`
	Groups [][]devcontainer.Step `json:"groups"`
}

// attachRunning runs the postAttachCommand of the running workspace st
// (its record says it) for a user who attaches to it as it runs: a second
// cove up, cove shell. A failure is a warning, as at a start.
func (lo *Local) attachRunning(ctx context.Context, st *container.State) {
	b, err := os.ReadFile(filepath.Join(lo.Layout.Data, "workspaces", st.Name, "post-attach.json"))
	if err != nil {
		return
	}
	var rec attachRecord
	if json.Unmarshal(b, &rec) != nil {
		return
	}
	for _, steps := range rec.Groups {
		if err := runGroup(ctx, lo.Stderr, devcontainer.PostAttach, steps, lo.stepIn(st, rec.Folder)); err != nil {
			fmt.Fprintf(lo.Stderr, "cove: warning: %v\n", err)
		}
	}
}

// chownVolumes gives the new volumes workspaceUser named (owner first,
// then targets) to the workspace's user, as the workspace's root.
func (lo *Local) chownVolumes(ctx context.Context, st *container.State, chown []string) error {
	if len(chown) < 2 {
		return nil
	}
	out := commandOutput(lo.Stderr)
	code, err := lo.execPiped(ctx, st, container.ExecRequest{Args: append([]string{"chown"}, chown...), Cwd: "/", User: "0"}, out)
	if err == nil && code != 0 {
		err = fmt.Errorf("exit status %d", code)
	}
	if err != nil {
		return fmt.Errorf("give the volumes %s to the workspace's user (chown in the workspace): %w", strings.Join(chown[1:], ", "), err)
	}
	return nil
}

// startEntrypoints runs startCommand in the workspace that just started;
// its failure stops the start as a create command's does.
func (lo *Local) startEntrypoints(ctx context.Context, st *container.State, dc *devcontainer.Config, cfg *v1.ConfigFile) error {
	argv, user, err := startCommand(dc, cfg)
	if err != nil || argv == nil {
		return err
	}
	step := devcontainer.Step{Name: "entrypoint", Argv: argv}
	fmt.Fprintf(lo.Stderr, "cove: entrypoint (as %s): %s\n", termtext.Visible(user), termtext.Visible(strings.TrimSpace(argv[2])))
	out := commandOutput(lo.Stderr)
	return runParallel([]devcontainer.Step{step}, "entrypoint", func(s devcontainer.Step) (int, error) {
		return lo.execPiped(ctx, st, container.ExecRequest{Args: s.Argv, Cwd: "/", User: user}, out)
	})
}

// forgetWorkspaceImages forgets the images a workspace's devcontainer.json
// made (its build, its Features), which no other workspace uses by those
// names; their rootfs goes when no name is left on it (cove prune drops
// the blobs).
func (lo *Local) forgetImages(ctx context.Context, name string) {
	store, err := lo.store()
	if err != nil {
		return
	}
	for _, tag := range []string{"build", "features"} {
		ref := "cove-devcontainer/" + name + ":" + tag
		if _, err := store.Get(ref); err == nil {
			store.Remove(ctx, ref)
		}
	}
	// Its Compose services' builds (see composeImage).
	if all, err := store.List(); err == nil {
		for _, e := range all {
			if strings.HasPrefix(e.Ref, "cove-devcontainer/"+name+":build-") {
				store.Remove(ctx, e.Ref)
			}
		}
	}
}

// commandOutput is where the output of what the project runs goes (its
// lifecycle commands, its Dockerfile's and Features' steps): to w, its
// control characters shown as text, and a line of it that starts as
// cove's own do ("cove:") marked as the workspace's, so that no command
// can speak as cove on the terminal or in the IDE's log (which counts
// cove's notes by that start).
func commandOutput(w io.Writer) io.Writer {
	return termtext.NewWriter(&attributed{w: w})
}

// attributed marks the lines written to it that start with "cove:".
type attributed struct {
	w       io.Writer
	pending []byte // a line's start that may yet be "cove:"
	mid     bool   // within a line already decided
}

const coveLine, workspaceMark = "cove:", "(workspace) "

func (a *attributed) Write(p []byte) (int, error) {
	out := make([]byte, 0, len(p)+len(workspaceMark))
	for _, b := range p {
		if a.mid {
			out = append(out, b)
			a.mid = b != '\n'
			continue
		}
		a.pending = append(a.pending, b)
		switch {
		case b == '\n':
			out, a.pending = append(out, a.pending...), a.pending[:0]
		case string(a.pending) == coveLine:
			out = append(append(out, workspaceMark...), a.pending...)
			a.pending, a.mid = a.pending[:0], true
		case strings.HasPrefix(coveLine, string(a.pending)):
			// Undecided yet.
		default:
			out, a.pending, a.mid = append(out, a.pending...), a.pending[:0], true
		}
	}
	if _, err := a.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}
