package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cove-sh/cove/internal/testregistry"
	"github.com/cove-sh/cove/workspace"
)

// composeProject writes a devcontainer.json over a Compose file in a new
// project: the workspace's service app, a db (a stand-in server on 5432
// with a healthcheck and a named volume) it depends on being healthy,
// and a worker it depends on having started.
func composeProject(t *testing.T, project, ref string, extra string) {
	t.Helper()
	os.MkdirAll(filepath.Join(project, ".devcontainer"), 0o755)
	files := map[string]string{
		".devcontainer/devcontainer.json": `{
			"dockerComposeFile": ["docker-compose.yml"],
			"service": "app",
			"workspaceFolder": "/workspaces/${localWorkspaceFolderBasename}",
			"postCreateCommand": "nc localhost 5432 </dev/null > from-db.txt"` + extra + `
		}`,
		".devcontainer/.env": "DBPORT=5432\n",
		".devcontainer/docker-compose.yml": `
services:
  app:
    image: ` + ref + `
    command: ["sh", "-c", "echo app-command-ran > /tmp/app.txt; sleep 31415"]
    environment: {DATABASE_URL: "postgres://db:${DBPORT}/app"}
    # As the devcontainer templates write it: the project's parent, and
    # the database's network (localhost:5432).
    volumes: ["../..:/workspaces"]
    network_mode: service:db
    depends_on:
      db: {condition: service_healthy}
      worker: {condition: service_started}
  db:
    image: ` + ref + `
    command: ["sh", "-c", "` + strings.Replace(dbLoop, "5432", "${DBPORT}", 1) + `"]
    expose: ["5432"]
    volumes: [dbdata:/data]
    # Healthy once the port listens (0x1538 = 5432, state 0A): a ready
    # file touched before nc ran let the create command in first.
    healthcheck: {test: ["CMD-SHELL", "cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | grep -q ':1538 0*:0* 0A '"], interval: 1s, retries: 20}
  worker:
    image: ` + ref + `
    command: ["sleep", "31415"]
volumes:
  dbdata:
`,
	}
	for p, c := range files {
		if err := os.WriteFile(filepath.Join(project, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestComposeWorkspace: a devcontainer.json over Docker Compose starts
// its services beside the workspace, in its network (db:5432 answers),
// the database healthy before the create command runs; cove ps lists the
// services, cove logs --service shows one's output, cove stop stops them
// all (the named volume stays, and the next start finds it), and cove rm
// leaves no process, cgroup or record. As root and rootless.
func TestComposeWorkspace(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	ref := testregistry.Push(t, addr, layered(t))
	t.Run("root", func(t *testing.T) {
		base := t.TempDir()
		project, root := filepath.Join(base, "project"), filepath.Join(base, "root")
		composeProject(t, project, ref, "")
		composeRoundTrip(t, project, root, func(root string, args ...string) result { return runProc(t, root, "", args...) })
	})
	t.Run("rootless", func(t *testing.T) {
		u := needRangedUser(t)
		base := rootlessBase(t, "cove-rootless-compose-")
		project, root := filepath.Join(base, "project"), filepath.Join(base, "root")
		composeProject(t, project, ref, "")
		chownTree(t, base, u.uid, u.gid)
		composeRoundTrip(t, project, root, func(root string, args ...string) result { return u.run(t, root, args...) })
	})
}

// dbLoop is the db service's server; counted on the host by its command
// line (sleep 31415 the others'), which nothing else on the machine has.
const dbLoop = "echo started >> /data/boots; sleep 1; while true; do echo pong-from-db | nc -l -p 5432; done"

// chownTree gives dir (and what is in it) to uid:gid.
func chownTree(t *testing.T, dir string, uid, gid int) {
	t.Helper()
	filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err == nil {
			err = os.Lchown(p, uid, gid)
		}
		return err
	})
}

func composeRoundTrip(t *testing.T, project, root string, cove func(root string, args ...string) result) {
	name := workspace.Name(project)
	t.Cleanup(func() { cove(root, "rm", "-f", name) })
	for i := range 2 {
		r := cove(root, "up", "--detach", project)
		if r.code != 0 {
			t.Fatalf("up %d: %+v", i, r)
		}
		if !strings.Contains(r.stderr, "waiting for service db to be healthy") {
			t.Errorf("up did not say what it waits for: %s", r.stderr)
		}
		// A host's warning (rootless here: cgroup v1) once an up, not
		// once a service.
		said := map[string]bool{}
		for _, l := range strings.Split(r.stderr, "\n") {
			if strings.HasPrefix(l, "cove: warning: ") && said[l] {
				t.Errorf("up said %q more than once:\n%s", l, r.stderr)
			}
			said[l] = true
		}
		if !strings.Contains(r.stderr, "only the project is bound, at /workspaces/project") {
			t.Errorf("up did not say the project's parent was not bound: %s", r.stderr)
		}
		if r := cove(root, "exec", name, "sh", "-c", "nc db 5432 </dev/null; echo $DATABASE_URL; cat /tmp/app.txt; ls /workspaces; pwd"); r.stdout != "pong-from-db\npostgres://db:5432/app\napp-command-ran\nproject\n/workspaces/project\n" {
			t.Errorf("in the workspace (the project alone in /workspaces, and the working directory): %+v", r)
		}
		if r := cove(root, "ps", "--json"); !strings.Contains(r.stdout, `"`+name+`.db"`) || !strings.Contains(r.stdout, `"`+name+`.worker"`) {
			t.Errorf("ps: %s", r.stdout)
		}
		if r := cove(root, "logs", name, "--service", "db"); r.code != 0 {
			t.Errorf("logs --service db: %+v", r)
		}
		if r := cove(root, "exec", name+".db", "cat", "/data/boots"); r.stdout != strings.Repeat("started\n", i+1) {
			t.Errorf("the named volume after %d starts: %q", i+1, r.stdout)
		}
		var cgroups []string
		for _, c := range []string{name, name + ".db", name + ".worker"} {
			var st struct{ Cgroup []string }
			b, _ := os.ReadFile(filepath.Join(root, "run", "containers", c, "state.json"))
			json.Unmarshal(b, &st)
			cgroups = append(cgroups, st.Cgroup...)
		}
		if r := cove(root, "stop", "--time", "2", name); r.code != 0 {
			t.Fatalf("stop: %+v", r)
		}
		if r := cove(root, "ps", "--json"); strings.TrimSpace(r.stdout) != "[]" {
			t.Errorf("ps after stop: %s", r.stdout)
		}
		for _, p := range cgroups {
			if _, err := os.Stat(p); !os.IsNotExist(err) {
				t.Errorf("stop left the cgroup %s", p)
			}
		}
	}
	if b, _ := os.ReadFile(filepath.Join(project, "from-db.txt")); string(b) != "pong-from-db\n" {
		t.Errorf("postCreateCommand's db answer %q", b)
	}
	// --fresh while it runs: its services stop before its layer (and
	// their volumes) go, and start anew.
	if r := cove(root, "up", "--detach", project); r.code != 0 {
		t.Fatalf("up: %+v", r)
	}
	if r := cove(root, "up", "--detach", "--fresh", project); r.code != 0 {
		t.Fatalf("up --fresh: %+v", r)
	}
	if r := cove(root, "exec", name+".db", "cat", "/data/boots"); r.stdout != "started\n" {
		t.Errorf("the named volume after --fresh: %q, want one start", r.stdout)
	}
	if n := countProcs(t, "sh -c "+dbLoop); n != 1 {
		t.Errorf("%d db servers after --fresh, want 1", n)
	}
	if r := cove(root, "stop", name); r.code != 0 {
		t.Fatalf("stop: %+v", r)
	}
	if r := cove(root, "rm", name); r.code != 0 {
		t.Fatalf("rm: %+v", r)
	}
	if r := cove(root, "ps", "--all", "--json"); strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("ps --all after rm: %s", r.stdout)
	}
	if n := countProcs(t, "sh -c "+dbLoop); n != 0 {
		t.Errorf("%d db processes after rm", n)
	}
	if _, err := os.Stat(filepath.Join(root, "data", "workspaces", name)); !os.IsNotExist(err) {
		t.Errorf("rm left the workspace's files: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for countProcs(t, "sleep 31415") != 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := countProcs(t, "sleep 31415"); n != 0 {
		t.Errorf("%d service processes after rm", n)
	}
}

// TestComposeHostileHeldBack: a project's Compose file that asks for the
// host (a bind of /, privileged, the host's network and PID namespace,
// a capability, a device, a build context outside the project) starts
// nothing, and the one error names each key held back. --trust lets the
// paths through (the user read the file), never what Cove cannot do; a
// change to the Compose file after the trust is untrusted again.
func TestComposeHostileHeldBack(t *testing.T) {
	t.Parallel()
	needRoot(t)
	t.Run("root", func(t *testing.T) {
		base := t.TempDir()
		hostileCompose(t, base, func(root string, args ...string) result {
			return runEnv(t, root, []string{"HOME=" + filepath.Join(base, "home")}, args...)
		}, func(string) {})
	})
	t.Run("rootless", func(t *testing.T) {
		u := needRangedUser(t)
		base := rootlessBase(t, "cove-rootless-hostile-")
		hostileCompose(t, base, func(root string, args ...string) result {
			cmd, out, errb := coveProc(root, args...)
			asTestUser(cmd, u.u, u.uid, u.gid)
			cmd.Env = append(cmd.Env, "HOME="+filepath.Join(base, "home")) // the trust's record, not covetest's own
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			return result{out.String(), errb.String(), code}
		}, func(d string) { chownTree(t, d, u.uid, u.gid) })
	})
}

func hostileCompose(t *testing.T, base string, cove func(root string, args ...string) result, give func(string)) {
	project, root, outside := filepath.Join(base, "project"), filepath.Join(base, "root"), filepath.Join(base, "outside")
	writeFiles(t, outside, map[string]string{"Dockerfile": "FROM scratch\n"})
	writeFiles(t, project, map[string]string{
		".devcontainer/devcontainer.json": `{"dockerComposeFile": "docker-compose.yml", "service": "app"}`,
		".devcontainer/docker-compose.yml": `
services:
  app:
    image: busybox
    privileged: true
    network_mode: host
    pid: host
    cap_add: [SYS_ADMIN]
    devices: ["/dev/kvm:/dev/kvm"]
    volumes: ["/:/host"]
  builder:
    build: {context: ` + outside + `}
`})
	give(base)
	name := workspace.Name(project)
	t.Cleanup(func() { cove(root, "rm", "-f", name) })
	os.Mkdir(filepath.Join(base, "home"), 0o755)
	give(base)
	up := func(extra ...string) result {
		return cove(root, append(append([]string{"up", "--detach"}, extra...), project)...)
	}
	r := up()
	for _, want := range []string{"service app: privileged", "service app: network_mode", "service app: pid", "service app: cap_add", "service app: devices",
		"service app: volumes: bind of / is outside the project", "service builder: build.context " + outside + " is outside the project", "nothing was started"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("untrusted: the error does not name %q:\n%s", want, r.stderr)
		}
	}
	if r.code != 1 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Errorf("untrusted: exit %d, want 1 and one line: %s", r.code, r.stderr)
	}
	if r := cove(root, "ps", "--all", "--json"); strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("something was made: %s", r.stdout)
	}
	// Trusted: the paths are the user's to give; what Cove cannot do is
	// still refused, by name.
	r = up("--trust")
	if r.code != 1 || strings.Contains(r.stderr, "outside the project") || !strings.Contains(r.stderr, "service app: privileged") {
		t.Errorf("trusted: %+v", r)
	}
	// The trust is bound to the Compose file: one the workspace changed
	// after is untrusted again (its bind of / is held back).
	f := filepath.Join(project, ".devcontainer/docker-compose.yml")
	os.WriteFile(f, []byte("services:\n  app:\n    image: busybox\n    volumes: [\"/:/host\"]\n"), 0o644)
	if r := up(); r.code != 1 || !strings.Contains(r.stderr, "bind of / is outside the project") {
		t.Errorf("after the Compose file changed: %+v", r)
	}
}
