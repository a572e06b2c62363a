package main

import (
	"crypto/sha256"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cove-sh/cove/internal/testregistry"
	"github.com/cove-sh/cove/workspace"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// debianComposeFiles are a web app's Compose devcontainer with a real
// PostgreSQL and Redis, every image built by cove build from Debian's
// packages (stand-ins for postgres:15 and redis:7), and the app's own
// test, which talks to both by their service names.
func debianComposeFiles(base string) map[string]string {
	return map[string]string{
		".devcontainer/devcontainer.json": `{
			"name": "web app with PostgreSQL and Redis",
			"dockerComposeFile": "docker-compose.yml",
			"service": "app",
			"workspaceFolder": "/workspaces/webapp",
			"shutdownAction": "stopCompose"
		}`,
		".devcontainer/Dockerfile": `FROM ` + base + ` AS debian
RUN apt-get update -q

FROM debian AS db
RUN apt-get install -y -q --no-install-recommends postgresql-15 && \
    sed -i 's/scram-sha-256$/trust/' /etc/postgresql/15/main/pg_hba.conf
USER postgres
CMD ["/usr/lib/postgresql/15/bin/postgres", "-D", "/var/lib/postgresql/15/main", "-c", "config_file=/etc/postgresql/15/main/postgresql.conf", "-c", "listen_addresses=127.0.0.1"]

FROM debian AS redis
RUN apt-get install -y -q --no-install-recommends redis-server
CMD ["redis-server", "--bind", "127.0.0.1", "--port", "6379", "--protected-mode", "no"]

FROM debian AS app
RUN apt-get install -y -q --no-install-recommends python3 python3-psycopg2 python3-redis
`,
		".devcontainer/docker-compose.yml": `
services:
  app:
    build: {context: ., dockerfile: Dockerfile, target: app}
    command: sleep infinity
    volumes: ["..:/workspaces/webapp"]
    environment:
      DATABASE_URL: postgresql://postgres@db:5432/postgres
      REDIS_URL: redis://redis:6379/0
    depends_on:
      db: {condition: service_healthy}
      redis: {condition: service_started}
  db:
    build: {context: ., target: db}
    healthcheck:
      test: ["CMD", "pg_isready", "-h", "127.0.0.1", "-p", "5432"]
      interval: 2s
      retries: 30
    volumes: ["pgdata:/srv/pgdata"]
  redis:
    build: {context: ., target: redis}
volumes:
  pgdata:
`,
		"test_app.py": `import os, unittest
import psycopg2, redis

class AppTest(unittest.TestCase):
    def test_database(self):
        with psycopg2.connect(os.environ["DATABASE_URL"]) as c, c.cursor() as cur:
            cur.execute("CREATE TABLE IF NOT EXISTS visits (n int)")
            cur.execute("INSERT INTO visits VALUES (1)")
            cur.execute("SELECT count(*) FROM visits")
            self.assertGreaterEqual(cur.fetchone()[0], 1)

    def test_cache(self):
        r = redis.Redis.from_url(os.environ["REDIS_URL"])
        r.set("k", "v")
        self.assertEqual(r.get("k"), b"v")

if __name__ == "__main__":
    unittest.main()
`,
	}
}

// TestComposeDebianWebApp: the web app's own tests pass inside its
// Compose workspace, against PostgreSQL and Redis at db:5432 and
// redis:6379, as root and rootless; cove rm leaves no process, cgroup or
// file of it. Needs the Debian tree (debianRef) and Debian's mirror, and
// COVE_TEST_COMPOSE_DEBIAN=1.
func TestComposeDebianWebApp(t *testing.T) {
	t.Parallel()
	needRoot(t)
	if testing.Short() || os.Getenv("COVE_TEST_COMPOSE_DEBIAN") == "" {
		// Three apt builds (PostgreSQL brings LLVM), twice: 20 minutes on
		// a busy 2-core machine, more than the suite's budget.
		t.Skip("set COVE_TEST_COMPOSE_DEBIAN=1: builds three images with apt, as root and rootless")
	}
	addr := testregistry.Addr(t)
	base := debianRef(t, addr)
	if base == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("no Debian tree (scripts/test.sh debootstraps /var/cache/cove-test/debian-bookworm)")
		}
		t.Skip("no Debian tree (debootstrap --variant=minbase bookworm /var/cache/cove-test/debian-bookworm)")
	}
	files := debianComposeFiles(base)
	if cache := os.Getenv("COVE_TEST_COMPOSE_CACHE"); cache != "" {
		files = withCachedImages(t, files, cache, addr)
	}
	t.Run("root", func(t *testing.T) {
		dir := t.TempDir()
		writeFiles(t, filepath.Join(dir, "webapp"), files)
		debianWebApp(t, base, filepath.Join(dir, "webapp"), filepath.Join(dir, "root"), func(root string, args ...string) result {
			// No two-minute limit (runProc's): the cold start builds with apt.
			cmd, out, errb := coveProc(root, args...)
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			return result{out.String(), errb.String(), code}
		})
	})
	t.Run("rootless", func(t *testing.T) {
		u := needRangedUser(t)
		dir := rootlessBase(t, "cove-rootless-webapp-")
		project, root := filepath.Join(dir, "webapp"), filepath.Join(dir, "root")
		writeFiles(t, project, files)
		chownTree(t, dir, u.uid, u.gid)
		debianWebApp(t, base, project, root, func(root string, args ...string) result { return u.run(t, root, args...) })
	})
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		p = filepath.Join(dir, p)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func debianWebApp(t *testing.T, base, project, root string, cove func(root string, args ...string) result) {
	if _, err := os.Stat(project); err != nil {
		writeFiles(t, project, debianComposeFiles(base))
	}
	name := workspace.Name(project)
	t.Cleanup(func() { cove(root, "rm", "-f", name) })
	start := time.Now()
	r := cove(root, "up", "--detach", project)
	if r.code != 0 {
		t.Fatalf("up: %+v", r)
	}
	t.Logf("cove up, cold (a fresh store: the images pulled or built with apt): %v", time.Since(start))
	if r := cove(root, "exec", "-w", "/workspaces/webapp", name, "python3", "test_app.py", "-v"); r.code != 0 || !strings.Contains(r.stderr, "OK") {
		t.Fatalf("the app's tests in the workspace: %+v", r)
	}
	cove(root, "stop", name)
	start = time.Now()
	if r := cove(root, "up", "--detach", project); r.code != 0 {
		t.Fatalf("up again: %+v", r)
	}
	t.Logf("cove up, warm (stopped, images cached): %v", time.Since(start))
	if r := cove(root, "exec", "-w", "/workspaces/webapp", name, "python3", "test_app.py"); r.code != 0 {
		t.Fatalf("the app's tests after a restart: %+v", r)
	}
	if r := cove(root, "rm", "-f", name); r.code != 0 {
		t.Fatalf("rm: %+v", r)
	}
	for _, p := range []string{"postgres -D", "redis-server", "sleep infinity"} {
		if n := countProcsPrefix(p); n != 0 {
			t.Errorf("%d %s processes after rm", n, p)
		}
	}
	if r := cove(root, "ps", "--all", "--json"); strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("ps --all after rm: %s", r.stdout)
	}
	if b, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(b), root) {
		t.Errorf("a mount under %s is left", root)
	}
}

