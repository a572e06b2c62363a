// Package devcontainer reads a project's devcontainer.json
// (https://containers.dev) and says what of it cove honours, what it
// refuses and what it ignores.
//
// The file is in the project, which the workspace can write: it is hostile
// input. What it may ask for without more is what stays inside the
// workspace (the image, the users, environment variables, commands run in
// the container, the workspace folder). What would reach outside (a
// command run on the host, a host path bound in, more privilege, a host
// environment variable read in) takes effect only when the user trusted
// the file's exact content on the host (Trust).
package devcontainer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/cove-sh/cove/image"
	"github.com/cove-sh/cove/internal/projectfs"
	"github.com/tailscale/hujson"
)

// Config is what cove takes from devcontainer.json, with the local
// variables (${localEnv:…}, ${localWorkspaceFolder}, …) substituted.
type Config struct {
	Path string `json:"-"` // where it was read from, on the host
	// Raw is the file as read: trust is bound to its hash.
	Raw []byte `json:"-"`
	// Trusted says the user trusted Raw on the host (Trust).
	Trusted bool `json:"-"`

	Image string `json:"image"`
	// DockerComposeFile names the Compose files (a string or a list,
	// relative to the file): the workspace is the Compose Service, with
	// RunServices (default: all) beside it (see ComposeFiles).
	DockerComposeFile any      `json:"dockerComposeFile"`
	Service           string   `json:"service"`
	RunServices       []string `json:"runServices"`
	// ShutdownAction "none" keeps the workspace running when its last
	// window closes; stopContainer and stopCompose stop it (cove's way).
	ShutdownAction string `json:"shutdownAction"`
	ContainerEnv   EnvMap `json:"containerEnv"`
	RemoteEnv      EnvMap `json:"remoteEnv"`
	ContainerUser  string `json:"containerUser"`
	RemoteUser     string `json:"remoteUser"`
	// UpdateRemoteUserUID is nil when the file does not say.
	UpdateRemoteUserUID *bool `json:"updateRemoteUserUID"`

	WorkspaceFolder string   `json:"workspaceFolder"`
	WorkspaceMount  string   `json:"workspaceMount"`
	Mounts          []Mount  `json:"mounts"`
	RunArgs         []string `json:"runArgs"`
	CapAdd          []string `json:"capAdd"`
	SecurityOpt     []string `json:"securityOpt"`
	Init            *bool    `json:"init"`
	Privileged      *bool    `json:"privileged"`
	OverrideCommand *bool    `json:"overrideCommand"`
	// ForwardPorts are ports (3000) or "host:port" strings; AppPort is a
	// port, a "HOST:CONTAINER" string, or a list of either.
	ForwardPorts []any           `json:"forwardPorts"`
	AppPort      json.RawMessage `json:"appPort"`
	Build        *Build          `json:"build"`
	// FeatureMap is features as written: reference → options (see
	// Features).
	FeatureMap map[string]any `json:"features"`
	// OverrideFeatureInstallOrder lists Features (without their version)
	// to install first, in its order.
	OverrideFeatureInstallOrder []string `json:"overrideFeatureInstallOrder"`
	DockerFile                  string   `json:"dockerFile"`
	// Context is the older top-level build context, beside dockerFile
	// (relative to the file, as build.context is).
	Context string `json:"context"`
	// Customizations are the tools' own settings; cove reads its own
	// (customizations.cove: Kube).
	Customizations map[string]json.RawMessage `json:"customizations"`

	InitializeCommand    *Command `json:"initializeCommand"`
	OnCreateCommand      *Command `json:"onCreateCommand"`
	UpdateContentCommand *Command `json:"updateContentCommand"`
	PostCreateCommand    *Command `json:"postCreateCommand"`
	PostStartCommand     *Command `json:"postStartCommand"`
	PostAttachCommand    *Command `json:"postAttachCommand"`

	// Notes say, once each, what of the file cove did not apply and why:
	// a key it does not support, or one it held back for want of trust.
	Notes []string `json:"-"`
	// Untrusted names what the file asked for that takes effect only
	// once the user trusts it (empty when Trusted).
	Untrusted []string `json:"-"`
	// HeldImage is the image an untrusted file named that is a file on
	// this host, held back: the start must stop, not run another image.
	HeldImage string `json:"-"`

	// imageCommands are the lifecycle commands of the image's metadata,
	// run before the file's.
	imageCommands []map[string]*Command
	// vars resolves what is left, ${containerEnv:…}, once the
	// container's environment is known.
	vars *vars
	// project is the project directory on the host.
	project string
	// From the merged metadata (MergeMetadata), for Runtime.
	metaCapAdd, metaSecurityOpt, metaEntrypoints []string
}

