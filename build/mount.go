package build

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cove-sh/cove/container"
	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"golang.org/x/sys/unix"
)

// runMounts are what RUN --mount gives one RUN: the binds its container
// gets, the environment a secret's env= adds, the part of the cache key
// the mounts' content makes (a bind's files; never a secret's or a cache
// mount's), and the mount points the stage lacked, which the runtime
// makes in the upper directory and which are no part of the layer.
type runMounts struct {
	binds []container.Bind
	env   []string
	key   string
	stubs []string    // image paths, made for a mount target
	cache []cacheDirs // cache mounts, locked while the RUN runs
}

// cacheDirs is one RUN --mount=type=cache: its directory under
// CacheDir/mounts and how it is shared.
type cacheDirs struct {
	dir     string // CacheDir/mounts/HASH
	sharing instructions.ShareMode
	bind    int // index in runMounts.binds, whose Source a private mount in use changes
	uid     int
	gid     int
	mode    os.FileMode
}

// mountTarget is a mount's absolute target in the image: relative ones
// are below the working directory, as in BuildKit.
func mountTarget(t, workdir string) string {
	if !path.IsAbs(t) {
		t = path.Join("/", workdir, t)
	}
	return path.Clean(t)
}

// prepareMounts reads RUN --mount: binds are staged (their files are read
// now, through os.Root, and hashed for the key), secrets written where
// only this build sees them, tmpfs mounts made empty. Cache mounts are
// only named here; lockCaches takes them when the RUN is about to run.
func (b *builder) prepareMounts(ctx context.Context, st *stage, mounts []*instructions.Mount) (*runMounts, error) {
	mp := &mountPlan{b: b, rm: &runMounts{}, h: sha256.New()}
	stubs := map[string]bool{}
	for i, m := range mounts {
		var target string
		if m.Target != "" {
			target = mountTarget(m.Target, st.cfg.Config.WorkingDir)
		}
		dir := filepath.Join(b.tmp, fmt.Sprintf("mount-%s-%d", newID()[:8], i))
		target, err := mp.add(ctx, m, target, dir)
		if err != nil {
			return nil, err
		}
		if target == "" {
			continue // a secret left out, or only in the environment
		}
		// The runtime makes a missing target (and its missing parents)
		// in the upper directory: they are dropped after the RUN.
		for p := target; p != "/" && !b.exists(st, p); p = path.Dir(p) {
			stubs[p] = true
		}
	}
	rm := mp.rm
	for p := range stubs {
		rm.stubs = append(rm.stubs, p)
	}
	sort.Sort(sort.Reverse(sort.StringSlice(rm.stubs))) // children before parents
	rm.key = hex.EncodeToString(mp.h.Sum(nil))
	return rm, nil
}

// mountPlan gathers one RUN's mounts into rm as prepareMounts reads
// them, and hashes into h what of their content the step's key holds.
type mountPlan struct {
	b  *builder
	rm *runMounts
	h  hash.Hash
}

// add prepares one mount at target (its absolute path in the image, ""
// if not given), in dir of the build's scratch space where it needs
// one. It returns the target the mount took, "" for none.
func (mp *mountPlan) add(ctx context.Context, m *instructions.Mount, target, dir string) (string, error) {
	switch m.Type {
	case instructions.MountTypeSSH:
		return "", errors.New("--mount=type=ssh is not supported: cove build forwards no SSH agent (give what the RUN needs with --mount=type=secret and cove build --secret)")
	case instructions.MountTypeSecret:
		return mp.secret(m, target, dir)
	case instructions.MountTypeTmpfs:
		if target == "" {
			return "", errors.New("--mount=type=tmpfs needs a target")
		}
		// An empty directory of the build's scratch space, removed with
		// it: what the RUN writes there is in no layer.
		if m.SizeLimit != 0 {
			return "", errors.New("--mount=type=tmpfs,size= is not supported: the mount is a directory of the build's scratch space, not a tmpfs, and has no limit to set; leave size out")
		}
		if err := os.Mkdir(dir, 0o755); err != nil {
			return "", err
		}
		mp.rm.binds = append(mp.rm.binds, container.Bind{Source: dir, Target: target})
	case instructions.MountTypeCache:
		if target == "" {
			return "", errors.New("--mount=type=cache needs a target")
		}
		if m.From != "" {
			return "", errors.New("--mount=type=cache,from= is not supported yet: fill the cache in the RUN")
		}
		mp.cache(m, target)
	case instructions.MountTypeBind:
		if target == "" {
			return "", errors.New("--mount=type=bind needs a target")
		}
		src, err := mp.b.stageBind(ctx, m, dir, mp.h)
		if err != nil {
			return "", err
		}
		// Read-only unless rw is asked; then what the RUN writes goes
		// to this copy, and is dropped, as in BuildKit.
		mp.rm.binds = append(mp.rm.binds, container.Bind{Source: src, Target: target, ReadOnly: m.ReadOnly})
	default:
		return "", fmt.Errorf("--mount=type=%s is not supported", m.Type)
	}
	return target, nil
}