// countProcsPrefix counts the processes whose command line has s.
func countProcsPrefix(s string) int {
	n := 0
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, d := range dirs {
		b, _ := os.ReadFile(d)
		if strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), s) {
			n++
		}
	}
	return n
}

// withCachedImages is files with the three images built once per change
// of their Dockerfile or of the Debian tree (by cove build, into OCI
// layouts under cache: CI keeps them across runs, where three apt builds
// take most of 10 minutes) and pushed to the test registry, named by the
// Compose file in place of its build sections.
func withCachedImages(t *testing.T, files map[string]string, cache, addr string) map[string]string {
	t.Helper()
	df := files[".devcontainer/Dockerfile"]
	h := sha256.New()
	h.Write([]byte(df[strings.Index(df, "\n"):])) // without the FROM line, which names this run's registry
	tree := os.Getenv("COVE_TEST_DEBIAN")
	if tree == "" {
		tree = "/var/cache/cove-test/debian-bookworm"
	}
	if fi, err := os.Stat(filepath.Join(tree, "var/lib/dpkg/status")); err == nil {
		fmt.Fprintf(h, "%d %d", fi.Size(), fi.ModTime().UnixNano())
	}
	dir := filepath.Join(cache, fmt.Sprintf("%x", h.Sum(nil))[:16])
	targets := []string{"db", "redis", "app"}
	if _, err := os.Stat(filepath.Join(dir, "done")); err != nil {
		ctx, root := t.TempDir(), t.TempDir()
		writeFiles(t, ctx, files)
		os.RemoveAll(dir)
		for _, target := range targets {
			start := time.Now()
			cmd, _, errb := coveProc(root, "build", "-q", "--target", target, "-o", "type=oci,dest="+filepath.Join(dir, target), filepath.Join(ctx, ".devcontainer"))
			if err := cmd.Run(); err != nil {
				t.Fatalf("cove build --target %s: %v\n%s", target, err, errb)
			}
			t.Logf("built %s with apt in %v (cached in %s)", target, time.Since(start).Round(time.Second), dir)
		}
		os.WriteFile(filepath.Join(dir, "done"), nil, 0o644)
	}
	compose := files[".devcontainer/docker-compose.yml"]
	for _, target := range targets {
		idx, err := layout.ImageIndexFromPath(filepath.Join(dir, target))
		if err != nil {
			t.Fatal(err)
		}
		m, err := idx.IndexManifest()
		if err != nil || len(m.Manifests) == 0 {
			t.Fatalf("the cached %s image: %v", target, err)
		}
		img, err := idx.Image(m.Manifests[0].Digest)
		if err != nil {
			t.Fatal(err)
		}
		ref := testregistry.Push(t, addr, img)
		b := strings.Index(compose, "build: {context: ., ")
		for b >= 0 && !strings.Contains(compose[b:strings.Index(compose[b:], "}")+b], "target: "+target) {
			n := strings.Index(compose[b+1:], "build: {context: ., ")
			if n < 0 {
				b = -1
				break
			}
			b += 1 + n
		}
		if b < 0 {
			t.Fatalf("no build section for %s in the Compose file", target)
		}
		e := b + strings.Index(compose[b:], "}") + 1
		compose = compose[:b] + "image: " + ref + compose[e:]
	}
	out := maps.Clone(files)
	out[".devcontainer/docker-compose.yml"] = compose
	return out
}
