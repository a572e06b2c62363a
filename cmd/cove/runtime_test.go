package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cove-sh/cove/container"
	"github.com/cove-sh/cove/internal/testimage"
	"github.com/cove-sh/cove/internal/testregistry"
	"github.com/cove-sh/cove/workspace"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"golang.org/x/sys/unix"
)

// capBits reads a capability set line (CapBnd) of /proc/self/status in
// the workspace.
func capBits(t *testing.T, root, name, field string) uint64 {
	t.Helper()
	r := runProc(t, root, "", "exec", "-u", "0", name, "grep", field, "/proc/self/status")
	_, hexs, _ := strings.Cut(strings.TrimSpace(r.stdout), "\t")
	n, err := strconv.ParseUint(hexs, 16, 64)
	if err != nil {
		t.Fatalf("%s: %+v", field, r)
	}
	return n
}

// TestDevcontainerRuntime: what devcontainer.json and the image's
// metadata ask of the runtime is applied (it was noted only): a trusted
// file's capAdd and runArgs (--cap-add, --cap-drop, -e, --hostname,
// --security-opt no-new-privileges, --pids-limit), an option cove has
// no equivalent for named; the label's capAdd, volume and entrypoint;
// workspaceMount; overrideCommand false runs the image's command beside
// the server. Untrusted, no capability is added and that is said.
func TestDevcontainerRuntime(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	ep, err := testimage.Layer(testimage.Dir("usr", 0o755), testimage.Dir("usr/local", 0o755), testimage.Dir("usr/local/bin", 0o755),
		testimage.File("usr/local/bin/ep.sh", "#!/bin/sh\necho \"ep $(id -u)\" > /tmp/ep-ran\n", 0o755))
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(layered(t), ep)
	if err != nil {
		t.Fatal(err)
	}
	img, err = mutate.Config(img, v1.Config{Entrypoint: []string{"/bin/sh", "-c"}, Cmd: []string{"echo image-cmd > /tmp/image-cmd; sleep 1000"},
		Env: []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"},
		Labels: map[string]string{"devcontainer.metadata": `[{"entrypoint": "/usr/local/bin/ep.sh", "capAdd": ["SYS_NICE"],
			"mounts": [{"source": "labelvol", "target": "/labelvol", "type": "volume"}]}]`}})
	if err != nil {
		t.Fatal(err)
	}
	ref := testregistry.Push(t, addr, img)
	// A locked-memory limit above this machine's hard one.
	var ml unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &ml); err != nil || ml.Max == unix.RLIM_INFINITY {
		t.Fatalf("want a finite hard RLIMIT_MEMLOCK here: %+v %v", ml, err)
	}
	memlock := strconv.FormatUint(2*ml.Max, 10)
	memlockWant := memlock + " " + memlock
	if !container.CanRaiseLimits() {
		memlockWant = strconv.FormatUint(ml.Max, 10) + " " + strconv.FormatUint(ml.Max, 10)
	}
	project, root := devcontainerProject(t, `{"image": "`+ref+`", "capAdd": ["SYS_PTRACE"], "overrideCommand": false,
		"workspaceMount": "source=${localWorkspaceFolder},target=/workspaces/proj,type=bind", "workspaceFolder": "/workspaces/proj",
		"mounts": ["type=tmpfs,target=/scratch,tmpfs-size=10m,tmpfs-mode=700"],
		"runArgs": ["--cap-add=NET_ADMIN", "--cap-drop", "CHOWN", "-e", "FROM_RUNARGS=yes", "--hostname", "devbox",
			"--security-opt", "no-new-privileges", "--pids-limit", "200", "--add-host", "x.test:1.2.3.4", "--add-host=gw:host-gateway",
			"--shm-size=200m", "--ulimit", "nofile=512:1024", "--ulimit", "memlock=`+memlock+`", "--env-file", ".devcontainer/dev.env",
			"--userns=keep-id", "--device=/dev/fuse", "--device", "/dev/net/tun:/dev/net/tun:rwm", "--device=/dev/cove-no-such-device", "--gpus=all", "--tmpfs", "/run/t:size=5m"]}`)
	os.WriteFile(filepath.Join(project, "marker"), []byte("m"), 0o644)
	os.WriteFile(filepath.Join(project, ".devcontainer", "dev.env"), []byte("# the project's\nFROM_FILE=file value \nFROM_RUNARGS=the -e wins\n\n  INDENTED=1\nHOST_ONLY\n"), 0o644)
	name := workspace.Name(project)
	env := []string{"HOME=" + t.TempDir()}
	const chown, netAdmin, ptrace, nice = 1 << 0, 1 << 12, 1 << 19, 1 << 23

	// Untrusted: nothing added, and said; what stays inside applies.
	r := runEnv(t, root, env, "up", "--detach", project)
	if r.code != 0 || !strings.Contains(r.stderr, "capAdd SYS_PTRACE") || !strings.Contains(r.stderr, "asks for capAdd SYS_NICE: not applied") {
		t.Fatalf("untrusted up: %+v", r)
	}
	if b := capBits(t, root, name, "CapBnd"); b&(netAdmin|ptrace|nice) != 0 || b&chown == 0 {
		t.Errorf("untrusted: CapBnd %x", b)
	}
	if r := runProc(t, root, "", "exec", name, "cat", "/workspaces/proj/marker"); r.stdout != "m" {
		t.Errorf("workspaceMount: %+v", r)
	}
	runProc(t, root, "", "stop", "--time", "2", name)

	r = runEnv(t, root, env, "up", "--detach", "--trust", project)
	if r.code != 0 || !strings.Contains(r.stderr, "runArgs --gpus all is not supported by cove") ||
		!strings.Contains(r.stderr, "runArgs --device /dev/cove-no-such-device: this machine has no such device; the workspace starts without it") ||
		!strings.Contains(r.stderr, "--add-host gw:host-gateway: the workspace's network does not reach this machine's own services") ||
		!strings.Contains(r.stderr, "HOST_ONLY takes its value from the host's environment") || strings.Contains(r.stderr, "--userns keep-id is not supported") {
		t.Fatalf("trusted up: %+v", r)
	}
	// runArgs that shape the launch: /etc/hosts, /dev/shm's size, the
	// limits (a hard one above this machine's is lowered, and said, where
	// cove cannot raise it), an env file before -e.
	if r := runProc(t, root, "", "exec", name, "sh", "-c", "grep -c '^1.2.3.4	x.test$' /etc/hosts; grep -c gw /etc/hosts; grep ' /dev/shm ' /proc/mounts | grep -o 'size=[0-9]*k'; "+
		"grep -E '^Max (open files|locked memory)' /proc/self/limits | tr -s ' ' | sed 's/ $//'; echo \"$FROM_FILE|$FROM_RUNARGS|$INDENTED|${HOST_ONLY-unset}\"; "+
		"exec 3<>/dev/fuse && echo fuse opened; test -c /dev/net/tun && echo tun; "+
		"for m in /scratch /run/t; do grep \" $m tmpfs \" /proc/mounts | grep -oE 'noexec|size=[0-9]+k|mode=[0-7]+' | tr '\\n' ' '; echo; done"); r.stdout !=
		"1\n0\nsize=204800k\nMax open files 512 1024 files\nMax locked memory "+memlockWant+" bytes\nfile value |yes|1|unset\nfuse opened\ntun\nsize=10240k mode=700 \nnoexec size=5120k \n" {
		t.Errorf("--add-host, --shm-size, --ulimit, --env-file, --device: %q (%s)", r.stdout, r.stderr)
	}
	if raised := container.CanRaiseLimits(); !raised && !strings.Contains(r.stderr, "ulimit memlock="+memlock+":"+memlock+": above this machine's hard limit") {
		t.Errorf("the lowered limit is not said: %s", r.stderr)
	}
	if b := capBits(t, root, name, "CapBnd"); b&(netAdmin|ptrace|nice) != netAdmin|ptrace|nice || b&chown != 0 {
		t.Errorf("trusted: CapBnd %x: want NET_ADMIN, SYS_PTRACE and SYS_NICE, not CHOWN", b)
	}
	if n := capBits(t, root, name, "NoNewPrivs"); n != 1 {
		t.Errorf("NoNewPrivs %d", n)
	}
	if r := runProc(t, root, "", "exec", name, "sh", "-c", "echo $FROM_RUNARGS $(hostname); grep -c ' /labelvol ' /proc/mounts; cat /tmp/ep-ran"); r.stdout != "yes devbox\n1\nep 0\n" {
		t.Errorf("runArgs, the label's mount and entrypoint: %+v", r)
	}
	var got string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if got = runProc(t, root, "", "exec", name, "cat", "/tmp/image-cmd").stdout; got != "" {
			break
		}
	}
	if got != "image-cmd\n" {
		t.Errorf("overrideCommand false: the image's command did not run (%q)", got)
	}
	if r := runProc(t, root, "", "ps"); !strings.Contains(r.stdout, name) {
		t.Errorf("the workspace does not run: %+v", r)
	}
}

