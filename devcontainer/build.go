package devcontainer

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
)

// Build is devcontainer.json's build section: the workspace image is
// built from a Dockerfile of the project.
type Build struct {
	Dockerfile string   `json:"dockerfile"`
	Context    string   `json:"context"`
	Args       EnvMap   `json:"args"`
	Target     string   `json:"target"`
	Options    []string `json:"options"`
	CacheFrom  any      `json:"cacheFrom"`
}

// ImageBuild is what the build section (or the older top-level
// dockerFile) asks cove to build, its paths relative to the project.
type ImageBuild struct {
	Dockerfile string // the Dockerfile, relative to the project
	Context    string // the build context, relative to the project ("." is the project)
	Args       map[string]string
	Target     string
	NoCache    bool
	Pull       bool
}

// ImageBuild is the image the file builds (build.dockerfile, or the
// older dockerFile: either wins over image, as in the devcontainers CLI),
// nil when it names one to pull instead. Paths are relative to the file's
// folder, as the spec has them, and must stay in the project: the build
// reads only the project.
func (c *Config) ImageBuild() (*ImageBuild, error) {
	b, _, err := c.imageBuild()
	return b, err
}

// imageBuild is ImageBuild, and notes that name what of the section cove
// does not apply (docker build options it has no use for, cacheFrom).
func (c *Config) imageBuild() (b *ImageBuild, notes []string, err error) {
	if c == nil {
		return nil, nil, nil
	}
	sec, notes, ok := c.buildSection()
	if !ok {
		return nil, notes, nil
	}
	if sec.Dockerfile == "" {
		return nil, nil, fmt.Errorf("%s: build: no dockerfile named; give \"dockerfile\" (relative to this file), or an \"image\"", c.Path)
	}
	folder, err := filepath.Rel(c.project, filepath.Dir(c.Path))
	if err != nil {
		return nil, nil, err
	}
	b = &ImageBuild{Target: sec.Target, Args: map[string]string{}}
	if b.Dockerfile, err = c.inProject(folder, "dockerfile", sec.Dockerfile); err != nil {
		return nil, nil, err
	}
	ctx := sec.Context
	if ctx == "" {
		ctx = "."
	}
	if b.Context, err = c.inProject(folder, "context", ctx); err != nil {
		return nil, nil, err
	}
	for k, v := range sec.Args {
		if v != nil {
			b.Args[k] = *v
		}
	}
	notes = append(notes, b.takeOptions(sec.Options)...)
	if sec.CacheFrom != nil {
		notes = append(notes, "build.cacheFrom is not used: cove build keeps its own step cache")
	}
	sort.Strings(notes)
	return b, notes, nil
}

// buildSection is the build the file asks for: its build section, or the
// older top-level dockerFile (with the section's other keys, and a
// top-level context); ok is false when it names no Dockerfile.
func (c *Config) buildSection() (sec Build, notes []string, ok bool) {
	switch {
	case c.Build != nil && (c.Build.Dockerfile != "" || c.DockerFile == ""):
		sec = *c.Build
	case c.DockerFile != "":
		sec = Build{Dockerfile: c.DockerFile}
		if c.Build != nil {
			sec.Context, sec.Args, sec.Target, sec.Options = c.Build.Context, c.Build.Args, c.Build.Target, c.Build.Options
		}
		// The older files put the context beside dockerFile, at the top
		// level (home-assistant's: "context": "..", "dockerFile":
		// "../Dockerfile.dev"); the devcontainers CLI reads it there.
		if c.Context != "" {
			sec.Context = c.Context
		}
	default:
		if c.Context != "" {
			notes = append(notes, "context is the build context of dockerFile, which this file does not name; it is ignored")
		}
		return sec, notes, false
	}
	if c.Context != "" && c.DockerFile == "" {
		notes = append(notes, "context is the build context of the older dockerFile; this file's build section has its own (build.context), so it is ignored")
	}
	return sec, notes, true
}

// inProject is p (build.KEY, relative to the file's folder, or absolute)
// relative to the project, which it must not leave: the build reads only
// the project.
func (c *Config) inProject(folder, key, p string) (string, error) {
	rel := filepath.Join(folder, p)
	if filepath.IsAbs(p) {
		var err error
		if rel, err = filepath.Rel(c.project, p); err != nil {
			return "", err
		}
	}
	rel = filepath.Clean(rel)
	if !filepath.IsLocal(rel) && rel != "." {
		return "", fmt.Errorf("%s: build.%s %q is outside the project %s: cove builds from the project's files only; move it into the project", c.Path, key, p, c.project)
	}
	return rel, nil
}

// takeOptions applies the docker build options cove build has
// (--build-arg, --target, --no-cache, --pull; a value after = or as the
// next word) and returns notes naming the rest, which it ignores.
func (b *ImageBuild) takeOptions(options []string) (notes []string) {
	for i := 0; i < len(options); i++ {
		opt := options[i]
		name, val, hasVal := strings.Cut(opt, "=")
		takeVal := func() bool {
			if hasVal {
				return true
			}
			if i+1 < len(options) {
				i++
				val = options[i]
				return true
			}
			return false
		}
		switch name {
		case "--build-arg":
			if takeVal() {
				k, v, _ := strings.Cut(val, "=")
				b.Args[k] = v
			}
		case "--target":
			if takeVal() {
				b.Target = val
			}
		case "--no-cache":
			b.NoCache = true
		case "--pull":
			b.Pull = true
		default:
			notes = append(notes, fmt.Sprintf("build.options %s is not supported by cove build; it is ignored", opt))
		}
	}
	return notes
}
