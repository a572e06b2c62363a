package compose

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// write makes files under dir: path → content.
func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		p = filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLoadAsComposeDoes: a devcontainer's Compose project in
// .devcontainer, with .env interpolation, extends, a second file's
// override, a profile, depends_on conditions and a healthcheck, comes out
// as docker compose config has it, in start order.
func TestLoadAsComposeDoes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write(t, dir, map[string]string{
		".devcontainer/.env": "PGTAG=15\nDBPASS=secret\n",
		".devcontainer/docker-compose.yml": `
services:
  app:
    build:
      context: ..
      dockerfile: .devcontainer/Dockerfile
      args: {V: "1"}
    command: sleep infinity
    environment:
      DATABASE_URL: postgres://app:${DBPASS}@db:5432/app
    env_file: app.env
    volumes:
      - ..:/workspaces/proj:cached
      - cache:/home/app/.cache
    depends_on:
      db: {condition: service_healthy}
      redis: {condition: service_started}
  db:
    extends: {file: base.yml, service: pg}
    environment: {POSTGRES_PASSWORD: "${DBPASS}"}
    healthcheck:
      test: ["CMD-SHELL", "pg_isready -U app"]
      interval: 2s
      retries: 10
    volumes: [pgdata:/var/lib/postgresql/data]
  redis:
    image: redis:7
  tools:
    image: busybox
    profiles: [debug]
volumes:
  pgdata:
  cache:
`,
		".devcontainer/base.yml":     "services:\n  pg:\n    image: postgres:${PGTAG}\n    expose: [\"5432\"]\n",
		".devcontainer/app.env":      "FROM_FILE=1\nDATABASE_URL=overridden-by-environment\n",
		".devcontainer/override.yml": "services:\n  redis:\n    command: [redis-server, --appendonly, \"yes\"]\n",
		".devcontainer/Dockerfile":   "FROM debian\n",
	})
	p, err := Load(context.Background(), Options{
		Files:   []string{filepath.Join(dir, ".devcontainer/docker-compose.yml"), filepath.Join(dir, ".devcontainer/override.yml")},
		Project: dir, Env: []string{"DBPASS=from-host-env"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "devcontainer" {
		t.Errorf("project name %q, want devcontainer (the first file's directory, as docker compose names it)", p.Name)
	}
	var names []string
	for _, s := range p.Services {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, []string{"db", "redis", "app"}) {
		t.Errorf("services %v, want [db redis app] (the debug profile's off, dependencies first)", names)
	}
	app, _ := p.Service("app")
	db, _ := p.Service("db")
	redis, _ := p.Service("redis")
	if app.Build == nil || app.Build.Context != dir || app.Build.Dockerfile != filepath.Join(dir, ".devcontainer/Dockerfile") || app.Build.Args["V"] != "1" {
		t.Errorf("app build %+v", app.Build)
	}
	if !slices.Contains(app.Env, "DATABASE_URL=postgres://app:secret@db:5432/app") || !slices.Contains(app.Env, "FROM_FILE=1") {
		t.Errorf("app env %v: want .env's DBPASS (not the host's), environment over env_file", app.Env)
	}
	if !slices.Equal(app.Command, []string{"sleep", "infinity"}) || !slices.Equal(redis.Command, []string{"redis-server", "--appendonly", "yes"}) {
		t.Errorf("commands %q %q", app.Command, redis.Command)
	}
	if db.Image != "postgres:15" || !slices.Contains(db.Env, "POSTGRES_PASSWORD=secret") || !slices.Contains(db.Expose, "5432/tcp") {
		t.Errorf("db %+v", db)
	}
	if db.Health == nil || db.Health.Interval != 2 || db.Health.Retries != 10 || !slices.Equal(db.Health.Test, []string{"/bin/sh", "-c", "pg_isready -U app"}) {
		t.Errorf("db health %+v", db.Health)
	}
	if !slices.Equal(app.DependsOn, []Dependency{{"db", Healthy, true}, {"redis", Started, true}}) {
		t.Errorf("app depends_on %+v", app.DependsOn)
	}
	if len(app.Binds) != 1 || app.Binds[0].Source != dir || app.Binds[0].Target != "/workspaces/proj" {
		t.Errorf("app binds %+v", app.Binds)
	}
	if !slices.Equal(p.Volumes, []string{"pgdata", "cache"}) && !slices.Equal(p.Volumes, []string{"cache", "pgdata"}) {
		t.Errorf("volumes %v", p.Volumes)
	}
}

// TestHostileComposeHeldBack: a project's Compose file that asks for the
// host (a bind of /, privileged, host network and PID namespace, a
// capability, a device, a build context outside the project, an env_file
// and an extends file outside it) starts nothing, and the error names
// each key held back. Trusted, the paths are the user's to give; what
// Cove cannot do is still refused.
func TestHostileComposeHeldBack(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	write(t, outside, map[string]string{"secret.env": "TOKEN=host-secret\n", "base.yml": "services:\n  b:\n    image: busybox\n"})
	dir := t.TempDir()
	write(t, dir, map[string]string{"docker-compose.yml": `
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
  "..":
    image: busybox
  leak:
    image: busybox
    env_file: ` + filepath.Join(outside, "secret.env") + `
`})
	f := filepath.Join(dir, "docker-compose.yml")
	_, err := Load(context.Background(), Options{Files: []string{f}, Project: dir})
	var re *RefusedError
	if !errors.As(err, &re) {
		t.Fatalf("err %v, want a RefusedError", err)
	}
	for _, want := range []string{"service app: privileged", "service app: network_mode", "service app: pid", "service app: cap_add", "service app: devices",
		"service app: volumes: bind of / is outside the project", "service builder: build.context " + outside, "service leak: env_file " + filepath.Join(outside, "secret.env"), `service "..": a name of letters`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "host-secret") {
		t.Errorf("the error shows the outside file's contents: %v", err)
	}
	_, err = Load(context.Background(), Options{Files: []string{f}, Project: dir, Trusted: true})
	if !errors.As(err, &re) || strings.Contains(err.Error(), "outside the project") || !strings.Contains(err.Error(), "privileged") {
		t.Errorf("trusted: %v; want the paths let through, privileged still refused", err)
	}

	write(t, dir, map[string]string{"ext.yml": "services:\n  e:\n    extends: {file: " + filepath.Join(outside, "base.yml") + ", service: b}\n"})
	_, err = Load(context.Background(), Options{Files: []string{filepath.Join(dir, "ext.yml")}, Project: dir})
	if err == nil || !strings.Contains(err.Error(), "outside the project") {
		t.Errorf("extends of a file outside: %v", err)
	}
	os.Symlink(outside, filepath.Join(dir, "link"))
	write(t, dir, map[string]string{"ext2.yml": "services:\n  e:\n    extends: {file: link/base.yml, service: b}\n"})
	_, err = Load(context.Background(), Options{Files: []string{filepath.Join(dir, "ext2.yml")}, Project: dir})
	if err == nil || !strings.Contains(err.Error(), "outside the project") {
		t.Errorf("extends through a symlink out: %v", err)
	}
}

// TestHostEnvNotInterpolatedUntrusted: ${HOME} in a project's Compose file
// does not carry the host's value into the workspace without trust.
func TestHostEnvNotInterpolatedUntrusted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write(t, dir, map[string]string{"compose.yaml": "services:\n  a:\n    image: busybox\n    environment: {H: \"${SECRET_HOST_VAR:-none}\"}\n"})
	o := Options{Files: []string{filepath.Join(dir, "compose.yaml")}, Project: dir, Env: []string{"SECRET_HOST_VAR=xyz"}}
	p, err := Load(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Services[0].Env; !slices.Equal(got, []string{"H=none"}) {
		t.Errorf("untrusted env %v, want H=none", got)
	}
	o.Trusted = true
	if p, err = Load(context.Background(), o); err != nil || !slices.Equal(p.Services[0].Env, []string{"H=xyz"}) {
		t.Errorf("trusted: %v %v, want H=xyz", p, err)
	}
}

// TestSamePortTwiceRefused: two services on one port cannot share the
// workspace's one network; said before anything starts.
func TestSamePortTwiceRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write(t, dir, map[string]string{"compose.yaml": "services:\n  a:\n    image: x\n    expose: [\"8080\"]\n  b:\n    image: y\n    ports: [\"127.0.0.1:9000:8080\"]\n"})
	_, err := Load(context.Background(), Options{Files: []string{filepath.Join(dir, "compose.yaml")}, Project: dir})
	if err == nil || !strings.Contains(err.Error(), "services a and b both listen on port 8080/tcp") {
		t.Errorf("err %v", err)
	}
}

// TestSchemaChecked: a Compose file against the Compose specification's
// schema is refused as docker compose refuses it, naming the key: the
// schema is compiled on first use now (third_party/jsonschema), and still
// applied, whichever goroutine loads first.
func TestSchemaChecked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write(t, dir, map[string]string{
		"bad.yml":  "services:\n  app:\n    image: x\n    restrat: always\n",
		"good.yml": "services:\n  app:\n    image: x\n",
	})
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			_, err := Load(context.Background(), Options{Files: []string{filepath.Join(dir, "bad.yml")}, Project: dir})
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err == nil || !strings.Contains(err.Error(), "validating") || !strings.Contains(err.Error(), "services.app.restrat") {
			t.Errorf("a misspelt key: %v, want the schema's refusal naming restrat", err)
		}
	}
	if _, err := Load(context.Background(), Options{Files: []string{filepath.Join(dir, "good.yml")}, Project: dir}); err != nil {
		t.Errorf("a valid file: %v", err)
	}
}

