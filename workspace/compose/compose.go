// Package compose reads the Docker Compose files a devcontainer.json
// names (dockerComposeFile) with the Compose specification's own loader,
// and turns the services into what Cove runs: one workspace whose
// services share one network namespace (as a pod does), each service
// its own container. It runs nothing itself (see workspace's Local).
//
// Everything a Compose file can say that Cove cannot do is refused,
// naming the key; what would reach the host (a bind of a path outside the
// project, a build context outside it, a file read from outside it)
// needs the user's trust.
package compose

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
)

// Options say what to load and how far to trust it.
type Options struct {
	// Files are the Compose files, absolute, in order (later ones
	// override earlier ones, as docker compose -f does).
	Files []string
	// Project is the project directory: without Trusted nothing outside
	// it is read, bound or built from.
	Project string
	// Trusted says the user trusted the project's configuration (cove up
	// --trust): binds and build contexts may then name any host path, and
	// interpolation sees the host's environment.
	Trusted bool
	// Env is the host's environment, used for interpolation only when
	// Trusted (else only the .env file beside the first Compose file).
	Env []string
	// Profiles are the profiles to enable (COMPOSE_PROFILES).
	Profiles []string
}

// Project is a loaded Compose project, as Cove runs it.
type Project struct {
	Name string
	// Dir is the Compose project's directory (the first file's, as
	// docker compose has it).
	Dir string
	// Services are in an order that starts each after what it depends on.
	Services []Service
	// Volumes are the named volumes the services use.
	Volumes []string
}

// Service is one service of a Project.
type Service struct {
	Name  string
	Image string // "" when Build names how to make it
	Build *Build
	// Entrypoint and Command replace the image's when set (nil: the
	// image's); an empty, non-nil one clears it, as Compose's [] does.
	Entrypoint, Command []string
	Env                 []string // KEY=VALUE, environment over env_file
	User, WorkingDir    string
	Hostname            string
	Binds               []Bind
	Volumes             []Volume
	Tmpfs               []string // targets
	Ports               []string // the "[IP:]HOST:CONTAINER[/PROTO]" of ports, for container.ParsePort
	Expose              []string // "PORT[/PROTO]" the service listens on (expose, ports' container side)
	DependsOn           []Dependency
	Health              *Health
	Restart             string
	ExtraHosts          [][2]string
	Aliases             []string // network aliases: more names for the service
	CapDrop             []string
	// StopGrace is stop_grace_period in seconds (0: Cove's default).
	StopGrace int
	// Notes say what Cove ran differently from the file, and why.
	Notes []string
}

// Build is a service's build: through cove build.
type Build struct {
	Context    string // absolute
	Dockerfile string // absolute
	Target     string
	Args       map[string]string
}

// Bind is a host path bound into a service.
type Bind struct {
	Source, Target string
	ReadOnly       bool
}

// Volume is a named volume (a Cove-managed directory) in a service.
type Volume struct {
	Name, Target string
	ReadOnly     bool
	// NoCopy is volume: {nocopy: true}: a new volume starts empty, not
	// with the image's files at Target.
	NoCopy bool
}

// Dependency is one depends_on entry.
type Dependency struct {
	Service   string
	Condition string // types.ServiceCondition*: started, healthy, completed_successfully
	Required  bool
}

// Health is a service's healthcheck.
type Health struct {
	Test                           []string // the command (CMD form) or ["/bin/sh", "-c", CMD]
	Interval, Timeout, StartPeriod float64  // seconds
	Retries                        int
}

// The depends_on conditions.
const (
	Started   = types.ServiceConditionStarted
	Healthy   = types.ServiceConditionHealthy
	Completed = types.ServiceConditionCompletedSuccessfully
)