// Options says where to look and what the host may give the file.
type Options struct {
	// ConfigPath chooses one file (relative to the project, or absolute
	// inside it) when the project has several; "" finds the only one.
	ConfigPath string
	// Home is the user's home on the host, where the trust record is.
	Home string
	// Getenv reads the host's environment for ${localEnv:…}; it is
	// called only for a trusted file. Nil reads nothing.
	Getenv func(string) string
}

// candidates are the places the spec looks, in its order; the named
// sub-folders (.devcontainer/NAME/devcontainer.json) come after.
var candidates = []string{filepath.Join(".devcontainer", "devcontainer.json"), ".devcontainer.json"}

// Find lists the devcontainer.json files of the project in dir, relative
// to it: .devcontainer/devcontainer.json, .devcontainer.json and
// .devcontainer/NAME/devcontainer.json.
func Find(dir string) ([]string, error) {
	d, err := projectfs.Open(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	var found []string
	for _, rel := range candidates {
		if fi, err := d.Lstat(rel); err == nil && !fi.IsDir() {
			found = append(found, rel)
		}
	}
	entries, err := fs.ReadDir(d.FS(), ".devcontainer")
	if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
		return nil, err
	}
	for _, e := range entries { // sorted by name
		if !e.IsDir() {
			continue
		}
		rel := filepath.Join(".devcontainer", e.Name(), "devcontainer.json")
		if fi, err := d.Lstat(rel); err == nil && !fi.IsDir() {
			found = append(found, rel)
		}
	}
	return found, nil
}

// Load reads the project's devcontainer.json (JSON with comments and
// trailing commas) through the confined project (no symlink out, no
// FIFO, at most 1 MiB). No file is a nil Config. A config cove cannot run
// as written (compose, privileged, a Dockerfile outside the project) is an
// error that names the key and what to do, before anything starts.
func Load(dir string, opts Options) (*Config, error) {
	rel, err := choose(dir, opts.ConfigPath)
	if err != nil || rel == "" {
		return nil, err
	}
	d, err := projectfs.Open(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	p := filepath.Join(dir, rel)
	b, err := d.ReadFileLimit(rel, 1<<20)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return Parse(dir, p, b, opts)
}

// choose picks the config file: the one asked for, else the only one.
func choose(dir, asked string) (string, error) {
	found, err := Find(dir)
	if err != nil {
		return "", err
	}
	if asked != "" {
		rel := asked
		if filepath.IsAbs(asked) {
			if rel, err = filepath.Rel(dir, asked); err != nil {
				return "", err
			}
		}
		rel = filepath.Clean(rel)
		if !slices.Contains(found, rel) {
			return "", fmt.Errorf("--config %s: not a devcontainer.json of %s (there: %s)", asked, dir, listOrNone(found))
		}
		return rel, nil
	}
	switch {
	case len(found) == 0:
		return "", nil
	case len(found) == 1:
		return found[0], nil
	case found[0] == candidates[0] || found[0] == candidates[1]:
		// The spec's default file wins over the named ones, as the
		// devcontainers CLI has it.
		return found[0], nil
	}
	return "", fmt.Errorf("%s has several devcontainer.json: %s; choose one with --config PATH", dir, strings.Join(found, ", "))
}

func listOrNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}

// supported are the keys cove applies (some only when trusted).
var supported = map[string]bool{
	"image": true, "containerEnv": true, "remoteEnv": true, "containerUser": true, "remoteUser": true,
	"updateRemoteUserUID": true, "workspaceFolder": true, "workspaceMount": true, "mounts": true,
	"build": true, "dockerFile": true, "context": true, "features": true, "overrideFeatureInstallOrder": true, "runArgs": true, "capAdd": true, "securityOpt": true, "init": true, "privileged": true,
	"dockerComposeFile": true, "service": true, "runServices": true, "shutdownAction": true,
	"overrideCommand": true, "initializeCommand": true, "onCreateCommand": true,
	"updateContentCommand": true, "postCreateCommand": true, "postStartCommand": true,
	"postAttachCommand": true,
	// Another part of cove handles these (the network): not noted here.
	"forwardPorts": true, "appPort": true,
	// Descriptive only.
	"name": true, "$schema": true,
	// Cove's own part is read (Kube); the other tools' are said below.
	"customizations": true,
}

