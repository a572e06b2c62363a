package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cove-sh/cove/internal/testregistry"
	"github.com/cove-sh/cove/workspace"
)

// TestComposeServiceRestarts: a service with restart: on-failure that
// exits once (no marker file yet) comes back and runs, after cove up
// --detach has returned; one with on-failure:2 that always fails runs
// three times, no more; one with restart "no" that fails stays exited.
// cove stop stops the restarted one (its exit is a failure) and nothing
// starts it again. As root and rootless.
func TestComposeServiceRestarts(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	ref := testregistry.Push(t, addr, layered(t))
	files := func(sleep string) map[string]string {
		return map[string]string{
			".devcontainer/devcontainer.json": `{"dockerComposeFile": "docker-compose.yml", "service": "app", "workspaceFolder": "/workspaces/proj"}`,
			".devcontainer/docker-compose.yml": `
services:
  app:
    image: ` + ref + `
    command: ["sleep", "1005"]
  flaky:
    image: ` + ref + `
    restart: on-failure
    command: ["sh", "-c", "echo run >> /data/flaky; [ -e /data/once ] || { touch /data/once; exit 3; }; exec sleep ` + sleep + `"]
    volumes: [data:/data]
  limited:
    image: ` + ref + `
    restart: on-failure:2
    command: ["sh", "-c", "echo run >> /data/limited; exit 1"]
    volumes: [data:/data]
  never:
    image: ` + ref + `
    restart: "no"
    command: ["sh", "-c", "echo run >> /data/never; exit 1"]
    volumes: [data:/data]
volumes:
  data:
`}
	}
	check := func(t *testing.T, project, root, sleep string, cove func(root string, args ...string) result) {
		name := workspace.Name(project)
		t.Cleanup(func() { cove(root, "rm", "-f", name) })
		if r := cove(root, "up", "--detach", project); r.code != 0 {
			t.Fatalf("up: %+v", r)
		}
		counts := func() string {
			r := cove(root, "exec", name+".flaky", "sh", "-c", "for f in flaky limited never; do echo $f $(cat /data/$f 2>/dev/null | wc -l); done")
			return r.stdout
		}
		want := "flaky 2\nlimited 3\nnever 1\n"
		deadline := time.Now().Add(30 * time.Second)
		got := counts()
		for got != want && time.Now().Before(deadline) {
			time.Sleep(200 * time.Millisecond)
			got = counts()
		}
		if got != want {
			t.Fatalf("runs: %q, want %q", got, want)
		}
		// limited's third restart would come within 400 ms, never's not at all.
		time.Sleep(time.Second)
		if got := counts(); got != want {
			t.Errorf("runs a second later: %q, want %q", got, want)
		}
		if r := cove(root, "ps", "--json"); !strings.Contains(r.stdout, `"`+name+`.flaky"`) {
			t.Errorf("flaky is not running after its restart: %s", r.stdout)
		}
		if r := cove(root, "stop", "--time", "1", name); r.code != 0 {
			t.Fatalf("stop: %+v", r)
		}
		// Stopped, not restarted: its exit (SIGTERM, a failure) is cove
		// stop's.
		deadline = time.Now().Add(5 * time.Second)
		for countProcs(t, "sleep "+sleep) != 0 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(time.Second) // a restart would come within 400 ms
		if n := countProcs(t, "sleep "+sleep); n != 0 {
			t.Errorf("%d flaky processes after stop", n)
		}
		if r := cove(root, "ps", "--json"); strings.TrimSpace(r.stdout) != "[]" {
			t.Errorf("ps after stop: %s", r.stdout)
		}
	}
	t.Run("root", func(t *testing.T) {
		t.Parallel()
		base := t.TempDir()
		project := filepath.Join(base, "project")
		writeFiles(t, project, files("1003"))
		check(t, project, filepath.Join(base, "root"), "1003", func(root string, args ...string) result { return runProc(t, root, "", args...) })
	})
	t.Run("rootless", func(t *testing.T) {
		t.Parallel()
		u := needRangedUser(t)
		base := rootlessBase(t, "cove-rootless-restart-")
		project := filepath.Join(base, "project")
		writeFiles(t, project, files("1004"))
		chownTree(t, base, u.uid, u.gid)
		check(t, project, filepath.Join(base, "root"), "1004", func(root string, args ...string) result { return u.run(t, root, args...) })
	})
}