// TestExecCapabilities: a process cove exec starts has no more
// capability than the workload (Docker's default set less MKNOD, less
// NET_RAW in a private network). The bounding set is per thread, and
// init dropped it on one thread only: exec'd processes, forked from
// another, had every capability (CAP_SYS_ADMIN, CAP_MKNOD, CAP_SYS_PTRACE…).
func TestExecCapabilities(t *testing.T) {
	t.Parallel()
	needRoot(t)
	ref := testregistry.Push(t, testregistry.Addr(t), layered(t))
	root := t.TempDir()
	name := "caps-" + strconv.Itoa(os.Getpid())
	if r := runProc(t, root, "", "run", "-d", "--name", name, ref, "sleep", "1000"); r.code != 0 {
		t.Fatalf("run: %+v", r)
	}
	defer runProc(t, root, "", "rm", "-f", name)
	workload := runProc(t, root, "", "run", "--rm", ref, "grep", "-E", "CapBnd|CapEff", "/proc/self/status").stdout
	if !strings.Contains(workload, "00000000a00405fb") {
		t.Fatalf("the workload's capabilities: %q", workload)
	}
	for i := 0; i < 5; i++ { // the exec is served by whichever thread
		if r := runProc(t, root, "", "exec", name, "grep", "-E", "CapBnd|CapEff", "/proc/self/status"); r.stdout != workload {
			t.Fatalf("exec'd: %q, the workload has %q", r.stdout, workload)
		}
	}
}