// ignoredWhy says, for keys cove knows and does not apply, why.
var ignoredWhy = map[string]string{
	"waitFor":          "cove runs every create command before it opens the workspace",
	"userEnvProbe":     "cove takes the environment from the image and the file, not from a login shell",
	"hostRequirements": "cove does not check the host's resources",
	"secrets":          "cove passes no secrets into a workspace",
	// An editor's view of the ports: cove forwards forwardPorts and
	// appPort whatever they say.
	"portsAttributes":      "cove forwards forwardPorts and appPort on 127.0.0.1 as they are, with no labels or onAutoForward actions",
	"otherPortsAttributes": "cove forwards only forwardPorts and appPort, on 127.0.0.1, with no onAutoForward actions",
	// Older files have VS Code's own settings at the top level.
	"extensions": "it is VS Code's (newer files keep it in customizations.vscode); cove installs no editor extensions",
	"settings":   "it is VS Code's (newer files keep it in customizations.vscode); cove has no editor settings to set",
}

// Parse reads the bytes b of the config at path for the project in dir.
func Parse(dir, path string, b []byte, opts Options) (*Config, error) {
	std, err := hujson.Standardize(b)
	if err != nil {
		return nil, fmt.Errorf("%s is not JSON (comments and trailing commas allowed): %v; fix the file there", path, strings.TrimPrefix(err.Error(), "hujson: "))
	}
	var tree map[string]any
	if err := json.Unmarshal(std, &tree); err != nil {
		return nil, fmt.Errorf("%s is not a JSON object of devcontainer.json's keys: %v; fix the file", path, err)
	}
	if err := refuse(path, tree); err != nil {
		return nil, err
	}
	c := &Config{Path: path, Raw: b, project: dir}
	c.Trusted = opts.Home != "" && Trusted(opts.Home, dir, path, b)
	v := newVars(dir, path, c.Trusted, opts.Getenv)
	// workspaceFolder first: ${containerWorkspaceFolder} is what it says.
	if wf, ok := tree["workspaceFolder"].(string); ok {
		v.containerFolder = v.local(wf, "workspaceFolder")
	}
	substituted := v.walk(tree, "").(map[string]any)
	std, _ = json.Marshal(substituted)
	if err := json.Unmarshal(std, c); err != nil {
		return nil, decodeError(path, substituted, err)
	}
	if c.WorkspaceMount != "" {
		// Checked here, not as the workspace starts: a form cove cannot
		// mount stops before anything is built or fetched.
		if m, err := ParseMount(c.WorkspaceMount); err == nil && m.Type == "tmpfs" {
			return nil, fmt.Errorf("%s: workspaceMount %q: a tmpfs would put an empty directory in memory where the project goes; write a bind (type=bind,source=${localWorkspaceFolder},target=/workspaces/NAME) or a volume", path, c.WorkspaceMount)
		} else if err != nil {
			return nil, fmt.Errorf("%s: workspaceMount %q: %v; write it as Docker's --mount (type=bind,source=${localWorkspaceFolder},target=/workspaces/NAME), or remove it", path, c.WorkspaceMount, err)
		}
	}
	c.vars = v
	var keys []string
	for k := range tree {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch why, known := ignoredWhy[k]; {
		case supported[k]:
		case known:
			c.Notes = append(c.Notes, fmt.Sprintf("%s is not supported: %s", k, why))
		default:
			c.Notes = append(c.Notes, fmt.Sprintf("%s is not supported by cove; it is ignored", k))
		}
	}
	c.Notes = append(c.Notes, v.notes...)
	for _, u := range v.unknown {
		ref, where := u[0], u[1]
		if strings.HasPrefix(ref, "${templateOption:") {
			// A Template's source, as the templates repository has it:
			// an image reference or a Feature's option with a hole in it.
			return nil, fmt.Errorf("%s: %s: %s is an option of a Dev Container Template, filled in when the template is applied: this file is a template's source, not a project's configuration; apply the template (devcontainer templates apply), or replace %s with a value",
				path, where, ref, ref)
		}
		c.Notes = append(c.Notes, fmt.Sprintf("%s: %s is not a variable of devcontainer.json (localEnv, containerEnv, localWorkspaceFolder, localWorkspaceFolderBasename, containerWorkspaceFolder, containerWorkspaceFolderBasename, devcontainerId); it is left as written", where, ref))
	}
	if others := c.otherCustomizations(); len(others) > 0 {
		c.Notes = append(c.Notes, fmt.Sprintf("customizations for %s are other tools' settings; cove ignores them", strings.Join(others, ", ")))
	}
	if _, err := c.Kube(); err != nil {
		return nil, err
	}
	// A build section cove cannot follow stops here, before anything
	// starts; what of it cove ignores is said with the rest.
	_, buildNotes, err := c.imageBuild()
	if err != nil {
		return nil, err
	}
	c.Notes = append(c.Notes, buildNotes...)
	if _, err := c.Features(); err != nil {
		return nil, err
	}
	if slices.Contains(c.RunArgs, "--privileged") || slices.Contains(c.RunArgs, "--privileged=true") {
		return nil, fmt.Errorf("%s: runArgs --privileged: cove does not run privileged workspaces (every capability and device of the host, and no filter); remove it, and name what the tools need in capAdd", path)
	}
	if !c.Trusted {
		c.holdBack(dir, v)
	}
	// What cove cannot run is said before anything starts.
	rt, err := c.Runtime()
	if err != nil {
		return nil, err
	}
	c.Notes = append(c.Notes, rt.Notes...)
	return c, nil
}

