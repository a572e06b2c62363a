package compose

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestDevcontainerTemplates loads, untrusted, the Compose file of every
// devcontainer template that has one (testdata/templates: the
// .devcontainer directories of github.com/devcontainers/templates at
// c1ca13c, MIT, LICENSE beside them), as cove up would. Each of the
// database templates runs: the app service, whose network_mode
// service:db Cove's shared network namespace already is, gets the
// project bound where the template's ../..:/workspaces would put it
// (none of its parent, said in a note); the database its image, env_file
// and named volume as docker compose config has them. The two others are
// refused by name: the engine's socket, and a placeholder file docker
// compose refuses too.
func TestDevcontainerTemplates(t *testing.T) {
	t.Parallel()
	ents, err := os.ReadDir("testdata/templates")
	if err != nil {
		t.Fatal(err)
	}
	refused := map[string]string{
		"docker-outside-of-docker-compose": "bind of /var/run/docker.sock is outside the project",
		"docker-existing-docker-compose":   `service "your-service-name-here" has neither an image nor a build context`,
	}
	// The database service's image, named volume target and one
	// variable of its env_file, where the template has one.
	dbs := map[string][3]string{
		"anaconda-postgres":        {"postgres:latest", "/var/lib/postgresql/data", "POSTGRES_PASSWORD=postgres"},
		"cpp-mariadb":              {"mariadb:10.3.32-focal", "/var/lib/MARIADB", "MARIADB_USER=mariadb"},
		"dotnet-mssql":             {"mcr.microsoft.com/mssql/server:2019-latest", "", ""},
		"dotnet-postgres":          {"postgres:14.3", "/var/lib/postgresql/data", ""},
		"go-postgres":              {"postgres:latest", "/var/lib/postgresql", "POSTGRES_DB=postgres"},
		"java-postgres":            {"postgres:latest", "/var/lib/postgresql", ""},
		"javascript-node-mongo":    {"mongo:latest", "/data/db", ""},
		"javascript-node-postgres": {"postgres:latest", "/var/lib/postgresql", ""},
		"miniconda-postgres":       {"postgres:latest", "/var/lib/postgresql/data", "POSTGRES_USER=postgres"},
		"php-mariadb":              {"mariadb:10.4", "/var/lib/mysql", ""},
		"postgres":                 {"postgres:latest", "/var/lib/postgresql", ""},
		"ruby-rails-postgres":      {"postgres:latest", "/var/lib/postgresql", ""},
		"rust-postgres":            {"postgres:14.1", "/var/lib/postgresql/data", "POSTGRES_PORT=5432"},
	}
	n := 0
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		n++
		name := e.Name()
		t.Run(name, func(t *testing.T) {
			dir, _ := filepath.Abs(filepath.Join("testdata/templates", name))
			p, err := Load(context.Background(), Options{Files: []string{filepath.Join(dir, ".devcontainer", "docker-compose.yml")}, Project: dir})
			if want, ok := refused[name]; ok {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("got %v, want a refusal naming %q", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			app, ok := p.Service("app")
			if !ok || len(app.Binds) != 1 || app.Binds[0].Source != dir || app.Binds[0].Target != "/workspaces/"+name {
				t.Fatalf("app's binds %+v: want only the project at /workspaces/%s", app, name)
			}
			if len(app.Notes) != 1 || !strings.Contains(app.Notes[0], "only the project is bound, at /workspaces/"+name) {
				t.Errorf("app's notes %q", app.Notes)
			}
			db, ok := p.Service("db")
			want := dbs[name]
			if !ok || db.Image != want[0] || db.Restart != "unless-stopped" {
				t.Fatalf("db: %+v, want image %s, restart unless-stopped", db, want[0])
			}
			if want[1] != "" && (len(db.Volumes) != 1 || db.Volumes[0].Target != want[1]) {
				t.Errorf("db's volumes %+v, want one at %s", db.Volumes, want[1])
			}
			if want[2] != "" && !slices.Contains(db.Env, want[2]) {
				t.Errorf("db's environment %q has no %s (its env_file)", db.Env, want[2])
			}
		})
	}
	if n != len(refused)+len(dbs) {
		t.Errorf("%d templates, the table has %d", n, len(refused)+len(dbs))
	}
}