// secret writes a --secret's bytes to a file in dir, with the owner and
// mode the mount asks for, and binds it read-only (default target
// /run/secrets/ID); with env= it is in the RUN's environment instead, or
// as well when a target is given. A secret not given is left out unless
// required, as in BuildKit.
func (mp *mountPlan) secret(m *instructions.Mount, target, dir string) (string, error) {
	id := m.CacheID
	if id == "" {
		id = m.Source
	}
	if id == "" {
		id = path.Base(target)
	}
	data, ok := mp.b.opts.Secrets[id]
	if !ok {
		if m.Required {
			return "", fmt.Errorf("--mount=type=secret,id=%s: no such secret (give it with cove build --secret id=%s,src=FILE)", id, id)
		}
		return "", nil
	}
	if m.Env != nil {
		name := *m.Env
		if name == "" {
			name = id
		}
		mp.rm.env = append(mp.rm.env, name+"="+string(data))
		if m.Target == "" {
			return "", nil // only in the environment
		}
	}
	if target == "" {
		target = "/run/secrets/" + id
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", err
	}
	file := filepath.Join(dir, "secret")
	mode := os.FileMode(0o400)
	if m.Mode != nil {
		mode = os.FileMode(*m.Mode) & 0o7777
	}
	if err := os.WriteFile(file, data, 0o600); err != nil {
		return "", err
	}
	if err := chownMount(file, m.UID, m.GID); err != nil {
		return "", err
	}
	if err := os.Chmod(file, mode); err != nil {
		return "", err
	}
	mp.rm.binds = append(mp.rm.binds, container.Bind{Source: file, Target: target, ReadOnly: true})
	return target, nil
}

// cache names a cache mount's directory (by its id, default the target)
// and how it is shared; lockCaches makes and takes it.
func (mp *mountPlan) cache(m *instructions.Mount, target string) {
	id := m.CacheID
	if id == "" {
		id = target // BuildKit's default: one cache per target
	}
	if ns := mp.b.opts.BuildArgs["BUILDKIT_CACHE_MOUNT_NS"]; ns != "" {
		id = ns + "/" + id // the built-in build arg: caches of one namespace
	}
	scope := ""
	if mp.b.opts.Confined {
		// An untrusted Dockerfile could fill a cache that another
		// project's build then trusts: its own. And what a RUN made from
		// its cache is its own too: the step's key has the scope, or
		// another project's RUN of the same text would take the step
		// cached.
		scope = mp.b.cacheScope + "\x00"
		fmt.Fprintf(mp.h, "cache-scope:%d:%s\x00", len(scope), scope)
	}
	sum := sha256.Sum256([]byte(scope + id))
	cd := cacheDirs{dir: filepath.Join(mp.b.opts.CacheDir, "mounts", hex.EncodeToString(sum[:16])), sharing: m.CacheSharing, mode: 0o755, bind: len(mp.rm.binds)}
	if cd.sharing == "" {
		cd.sharing = instructions.MountSharingShared
	}
	if m.Mode != nil {
		cd.mode = os.FileMode(*m.Mode) & 0o7777
	}
	if m.UID != nil {
		cd.uid = int(*m.UID)
	}
	if m.GID != nil {
		cd.gid = int(*m.GID)
	}
	mp.rm.cache = append(mp.rm.cache, cd)
	mp.rm.binds = append(mp.rm.binds, container.Bind{Source: filepath.Join(cd.dir, "data"), Target: target, ReadOnly: m.ReadOnly})
}