// decodeError is err, the file's failure to decode into a Config, as
// the user can act on it: the key whose value is not of the spec's form
// (found by decoding the keys of tree one by one), what it is and what
// the key takes, rather than the decoder's Go types.
func decodeError(path string, tree map[string]any, err error) error {
	keys := make([]string, 0, len(tree))
	for k := range tree {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b, _ := json.Marshal(map[string]any{k: tree[k]})
		var one Config
		kerr := json.Unmarshal(b, &one)
		if kerr == nil {
			continue
		}
		where, why := k, kerr.Error()
		var te *json.UnmarshalTypeError
		if errors.As(kerr, &te) {
			if te.Field != "" {
				where = te.Field
			}
			why = fmt.Sprintf("%s %s, where it takes %s", article(te.Value), te.Value, typeWords(te.Type))
		}
		return fmt.Errorf("%s: %s: %s; write it as the spec has it (containers.dev/implementors/json_reference), or remove it", path, where, why)
	}
	return fmt.Errorf("%s: %w", path, err)
}

func article(w string) string {
	if strings.ContainsRune("aeiou", rune(w[0])) {
		return "an"
	}
	return "a"
}

// typeWords says what a Go type of Config is in JSON's terms.
func typeWords(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int64, reflect.Float64:
		return "a number"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.String {
			return "an array of strings"
		}
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return t.String()
}

// ComposeFiles are the Compose files the config names, absolute (nil
// without dockerComposeFile).
func (c *Config) ComposeFiles() []string {
	if c == nil {
		return nil
	}
	var out []string
	for _, f := range stringList(c.DockerComposeFile) {
		if !filepath.IsAbs(f) {
			f = filepath.Join(filepath.Dir(c.Path), f)
		}
		out = append(out, f)
	}
	return out
}

// refuse is the error for a config cove cannot run as written.
func refuse(path string, tree map[string]any) error {
	if compose, ok := tree["dockerComposeFile"]; ok {
		if service, _ := tree["service"].(string); service == "" {
			return fmt.Errorf("%s: dockerComposeFile (%s) without \"service\": name the Compose service the workspace is (the one you work in)",
				path, strings.Join(stringList(compose), ", "))
		}
	}
	if p, _ := tree["privileged"].(bool); p {
		return fmt.Errorf("%s: privileged: cove does not run privileged workspaces (every capability and device of the host, and no filter: the workspace would be the host's); remove it, and name what the tools need in capAdd", path)
	}
	// What trust could never make runnable is refused before trust is
	// asked, so that trusting a file does not turn a start into a refusal.
	for _, n := range stringList(tree["capAdd"]) {
		if strings.EqualFold(strings.TrimPrefix(strings.ToUpper(n), "CAP_"), "ALL") {
			return fmt.Errorf("%s: capAdd: capability ALL: that is a privileged workspace, which cove does not run; name the capabilities the tools need", path)
		}
	}
	for _, o := range stringList(tree["securityOpt"]) {
		if err := (&Runtime{}).securityOpt(o); err != nil {
			return fmt.Errorf("%s: securityOpt: %w", path, err)
		}
	}
	return nil
}

