package devcontainer

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// varRef is a ${…} reference, as the devcontainers CLI finds them.
var varRef = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\$\{(.*?)\}`) })

// vars substitutes the spec's variables. Local ones (the host's side) are
// resolved when the file is read; ${containerEnv:…} once the container's
// environment is known. An unknown variable is left as written.
type vars struct {
	localFolder     string // the project on the host
	containerFolder string // workspaceFolder, "" for cove's default
	id              string // ${devcontainerId}
	trusted         bool
	getenv          func(string) string
	// heldEnv names the places an untrusted ${localEnv:…} was not read.
	heldEnv []string
	notes   []string
	// unknown are the variables no part of the spec resolves, found in
	// what cove applies, each with where: left as written, they would
	// reach an image reference or a command as text.
	unknown [][2]string
}

// DefaultWorkspaceFolder is where cove binds the project when the file
// names no workspaceFolder.
const DefaultWorkspaceFolder = "/workspace"

func newVars(dir, path string, trusted bool, getenv func(string) string) *vars {
	// Stable for the project and its config, 52 characters of [0-9a-v]
	// as the CLI's are; the same workspace always gets the same one.
	sum := sha256.Sum256([]byte(dir + "\x00" + path))
	id := strings.ToLower(base32.NewEncoding("0123456789ABCDEFGHIJKLMNOPQRSTUV").WithPadding(base32.NoPadding).EncodeToString(sum[:]))
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	return &vars{localFolder: dir, id: id, trusted: trusted, getenv: getenv}
}

// ContainerFolder is the workspace folder inside: workspaceFolder, or
// cove's default.
func (v *vars) folder() string {
	if v.containerFolder != "" {
		return v.containerFolder
	}
	return DefaultWorkspaceFolder
}

// local substitutes the host-side variables in s, found at where (a key
// path, for the notes).
func (v *vars) local(s, where string) string {
	return varRef().ReplaceAllStringFunc(s, func(ref string) string {
		name, arg, hasArg := strings.Cut(ref[2:len(ref)-1], ":")
		switch name {
		case "localEnv", "env":
			if !hasArg {
				return ref
			}
			key, def, _ := strings.Cut(arg, ":")
			if !v.trusted {
				v.heldEnv = appendOnce(v.heldEnv, fmt.Sprintf("%s in %s", key, where))
				return def
			}
			if val := v.getenv(key); val != "" {
				return val
			}
			return def
		case "localWorkspaceFolder":
			return v.localFolder
		case "localWorkspaceFolderBasename":
			return filepath.Base(v.localFolder)
		case "containerWorkspaceFolder":
			return v.folder()
		case "containerWorkspaceFolderBasename":
			return filepath.Base(v.folder())
		case "devcontainerId":
			return v.id
		case "containerEnv":
			// Resolved once the container's environment is known, where
			// cove reads it then; anywhere else it would stay text.
			if top, _, _ := strings.Cut(where, "."); applied(where) && !containerEnvKeys[top] {
				v.notes = appendOnce(v.notes, fmt.Sprintf("%s: %s is resolved only in containerEnv, remoteEnv and the lifecycle commands run in the container; here it is left as written", where, ref))
			}
			return ref
		}
		if applied(where) {
			v.unknown = appendOnceRef(v.unknown, [2]string{ref, where})
		}
		return ref
	})
}

// container substitutes ${containerEnv:NAME[:default]} in s against env.
func (v *vars) container(s string, env map[string]string) string {
	return varRef().ReplaceAllStringFunc(s, func(ref string) string {
		name, arg, hasArg := strings.Cut(ref[2:len(ref)-1], ":")
		if name != "containerEnv" || !hasArg {
			return ref
		}
		key, def, _ := strings.Cut(arg, ":")
		if val, ok := env[key]; ok && val != "" {
			return val
		}
		return def
	})
}

// walk substitutes the local variables in every string of a JSON tree.
func (v *vars) walk(node any, where string) any {
	switch n := node.(type) {
	case string:
		return v.local(n, where)
	case []any:
		out := make([]any, len(n))
		for i, e := range n {
			out[i] = v.walk(e, where)
		}
		return out
	case map[string]any:
		keys := make([]string, 0, len(n))
		for k := range n {
			keys = append(keys, k)
		}
		sort.Strings(keys) // the notes in a stable order
		out := make(map[string]any, len(n))
		for _, k := range keys {
			p := k
			if where != "" {
				p = where + "." + k
			}
			out[k] = v.walk(n[k], p)
		}
		return out
	}
	return node
}

// containerEnvKeys are where cove resolves ${containerEnv:…}: the
// environment maps and the commands run in the container.
var containerEnvKeys = map[string]bool{"containerEnv": true, "remoteEnv": true, "onCreateCommand": true,
	"updateContentCommand": true, "postCreateCommand": true, "postStartCommand": true, "postAttachCommand": true}

// applied says whether the key path where is one cove applies: the
// name and the tools' customizations are not (VS Code's own variables,
// ${workspaceFolder}, are at home there).
func applied(where string) bool {
	top, _, _ := strings.Cut(where, ".")
	return where != "" && top != "name" && top != "customizations"
}

func appendOnceRef(l [][2]string, r [2]string) [][2]string {
	for _, e := range l {
		if e == r {
			return l
		}
	}
	return append(l, r)
}

func appendOnce(l []string, s string) []string {
	for _, e := range l {
		if e == s {
			return l
		}
	}
	return append(l, s)
}