// stageBind copies what a bind mount shows (source in the context, or in
// a stage or image with from=) into dir, hashing it into h, and returns
// the path to bind.
func (b *builder) stageBind(ctx context.Context, m *instructions.Mount, dir string, h hash.Hash) (string, error) {
	source := m.Source
	if source == "" {
		source = "."
	}
	src := b.ctxSrc
	if nc := b.namedCtx(m.From); nc != nil && nc.src != nil && b.stageNamed(m.From) == nil {
		src = nc.src // a named context's directory, read as the main context is
	}
	if m.From == "" || src != b.ctxSrc {
		if err := os.Mkdir(dir, 0o755); err != nil {
			return "", err
		}
		if m.From == "" {
			fmt.Fprintf(h, "bind-context\x00%s\x00", source)
		} else {
			fmt.Fprintf(h, "bind-named-context\x00%s\x00%s\x00", contextKey(m.From), source)
		}
		if err := copyInto(src, []string{source}, copySpec{dest: "/m"}, dir, h); err != nil {
			return "", err
		}
		return filepath.Join(dir, "m"), nil
	}
	lowers, key, err := b.fromSource(ctx, m.From)
	if err != nil {
		return "", err
	}
	real, err := resolveInStage(lowers, inRoot(source))
	if err != nil {
		return "", err
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", err
	}
	if err := stageTree(ctx, lowers, []string{real}, dir); err != nil {
		return "", err
	}
	p := filepath.Join(dir, real)
	if _, err := os.Lstat(p); err != nil {
		return "", fmt.Errorf("--mount from=%s: %s: not found there", m.From, source)
	}
	// A stage's or image's content is fixed by its key or digest.
	fmt.Fprintf(h, "bind-from\x00%s\x00%s\x00", key, real)
	return p, nil
}

// chownMount gives a secret or cache directory the uid and gid a mount
// asks for. As root that is a chown; unprivileged the build's own ids are
// root inside and no others can be given, so only 0 is accepted.
func chownMount(p string, uid, gid *uint64) error {
	u, g := 0, 0
	if uid != nil {
		u = int(*uid)
	}
	if gid != nil {
		g = int(*gid)
	}
	if os.Geteuid() == 0 {
		return os.Lchown(p, u, g)
	}
	if u != 0 || g != 0 {
		return fmt.Errorf("--mount uid=%d,gid=%d: a rootless build can give a mount only root's ids (build as root, or make the file readable with mode=)", u, g)
	}
	return nil
}