func stringList(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// CheckImage says why the start must stop when the file's image was held
// back (a file on this host, named by a file not trusted): cove would
// otherwise start a different image than the project asks for.
func (c *Config) CheckImage() error {
	if c == nil || c.HeldImage == "" {
		return nil
	}
	return fmt.Errorf("%s: the image %s is a file on this host, which only a devcontainer.json you trust may name (the workspace can write this one): read it, then cove up --trust, or give an image with --image", c.Path, c.HeldImage)
}

// holdBack drops what an untrusted file may not have, and names it.
func (c *Config) holdBack(dir string, v *vars) {
	if image.IsLocal(c.Image) {
		// The path names a file or directory of this machine's: one of
		// the user's private images, put in the workspace.
		c.Untrusted = append(c.Untrusted, "image (a file on this host): "+c.Image)
		c.HeldImage, c.Image = c.Image, ""
	}
	if c.InitializeCommand != nil {
		var cmds []string
		for _, s := range c.Steps("initializeCommand", nil) {
			cmds = append(cmds, s.String())
		}
		c.Untrusted = append(c.Untrusted, "initializeCommand (it runs on this host): "+strings.Join(cmds, "; "))
		c.InitializeCommand = nil
	}
	var kept []Mount
	for _, m := range c.Mounts {
		// Even a path in the project: the workspace can make it a
		// symlink to any host path before the bind follows it.
		if m.Type == "bind" {
			c.Untrusted = append(c.Untrusted, fmt.Sprintf("mounts: the host path %s", m.Source))
			continue
		}
		kept = append(kept, m)
	}
	c.Mounts = kept
	if c.WorkspaceMount != "" {
		// The project itself, not a path in it: the workspace can make
		// that a symlink to any host path before the bind follows it.
		if m, err := ParseMount(c.WorkspaceMount); err == nil && m.Type == "bind" && filepath.Clean(m.Source) != filepath.Clean(dir) {
			c.Untrusted = append(c.Untrusted, fmt.Sprintf("workspaceMount: the host path %s", m.Source))
			c.WorkspaceMount = ""
		}
	}
	if len(c.CapAdd) > 0 {
		c.Untrusted = append(c.Untrusted, "capAdd "+strings.Join(c.CapAdd, ", "))
		c.CapAdd = nil
	}
	if len(c.SecurityOpt) > 0 {
		c.Untrusted = append(c.Untrusted, "securityOpt "+strings.Join(c.SecurityOpt, ", "))
		c.SecurityOpt = nil
	}
	// What stays inside (-e, --init, limits) is the file's to ask, as
	// containerEnv is; the rest waits for trust.
	if inside, outside := splitRunArgs(c.RunArgs); len(outside) > 0 {
		c.Untrusted = append(c.Untrusted, "runArgs "+strings.Join(outside, " "))
		c.RunArgs = inside
	}
	if len(v.heldEnv) > 0 {
		c.Untrusted = append(c.Untrusted, "${localEnv:…} ("+strings.Join(v.heldEnv, ", ")+": the host's environment; left empty or its default)")
	}
}

// UntrustedNote is the one line that says what an untrusted file asked
// for and did not get, and how to trust it; "" when there is nothing.
func (c *Config) UntrustedNote() string {
	if c == nil || len(c.Untrusted) == 0 {
		return ""
	}
	return fmt.Sprintf("%s asks for what reaches outside the workspace, not applied: %s. The file is the workspace's to write; if you trust it as it is now, cove up --trust (a change to it is untrusted again)",
		c.Path, strings.Join(c.Untrusted, "; "))
}

// EnvMap is an environment map of devcontainer.json: a value is a string,
// a number or boolean (taken as its JSON text), or null (unset).
type EnvMap map[string]*string

// UnmarshalJSON accepts strings, numbers, booleans and null.
func (m *EnvMap) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("want an object of names to values")
	}
	*m = EnvMap{}
	for k, v := range raw {
		var s string
		switch {
		case string(v) == "null":
			(*m)[k] = nil
			continue
		case json.Unmarshal(v, &s) == nil:
		case len(v) > 0 && (v[0] == '-' || v[0] >= '0' && v[0] <= '9' || v[0] == 't' || v[0] == 'f'):
			s = string(v)
		default:
			return fmt.Errorf("%s: want a string, a number or null", k)
		}
		(*m)[k] = &s
	}
	return nil
}