// Load reads o.Files as docker compose config does (interpolation, .env,
// profiles, extends, include, merging of several files) and checks every
// service against what Cove can run.
func Load(ctx context.Context, o Options) (*Project, error) {
	if len(o.Files) == 0 {
		return nil, errors.New("no Compose file")
	}
	for _, f := range o.Files {
		if err := inside(o, f, "dockerComposeFile"); err != nil {
			return nil, err
		}
	}
	env := []string{}
	if o.Trusted {
		env = o.Env
	}
	// The .env beside the first file, as docker compose reads it; a
	// symlink out of the project is not followed.
	var dotEnv []string
	if f := filepath.Join(filepath.Dir(o.Files[0]), ".env"); exists(f) {
		if err := inside(o, f, ".env"); err != nil {
			return nil, err
		}
		dotEnv = []string{f}
	}
	opts, err := cli.NewProjectOptions(o.Files,
		cli.WithWorkingDirectory(filepath.Dir(o.Files[0])),
		cli.WithEnv(env),
		cli.WithEnvFiles(dotEnv...),
		cli.WithDotEnv,
		cli.WithProfiles(o.Profiles),
		cli.WithResourceLoader(confined{o}),
		cli.WithLoadOptions(func(lo *loader.Options) {
			// env_file is read below, once its paths are checked.
			lo.SkipResolveEnvironment = true
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.Files[0], err)
	}
	p, err := opts.LoadProject(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", strings.Join(o.Files, ", "), err)
	}
	return convert(o, p)
}

// convert checks p's services and makes them Cove's.
func convert(o Options, p *types.Project) (*Project, error) {
	var refused []string
	out := &Project{Name: p.Name, Dir: p.WorkingDir}
	for _, name := range order(p) {
		s := p.Services[name]
		if !serviceName().MatchString(name) {
			refused = append(refused, fmt.Sprintf("service %q: a name of letters, digits, _ . - that starts with a letter or digit (it names a container and a directory)", name))
			continue
		}
		refused = append(refused, refusedKeys(s)...)
		svc, why := service(o, s)
		refused = append(refused, why...)
		out.Services = append(out.Services, svc)
		for _, v := range svc.Volumes {
			if !slices.Contains(out.Volumes, v.Name) {
				out.Volumes = append(out.Volumes, v.Name)
			}
		}
	}
	refused = append(refused, refusedTop(p)...)
	if len(refused) > 0 {
		return nil, &RefusedError{Files: o.Files, Keys: refused}
	}
	if err := checkPorts(out.Services); err != nil {
		return nil, fmt.Errorf("%s: %w", o.Files[0], err)
	}
	return out, nil
}

var serviceName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`) })

// RefusedError names what a Compose file asks for that Cove does not do
// (or, untrusted, would not let reach the host): nothing started.
type RefusedError struct {
	Files []string
	Keys  []string // "service db: privileged", …
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("%s: cove held back what it cannot do in a workspace or that would reach the host (nothing was started): %s",
		strings.Join(e.Files, ", "), strings.Join(e.Keys, "; "))
}

// order is p's services, each after those it depends on (by name where
// nothing orders them, so that a start is the same each time).
func order(p *types.Project) []string {
	names := p.ServiceNames() // sorted
	var out []string
	seen := map[string]bool{}
	var visit func(string, int)
	visit = func(n string, depth int) {
		if seen[n] || depth > len(names) {
			return // a cycle is the loader's to refuse
		}
		seen[n] = true
		deps := make([]string, 0, len(p.Services[n].DependsOn))
		for d := range p.Services[n].DependsOn {
			deps = append(deps, d)
		}
		slices.Sort(deps)
		for _, d := range deps {
			if _, ok := p.Services[d]; ok {
				visit(d, depth+1)
			}
		}
		out = append(out, n)
	}
	for _, n := range names {
		visit(n, 0)
	}
	return out
}

// Service returns the service named name.
func (p *Project) Service(name string) (*Service, bool) {
	for i := range p.Services {
		if p.Services[i].Name == name {
			return &p.Services[i], true
		}
	}
	return nil, false
}

// inside says whether path (after its symlinks) is in o's project, or
// may be anywhere (trusted); what refers to it is key.
func inside(o Options, path, key string) error {
	if o.Trusted {
		return nil
	}
	if !within(o.Project, path) {
		return fmt.Errorf("%s %s is outside the project %s: a project's Compose file may name only its own files (cove up --trust lets it, once you have read it)", key, path, o.Project)
	}
	return nil
}

// within says whether path, its symlinks followed as far as they exist,
// lies in dir.
func within(dir, path string) bool {
	if d, err := filepath.EvalSymlinks(dir); err == nil {
		dir = d
	}
	path = filepath.Clean(path)
	// The longest part that exists, resolved; the rest as written (it
	// cannot be a symlink yet).
	rest := ""
	for p := path; ; p = filepath.Dir(p) {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			path = filepath.Join(r, rest)
			break
		}
		if p == "/" || p == "." {
			break
		}
		rest = filepath.Join(filepath.Base(p), rest)
	}
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

func exists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// confined is the loader's way to the files extends and include name:
// without trust, only the project's. Relative paths are the Compose
// project directory's (the first file's), as the loader has them for the
// files it is given.
type confined struct{ o Options }

func (c confined) Accept(path string) bool { return !c.o.Trusted }

func (c confined) Load(_ context.Context, path string) (string, error) {
	if !filepath.IsAbs(path) {
		path = filepath.Join(filepath.Dir(c.o.Files[0]), path)
	}
	if err := inside(c.o, path, "extends/include file"); err != nil {
		return "", err
	}
	return path, nil
}

func (c confined) Dir(path string) string {
	if !filepath.IsAbs(path) {
		path = filepath.Join(filepath.Dir(c.o.Files[0]), path)
	}
	return filepath.Dir(path)
}