// TestEmptyEntrypointResets: entrypoint: [] and command: [] (or "")
// reset the image's to nothing, as Compose does; an unset one keeps the
// image's (nil). A second file's [] resets the first's too.
func TestEmptyEntrypointResets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write(t, dir, map[string]string{
		"docker-compose.yml": `
services:
  reset:
    image: busybox
    entrypoint: []
    command: []
  emptystring:
    image: busybox
    entrypoint: ""
    command: ["sh", "-c", "true"]
  unset:
    image: busybox
  overridden:
    image: busybox
    entrypoint: ["/bin/tini", "--"]
    command: ["serve"]
`,
		"override.yml": "services:\n  overridden:\n    entrypoint: []\n",
	})
	p, err := Load(context.Background(), Options{Files: []string{filepath.Join(dir, "docker-compose.yml"), filepath.Join(dir, "override.yml")}, Project: dir})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name                string
		entrypoint, command []string
	}{
		{"reset", []string{}, []string{}},
		{"emptystring", []string{}, []string{"sh", "-c", "true"}},
		{"unset", nil, nil},
		{"overridden", []string{}, []string{"serve"}},
	} {
		s, _ := p.Service(c.name)
		if (s.Entrypoint == nil) != (c.entrypoint == nil) || !slices.Equal(s.Entrypoint, c.entrypoint) {
			t.Errorf("%s: entrypoint %#v, want %#v", c.name, s.Entrypoint, c.entrypoint)
		}
		if (s.Command == nil) != (c.command == nil) || !slices.Equal(s.Command, c.command) {
			t.Errorf("%s: command %#v, want %#v", c.name, s.Command, c.command)
		}
	}
}