// Env is containerEnv and remoteEnv as K=V, remoteEnv winning, with
// ${containerEnv:…} resolved against base (the image's environment), and
// the names remoteEnv unsets (null). It is what every process of the
// workspace gets on top of the image's environment.
func (c *Config) Env(base []string) (set, unset []string) {
	if c == nil {
		return nil, nil
	}
	cur := map[string]string{}
	var order []string
	put := func(k, v string) {
		if _, ok := cur[k]; !ok {
			order = append(order, k)
		}
		cur[k] = v
	}
	for _, kv := range base {
		k, v, _ := strings.Cut(kv, "=")
		put(k, v)
	}
	changed := map[string]bool{}
	for _, k := range sortedKeys(c.ContainerEnv) {
		if v := c.ContainerEnv[k]; v != nil {
			put(k, c.vars.container(*v, cur))
			changed[k] = true
		}
	}
	// remoteEnv sees the container's environment: the image's and
	// containerEnv.
	containerView := map[string]string{}
	for k, v := range cur {
		containerView[k] = v
	}
	for _, k := range sortedKeys(c.RemoteEnv) {
		v := c.RemoteEnv[k]
		if v == nil {
			delete(cur, k)
			delete(changed, k)
			unset = append(unset, k)
			continue
		}
		put(k, c.vars.container(*v, containerView))
		changed[k] = true
	}
	for _, k := range order {
		if v, ok := cur[k]; ok && changed[k] {
			set = append(set, k+"="+v)
		}
	}
	return set, unset
}

func sortedKeys(m EnvMap) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// PortSpecs are the ports to forward from the host's 127.0.0.1, in cove
// run's -p syntax (HOSTPORT:CONTAINERPORT): forwardPorts' numbers and
// "localhost:N", and appPort. Notes say what was left out: a forwardPorts
// "service:port" names another container of a compose setup, which cove
// does not run.
func (c *Config) PortSpecs() (specs, notes []string, err error) {
	if c == nil {
		return nil, nil, nil
	}
	for _, v := range c.ForwardPorts {
		switch v := v.(type) {
		case float64:
			if v != float64(int(v)) {
				return nil, nil, fmt.Errorf("%s: forwardPorts: %v is not a port", c.Path, v)
			}
			specs = append(specs, fmt.Sprintf("%d:%d", int(v), int(v)))
		case string:
			host, port, ok := strings.Cut(v, ":")
			if _, err := strconv.Atoi(port); !ok || err != nil {
				return nil, nil, fmt.Errorf("%s: forwardPorts: %q: want a port or \"host:port\"", c.Path, v)
			}
			if host != "localhost" && host != "127.0.0.1" {
				notes = append(notes, fmt.Sprintf("forwardPorts %q names another container; cove forwards only the workspace's own ports", v))
				continue
			}
			specs = append(specs, port+":"+port)
		default:
			return nil, nil, fmt.Errorf("%s: forwardPorts: %v: want a port or \"host:port\"", c.Path, v)
		}
	}
	if len(c.AppPort) == 0 || string(c.AppPort) == "null" {
		return specs, notes, nil
	}
	var list []any
	if json.Unmarshal(c.AppPort, &list) != nil {
		var one any
		if err := json.Unmarshal(c.AppPort, &one); err != nil {
			return nil, nil, fmt.Errorf("%s: appPort: %w", c.Path, err)
		}
		list = []any{one}
	}
	for _, v := range list {
		switch v := v.(type) {
		case float64:
			specs = append(specs, fmt.Sprintf("%d:%d", int(v), int(v)))
		case string:
			if !strings.Contains(v, ":") {
				v += ":" + v
			}
			specs = append(specs, v)
		default:
			return nil, nil, fmt.Errorf("%s: appPort: %v: want a port or \"HOST:CONTAINER\"", c.Path, v)
		}
	}
	return specs, notes, nil
}