// lockCaches takes the cache mounts' locks for the RUN, making their
// directories on first use: sharing=shared takes a shared lock (writers
// share, as in BuildKit), locked waits for the mount alone, and private
// takes it alone if it is free, else the RUN gets an empty directory of
// its own. The returned function releases them.
func (b *builder) lockCaches(ctx context.Context, rm *runMounts) (func(), error) {
	var held []*os.File
	release := func() {
		for _, f := range held {
			f.Close()
		}
	}
	locked := map[string]bool{}
	for _, cd := range rm.cache {
		if locked[cd.dir] {
			continue // one RUN mounting a cache twice shares it with itself
		}
		locked[cd.dir] = true
		if err := os.MkdirAll(cd.dir, 0o700); err != nil {
			release()
			return nil, fmt.Errorf("cache mount: %w", err)
		}
		data := filepath.Join(cd.dir, "data")
		if err := os.Mkdir(data, 0o755); err == nil {
			uid, gid := uint64(cd.uid), uint64(cd.gid)
			if err := chownMount(data, &uid, &gid); err != nil {
				os.Remove(data)
				release()
				return nil, err
			}
			if err := os.Chmod(data, cd.mode); err != nil {
				release()
				return nil, err
			}
		} else if !errors.Is(err, os.ErrExist) {
			release()
			return nil, fmt.Errorf("cache mount: %w", err)
		}
		f, err := os.OpenFile(filepath.Join(cd.dir, "lock"), os.O_CREATE|os.O_RDWR|unix.O_CLOEXEC, 0o600)
		if err != nil {
			release()
			return nil, fmt.Errorf("cache mount: %w", err)
		}
		how, wait := unix.LOCK_SH, true
		switch cd.sharing {
		case instructions.MountSharingLocked:
			how = unix.LOCK_EX
		case instructions.MountSharingPrivate:
			how, wait = unix.LOCK_EX, false
		}
		for {
			err = unix.Flock(int(f.Fd()), how|unix.LOCK_NB)
			if err == nil || !errors.Is(err, unix.EWOULDBLOCK) {
				break
			}
			if !wait {
				// In use: this RUN gets a fresh, empty one of its own.
				fresh := filepath.Join(b.tmp, "cache-"+newID()[:12])
				if err = os.Mkdir(fresh, cd.mode); err == nil {
					rm.binds[cd.bind].Source = fresh
				}
				f.Close()
				f = nil
				break
			}
			select {
			case <-ctx.Done():
				f.Close()
				release()
				return nil, ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
		if err != nil {
			if f != nil {
				f.Close()
			}
			release()
			return nil, fmt.Errorf("cache mount: %w", err)
		}
		if f != nil {
			held = append(held, f)
		}
	}
	return release, nil
}

// dropStubs removes from upper the mount points the runtime made for
// RUN --mount targets the stage lacked (children first), if the RUN left
// them empty.
func dropStubs(upper string, stubs []string) {
	for _, s := range stubs {
		p := filepath.Join(upper, s)
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		if fi.IsDir() && !opaque(p) {
			os.Remove(p) // fails, as it should, when not empty
		} else if fi.Mode().IsRegular() && fi.Size() == 0 {
			os.Remove(p)
		}
	}
}

// runFlags checks RUN's flags: --mount and --network are taken, the rest
// refused by name. It returns RUN's network: the host's by default, or
// with confined a network of its own.
func runFlags(c *instructions.RunCommand, confined bool) (network string, err error) {
	for _, f := range c.FlagsUsed {
		switch f {
		case "mount", "network":
		case "security":
			// sandbox is the default; insecure asks for every
			// capability, which cove build gives no step.
			if s := instructions.GetSecurity(c); s != instructions.SecuritySandbox {
				return "", fmt.Errorf("RUN --security=%s is not supported: cove build runs every step sandboxed, with no extra privileges (docker buildx needs --allow security.insecure for it too); do what needs them outside the build", s)
			}
		case "device":
			return "", errors.New("RUN --device is not supported: cove build gives a step no device of the host's (CDI); do what needs one outside the build")
		default:
			return "", fmt.Errorf("RUN --%s is not supported by cove build: remove the flag", f)
		}
	}
	switch n := instructions.GetNetwork(c); n {
	case instructions.NetworkDefault, "":
		if confined {
			return container.NetPrivate, nil
		}
		return container.NetHost, nil // cove build's RUN has the host's network, as docker build's default
	case instructions.NetworkHost:
		if confined {
			return "", errors.New("RUN --network=host: a confined build (an untrusted Dockerfile) does not get the host's network")
		}
		return container.NetHost, nil
	case instructions.NetworkNone:
		return container.NetNone, nil
	default:
		return "", fmt.Errorf("RUN --network=%s: give default, host or none", strings.ToLower(n))
	}
}

// ParseSecrets reads cove build --secret values, as docker build takes
// them: id=ID with src=FILE (or source=; type=file) or env=VAR (type=env),
// and returns the secrets by id. A bare id=ID reads the environment
// variable ID, as docker does. getenv reads the environment.
func ParseSecrets(specs []string, getenv func(string) string) (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, s := range specs {
		var id, src, env, typ string
		for _, f := range strings.Split(s, ",") {
			k, v, ok := strings.Cut(f, "=")
			if !ok {
				return nil, fmt.Errorf("--secret %q: %q is not KEY=VALUE (give id=ID,src=FILE)", s, f)
			}
			switch strings.ToLower(k) {
			case "id":
				id = v
			case "src", "source":
				src = v
			case "env":
				env = v
			case "type":
				typ = v
			default:
				return nil, fmt.Errorf("--secret %q: unknown key %q (give id=ID,src=FILE or id=ID,env=VAR)", s, k)
			}
		}
		if id == "" {
			return nil, fmt.Errorf("--secret %q: no id= (give id=ID,src=FILE)", s)
		}
		if src == "" && env == "" {
			if typ == "file" {
				src = id
			} else {
				env = id
			}
		}
		if typ == "env" && env == "" {
			env, src = src, ""
		}
		if src != "" {
			data, err := os.ReadFile(src)
			if err != nil {
				return nil, fmt.Errorf("--secret id=%s: %w", id, err)
			}
			out[id] = data
			continue
		}
		v := getenv(env)
		if v == "" {
			return nil, fmt.Errorf("--secret id=%s: the environment variable %s is not set", id, env)
		}
		out[id] = []byte(v)
	}
	return out, nil
}
