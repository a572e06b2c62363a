package devcontainer

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

func write(t *testing.T, dir, rel, body string) {
	t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	if c, err := Load(dir, Options{}); c != nil || err != nil {
		t.Fatalf("no file: %v %v", c, err)
	}
	write(t, dir, ".devcontainer/devcontainer.json", `{
		// comments and trailing commas, as VS Code writes them
		"image": "debian:bookworm",
		"containerEnv": {"A": "1", "B": "2"},
		"remoteEnv": {"B": "3"},
		"postCreateCommand": "make deps",
		"forwardPorts": [3000,],
	}`)
	c, err := Load(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	set, _ := c.Env(nil)
	sort.Strings(set)
	if c.Image != "debian:bookworm" || strings.Join(set, " ") != "A=1 B=3" || len(c.ForwardPorts) != 1 {
		t.Fatalf("%+v %v", c, set)
	}
	if steps := c.Steps(PostCreate, nil); len(steps) != 1 || strings.Join(steps[0].Argv, " ") != "/bin/sh -c make deps" {
		t.Fatalf("post create %q", steps)
	}
}

// TestImageBuild: the build section's paths are the file's folder's, as
// the spec has them, and stay in the project; its args, target and the
// docker build options cove knows are taken, the others named.
func TestImageBuild(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, ".devcontainer/devcontainer.json", `{"image": "ignored", "build": {"dockerfile": "Dockerfile", "context": "..",
		"args": {"V": 1, "N": null}, "target": "dev", "options": ["--build-arg", "W=2", "--add-host=x:1.2.3.4", "--no-cache"],
		"cacheFrom": "x"}}`)
	c, err := Load(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.ImageBuild()
	if err != nil {
		t.Fatal(err)
	}
	want := ImageBuild{Dockerfile: ".devcontainer/Dockerfile", Context: ".", Args: map[string]string{"V": "1", "W": "2"}, Target: "dev", NoCache: true}
	if b.Dockerfile != want.Dockerfile || b.Context != want.Context || b.Target != want.Target || !b.NoCache || len(b.Args) != 2 || b.Args["V"] != "1" || b.Args["W"] != "2" {
		t.Errorf("build: %+v, want %+v", b, want)
	}
	notes := strings.Join(c.Notes, "\n")
	if !strings.Contains(notes, "build.options --add-host=x:1.2.3.4 is not supported") || !strings.Contains(notes, "build.cacheFrom") {
		t.Errorf("notes: %s", notes)
	}
	// The older top-level dockerFile, at the project's root.
	write(t, dir, ".devcontainer/devcontainer.json", `{"dockerFile": "../Dockerfile.dev"}`)
	if c, err = Load(dir, Options{}); err != nil {
		t.Fatal(err)
	}
	if b, err := c.ImageBuild(); err != nil || b.Dockerfile != "Dockerfile.dev" || b.Context != ".devcontainer" {
		t.Errorf("dockerFile: %+v %v", b, err)
	}
	for _, body := range []string{`{"build": {"dockerfile": "../../Dockerfile"}}`, `{"build": {"dockerfile": "Dockerfile", "context": "../.."}}`,
		`{"build": {"dockerfile": "/etc/Dockerfile"}}`} {
		write(t, dir, ".devcontainer/devcontainer.json", body)
		if _, err := Load(dir, Options{}); err == nil || !strings.Contains(err.Error(), "outside the project") {
			t.Errorf("%s: %v", body, err)
		}
	}
	// An image alone builds nothing.
	write(t, dir, ".devcontainer/devcontainer.json", `{"image": "x"}`)
	if c, err = Load(dir, Options{}); err != nil {
		t.Fatal(err)
	}
	if b, err := c.ImageBuild(); b != nil || err != nil {
		t.Errorf("image: %+v %v", b, err)
	}
}

// TestRefusals: a config cove cannot run as written is an error naming
// the key and what to do (it used to start debian:bookworm for compose;
// Compose without a service names none to work in).
func TestRefusals(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"dockerComposeFile": "compose.yml"}`, `dockerComposeFile (compose.yml) without "service": name the Compose service`},
		{`{"image": "x", "privileged": true}`, "privileged: cove does not run privileged workspaces"},
		{`{"build": {"context": ".."}}`, "build: no dockerfile named"},
	} {
		dir := t.TempDir()
		write(t, dir, ".devcontainer.json", tc.body)
		if _, err := Load(dir, Options{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.body, err, tc.want)
		}
	}
}

// TestSeveralConfigs: .devcontainer/NAME/devcontainer.json is found;
// with several, --config chooses and the error lists them.
func TestSeveralConfigs(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, ".devcontainer/python/devcontainer.json", `{"image": "py"}`)
	c, err := Load(dir, Options{})
	if err != nil || c == nil || c.Image != "py" {
		t.Fatalf("one named config: %+v %v", c, err)
	}
	write(t, dir, ".devcontainer/go/devcontainer.json", `{"image": "go"}`)
	_, err = Load(dir, Options{})
	if err == nil || !strings.Contains(err.Error(), ".devcontainer/go/devcontainer.json, .devcontainer/python/devcontainer.json") || !strings.Contains(err.Error(), "--config") {
		t.Fatalf("several: %v", err)
	}
	for _, p := range []string{".devcontainer/go/devcontainer.json", filepath.Join(dir, ".devcontainer/go/devcontainer.json")} {
		if c, err := Load(dir, Options{ConfigPath: p}); err != nil || c.Image != "go" {
			t.Fatalf("--config %s: %+v %v", p, c, err)
		}
	}
	if _, err := Load(dir, Options{ConfigPath: "/etc/passwd"}); err == nil || !strings.Contains(err.Error(), "not a devcontainer.json") {
		t.Fatalf("--config outside: %v", err)
	}
	write(t, dir, ".devcontainer/devcontainer.json", `{"image": "default"}`)
	if c, err := Load(dir, Options{}); err != nil || c.Image != "default" {
		t.Fatalf("the default file wins: %+v %v", c, err)
	}
}

// TestNotes: every key cove does not apply is named once.
func TestNotes(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, ".devcontainer.json", `{"image": "x", "name": "n", "features": {"ghcr.io/devcontainers/features/go:1": {}},
		"customizations": {"vscode": {}}, "hostRequirements": {"cpus": 2}, "somethingNew": 1, "appPort": 3000}`)
	c, err := Load(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(c.Notes, "\n")
	for _, want := range []string{"customizations for vscode are other tools' settings",
		"hostRequirements is not supported", "somethingNew is not supported by cove; it is ignored"} {
		if strings.Count(got, want) != 1 {
			t.Errorf("notes %q: want %q once", got, want)
		}
	}
	if strings.Contains(got, "name") || strings.Contains(got, "appPort") || strings.Contains(got, "features") {
		t.Errorf("notes %q name a key that is applied (or another's)", got)
	}
}

// TestEnvMaps: a number is its text (it used to reject the whole file),
// null in remoteEnv unsets (it used to set FOO=), ${containerEnv:…}
// resolves against the container's environment (it used to be literal).
func TestEnvMaps(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, ".devcontainer.json", `{"image": "x", "workspaceFolder": "/src/${localWorkspaceFolderBasename}",
		"containerEnv": {"PORT": 8080, "DEBUG": true, "TOOLS": "${containerWorkspaceFolder}/tools"},
		"remoteEnv": {"PATH": "${containerWorkspaceFolder}/.dotnet:${containerEnv:PATH}", "FOO": null, "UNSET_DEFAULT": "${containerEnv:NOPE:fallback}",
			"SEES": "${containerEnv:TOOLS}"}}`)
	c, err := Load(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	set, unset := c.Env([]string{"PATH=/usr/bin:/bin", "FOO=image"})
	sort.Strings(set)
	folder := "/src/" + filepath.Base(dir)
	want := []string{"DEBUG=true", "PATH=" + folder + "/.dotnet:/usr/bin:/bin", "PORT=8080", "SEES=" + folder + "/tools", "TOOLS=" + folder + "/tools", "UNSET_DEFAULT=fallback"}
	if strings.Join(set, " ") != strings.Join(want, " ") || strings.Join(unset, " ") != "FOO" {
		t.Errorf("set %q unset %q\nwant %q and FOO", set, unset, want)
	}
	if c.Folder() != folder {
		t.Errorf("workspaceFolder %q, want %q", c.Folder(), folder)
	}
}

// TestLocalEnvNeedsTrust: a project's file cannot read the host's
// environment into the workspace (an API key, say) unless the user
// trusted that file's content; a change to it is untrusted again.
func TestLocalEnvNeedsTrust(t *testing.T) {
	dir, home := t.TempDir(), t.TempDir()
	body := `{"image": "x", "containerEnv": {"KEY": "${localEnv:SECRET}", "D": "${localEnv:SECRET:dflt}", "U": "${localEnv:UNSET_VAR:dflt}"},
		"initializeCommand": "touch /tmp/canary", "capAdd": ["SYS_PTRACE"], "runArgs": ["--cap-add", "NET_ADMIN"],
		"mounts": ["source=/etc,target=/host-etc,type=bind", "source=${localWorkspaceFolder}/cache,target=/cache,type=bind", "source=vol,target=/v,type=volume"]}`
	write(t, dir, ".devcontainer.json", body)
	getenv := func(k string) string { return map[string]string{"SECRET": "s3cr3t"}[k] }
	opts := Options{Home: home, Getenv: getenv}
	c, err := Load(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	set, _ := c.Env(nil)
	sort.Strings(set)
	if strings.Join(set, " ") != "D=dflt KEY= U=dflt" {
		t.Errorf("untrusted env %q: the host's SECRET read in", set)
	}
	if c.InitializeCommand != nil || len(c.CapAdd) > 0 || len(c.RunArgs) > 0 || len(c.Mounts) != 1 || c.Mounts[0].Type != "volume" {
		t.Errorf("untrusted: %+v", c)
	}
	note := c.UntrustedNote()
	for _, want := range []string{"initializeCommand (it runs on this host)", "the host path /etc", "the host path " + dir + "/cache", "capAdd SYS_PTRACE", "runArgs --cap-add NET_ADMIN", "SECRET in containerEnv.KEY", "cove up --trust"} {
		if !strings.Contains(note, want) {
			t.Errorf("note %q lacks %q", note, want)
		}
	}
	path, grants, err := Trust(dir, opts)
	if err != nil || path != filepath.Join(dir, ".devcontainer.json") {
		t.Fatal(path, err)
	}
	// What trusting lets take effect is shown: the command itself too.
	if g := strings.Join(grants, "\n"); !strings.Contains(g, "initializeCommand (it runs on this host): touch /tmp/canary") ||
		!strings.Contains(g, "capAdd SYS_PTRACE") || !strings.Contains(g, "the host path /etc") || !strings.Contains(g, "SECRET in containerEnv.KEY") {
		t.Errorf("grants: %s", g)
	}
	c, err = Load(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	set, _ = c.Env(nil)
	sort.Strings(set)
	if !c.Trusted || strings.Join(set, " ") != "D=s3cr3t KEY=s3cr3t U=dflt" || c.InitializeCommand == nil || len(c.Mounts) != 3 || c.UntrustedNote() != "" {
		t.Errorf("trusted: %v %q %+v", c.Trusted, set, c)
	}
	write(t, dir, ".devcontainer.json", strings.Replace(body, "SYS_PTRACE", "SYS_ADMIN", 1))
	if c, _ := Load(dir, opts); c.Trusted || c.InitializeCommand != nil {
		t.Errorf("a changed file is still trusted")
	}
}

// TestCommandForms: string, array and object (parallel) forms.
func TestCommandForms(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, ".devcontainer.json", `{"image": "x", "onCreateCommand": ["./setup.sh", "${containerEnv:HOME}"],
		"postCreateCommand": {"a": "echo a", "b": ["echo", "b"]}, "postStartCommand": "", "postAttachCommand": null}`)
	c, err := Load(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Steps(OnCreate, []string{"HOME=/home/u"}); len(s) != 1 || strings.Join(s[0].Argv, " ") != "./setup.sh /home/u" {
		t.Errorf("array form: %q", s)
	}
	s := c.Steps(PostCreate, nil)
	if len(s) != 2 || s[0].String() != "a: echo a" || s[1].String() != "b: echo b" {
		t.Errorf("object form: %q", s)
	}
	if s := c.Steps(PostStart, nil); s != nil {
		t.Errorf("empty string: %q", s)
	}
	if s := c.Steps(PostAttach, nil); s != nil {
		t.Errorf("null: %q", s)
	}
}

// TestLoadConfinedToTheProject: a devcontainer.json that is a FIFO does
// not hang cove up, and one symlinked to a host file is not read.
func TestLoadConfinedToTheProject(t *testing.T) {
	dir, host := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(host, "secret.json"), []byte(`{"image": "from-the-host"}`), 0o644)
	os.Mkdir(filepath.Join(dir, ".devcontainer"), 0o755)
	os.Symlink(filepath.Join(host, "secret.json"), filepath.Join(dir, ".devcontainer", "devcontainer.json"))
	if c, err := Load(dir, Options{}); err == nil && c != nil && c.Image == "from-the-host" {
		t.Error("read a host file through a symlink")
	}
	other := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(other, ".devcontainer.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := Load(other, Options{}); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a FIFO loaded as a config")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("a FIFO as .devcontainer.json hangs")
	}
}

func TestPortSpecs(t *testing.T) {
	cases := []struct {
		json, want, notes string
	}{
		{`{"forwardPorts": [3000, "localhost:5432"]}`, "3000:3000 5432:5432", ""},
		{`{"forwardPorts": ["db:5432"], "appPort": 8080}`, "8080:8080", "another container"},
		{`{"appPort": ["8000:80", 9000]}`, "8000:80 9000:9000", ""},
		{`{"appPort": "127.0.0.1:8000:80"}`, "127.0.0.1:8000:80", ""},
	}
	for _, tc := range cases {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, ".devcontainer.json"), []byte(tc.json), 0o644)
		c, err := Load(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		specs, notes, err := c.PortSpecs()
		if err != nil || strings.Join(specs, " ") != tc.want || !strings.Contains(strings.Join(notes, " "), tc.notes) {
			t.Errorf("%s: PortSpecs = %q %q %v, want %q", tc.json, specs, notes, err, tc.want)
		}
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, ".devcontainer.json"), []byte(`{"forwardPorts": [{"port": 1}]}`), 0o644)
	if c, _ := Load(dir, Options{}); c != nil {
		if _, _, err := c.PortSpecs(); err == nil {
			t.Error("forwardPorts with an object: want an error")
		}
	}
}

// TestRuntime: runArgs map to what cove has (the short forms too), the
// rest is named, --privileged and capability ALL are refused; the
// metadata's capabilities count only in a trusted file.
func TestRuntime(t *testing.T) {
	dir, home := t.TempDir(), t.TempDir()
	body := `{"image": "x", "capAdd": ["SYS_PTRACE"], "securityOpt": ["seccomp=unconfined", "label=disable"],
		"runArgs": ["--cap-add", "NET_ADMIN,SYS_NICE", "--cap-drop=CHOWN", "-eA=1", "--env", "B=2", "-e", "HOST_ONLY", "-m512m", "--cpus", "1.5",
			"--pids-limit=100", "--network=bridge", "--hostname", "box", "-v", "cache:/cache", "--mount", "type=tmpfs,target=/t,tmpfs-size=64m", "--mount=type=nfs,target=/n", "--tmpfs", "/run/x:size=1m",
			"--init", "--add-host", "h:1.2.3.4", "--add-host=bad host:1.2.3.4", "--add-host", "v6=[::1]", "--security-opt", "no-new-privileges", "--device=/dev/fuse",
			"--shm-size", "1g", "--ulimit=nofile=10", "--env-file", "a.env", "--userns", "keep-id", "--userns=host"]}`
	write(t, dir, ".devcontainer.json", body)
	if _, _, err := Trust(dir, Options{Home: home}); err != nil {
		t.Fatal(err)
	}
	c, err := Load(dir, Options{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	if c, err = c.MergeMetadata(`[{"capAdd": ["BPF"], "entrypoint": "/ep.sh"}]`); err != nil {
		t.Fatal(err)
	}
	rt, err := c.Runtime()
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("%v %v %v %v %v %s %s %s %s %s %v %v %v %s %v %v %v", rt.CapAdd, rt.CapDrop, rt.NoNewPrivileges, rt.NoSeccomp, rt.Env, rt.Memory, rt.CPUs, rt.PIDs,
		rt.Net, rt.Hostname, rt.Mounts, rt.Entrypoints, rt.ExtraHosts, rt.ShmSize, rt.Ulimits, rt.EnvFiles, rt.Tmpfs)
	want := "[BPF SYS_PTRACE NET_ADMIN SYS_NICE] [CHOWN] true true [A=1 B=2] 512m 1.5 100 private box [{volume cache /cache false []} {tmpfs  /t false [tmpfs-size=64m]}] [/ep.sh] [[h 1.2.3.4] [v6 ::1]] 1g [nofile=10] [a.env] [/run/x:size=1m]"
	if got != want {
		t.Errorf("runtime\n%s\nwant\n%s", got, want)
	}
	// --device is taken now (the workspace binds the node, or says it is
	// missing), no longer named as unsupported.
	if strings.Join(rt.Devices, " ") != "/dev/fuse" || strings.Contains(strings.Join(c.Notes, "\n"), "--device") {
		t.Errorf("devices %q, notes %q", rt.Devices, c.Notes)
	}
	notes := strings.Join(c.Notes, "\n")
	for _, n := range []string{"runArgs -e HOST_ONLY: a variable taken from the host", "--mount type=nfs,target=/n: mount type \"nfs\"", "runArgs --add-host bad host:1.2.3.4: not NAME:IP", "runArgs --userns host is not supported",
		"securityOpt label=disable"} {
		if !strings.Contains(notes, n) {
			t.Errorf("notes lack %q:\n%s", n, notes)
		}
	}
	for _, bad := range []string{`{"image": "x", "runArgs": ["--privileged"]}`, `{"image": "x", "capAdd": ["ALL"]}`} {
		write(t, dir, ".devcontainer.json", bad)
		Trust(dir, Options{Home: home})
		if _, err := Load(dir, Options{Home: home}); err == nil || !strings.Contains(err.Error(), "privileged") {
			t.Errorf("%s: %v", bad, err)
		}
	}
	// Untrusted: the image's capabilities are held back, and said.
	write(t, dir, ".devcontainer.json", `{"image": "x"}`)
	c, _ = Load(dir, Options{Home: home})
	if c, err = c.MergeMetadata(`[{"capAdd": ["BPF"]}]`); err != nil {
		t.Fatal(err)
	}
	if rt, _ := c.Runtime(); len(rt.CapAdd) != 0 || !strings.Contains(strings.Join(c.Notes, "\n"), "asks for capAdd BPF: not applied") {
		t.Errorf("untrusted metadata: %v %q", rt.CapAdd, c.Notes)
	}
}

// TestMetadataVariables: the metadata's ${devcontainerId} and
// ${containerWorkspaceFolder} are resolved (a Feature's volume name), its
// ${localEnv:…} never, even in a trusted file: the image and Features
// are not what the user trusted.
func TestMetadataVariables(t *testing.T) {
	dir, home := t.TempDir(), t.TempDir()
	write(t, dir, ".devcontainer.json", `{"image": "x", "workspaceFolder": "/w"}`)
	Trust(dir, Options{Home: home})
	c, err := Load(dir, Options{Home: home, Getenv: func(string) string { return "s3cr3t" }})
	if err != nil || !c.Trusted {
		t.Fatal(c, err)
	}
	if c, err = c.MergeMetadata(`[{"mounts": [{"source": "dind-${devcontainerId}", "target": "/var/lib/docker", "type": "volume"}],
		"containerEnv": {"K": "${localEnv:SECRET:none}", "F": "${containerWorkspaceFolder}"}}]`); err != nil {
		t.Fatal(err)
	}
	if len(c.Mounts) != 1 || c.Mounts[0].Source != "dind-"+c.vars.id {
		t.Errorf("mounts: %+v", c.Mounts)
	}
	if set, _ := c.Env(nil); strings.Join(set, " ") != "F=/w K=none" {
		t.Errorf("env: %q", set)
	}
	if !strings.Contains(strings.Join(c.Notes, "\n"), "reads the host's environment (SECRET in devcontainer.metadata[0].containerEnv.K)") {
		t.Errorf("notes: %q", c.Notes)
	}
}

// TestKubeChoice: customizations.cove.kube is true or {context,
// namespace}; anything else is an error that names the key.
func TestKubeChoice(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		json string
		want *KubeChoice
		err  string
	}{
		{`{"image": "x"}`, nil, ""},
		{`{"customizations": {"cove": {"kube": true}}}`, &KubeChoice{}, ""},
		{`{"customizations": {"cove": {"kube": {"context": "gpu", "namespace": "dev"}}}}`, &KubeChoice{Context: "gpu", Namespace: "dev"}, ""},
		{`{"customizations": {"cove": {"kube": false}, "vscode": {}}}`, nil, ""},
		{`{"customizations": {"cove": {"kube": "gpu"}}}`, nil, `customizations.cove.kube: "gpu": write true, or`},
	} {
		c, err := Parse(dir, filepath.Join(dir, ".devcontainer.json"), []byte(tc.json), Options{})
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want %q", tc.json, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.json, err)
		}
		got, err := c.Kube()
		if err != nil || (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
			t.Errorf("%s: %+v %v, want %+v", tc.json, got, err, tc.want)
		}
	}
}

// TestTemplateSource: a Dev Container Template's source (its
// ${templateOption:…} holes in the image or a Feature's options) is
// refused before anything starts, naming the key and what to do, not
// pulled as "…:${templateOption:imageVariant}"; another variable no part
// of the spec resolves, where cove applies it, is named; VS Code's own in
// customizations are not cove's business.
func TestTemplateSource(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, ".devcontainer", "devcontainer.json")
	for body, want := range map[string]string{
		`{"image": "mcr.microsoft.com/devcontainers/go:2-${templateOption:imageVariant}"}`:                                          path + ": image: ${templateOption:imageVariant} is an option of a Dev Container Template",
		`{"image": "x", "features": {"ghcr.io/devcontainers/features/java:1": {"installMaven": "${templateOption:installMaven}"}}}`: path + ": features.ghcr.io/devcontainers/features/java:1.installMaven: ${templateOption:installMaven}",
	} {
		write(t, dir, ".devcontainer/devcontainer.json", body)
		_, err := Load(dir, Options{})
		if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "apply the template") {
			t.Errorf("%s: %v", body, err)
		}
	}
	write(t, dir, ".devcontainer/devcontainer.json", `{"image": "x", "postCreateCommand": "make ${target}",
		"customizations": {"vscode": {"settings": {"python.defaultInterpreterPath": "${workspaceFolder}/.venv"}}}}`)
	c, err := Load(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	notes := strings.Join(c.Notes, "\n")
	if !strings.Contains(notes, "postCreateCommand: ${target} is not a variable of devcontainer.json") || strings.Contains(notes, "${workspaceFolder}") {
		t.Errorf("notes: %s", notes)
	}
	// ${containerEnv:…} where cove cannot know it yet (a mount's source)
	// is named; in remoteEnv it is resolved, not named.
	write(t, dir, ".devcontainer/devcontainer.json", `{"image": "x", "mounts": ["source=${containerEnv:HOME}/cache,target=/c,type=volume"],
		"remoteEnv": {"PATH": "/x:${containerEnv:PATH}"}}`)
	if c, err = Load(dir, Options{}); err != nil {
		t.Fatal(err)
	}
	notes = strings.Join(c.Notes, "\n")
	if !strings.Contains(notes, "mounts: ${containerEnv:HOME} is resolved only in containerEnv, remoteEnv and the lifecycle commands") || strings.Contains(notes, "PATH}") {
		t.Errorf("notes: %s", notes)
	}
}

// TestTopLevelContext: the older files' "context" beside "dockerFile" is
// the build context (home-assistant's "..", with "../Dockerfile.dev"),
// not a key to ignore while the build runs in .devcontainer.
func TestTopLevelContext(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, ".devcontainer/devcontainer.json", `{"context": "..", "dockerFile": "../Dockerfile.dev"}`)
	c, err := Load(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.ImageBuild()
	if err != nil || b.Context != "." || b.Dockerfile != "Dockerfile.dev" || len(c.Notes) != 0 {
		t.Errorf("build %+v %v, notes %q", b, err, c.Notes)
	}
	// With a build section, its own context is the one: said.
	write(t, dir, ".devcontainer/devcontainer.json", `{"context": "..", "build": {"dockerfile": "Dockerfile"}}`)
	if c, err = Load(dir, Options{}); err != nil {
		t.Fatal(err)
	}
	if b, _ := c.ImageBuild(); b.Context != ".devcontainer" || !strings.Contains(strings.Join(c.Notes, "\n"), "context is the build context of the older dockerFile") {
		t.Errorf("build %+v, notes %q", b, c.Notes)
	}
}

// TestEditorKeysNoted: what the editor alone reads (ports' labels, the
// older top-level extensions and settings) is named, not dropped.
func TestEditorKeysNoted(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, ".devcontainer/devcontainer.json", `{"image": "x", "forwardPorts": [8000],
		"portsAttributes": {"8000": {"label": "web"}}, "otherPortsAttributes": {"onAutoForward": "silent"},
		"extensions": ["ms-python.python"], "settings": {"a": 1}}`)
	c, err := Load(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	notes := strings.Join(c.Notes, "\n")
	for _, k := range []string{"portsAttributes is not supported", "otherPortsAttributes is not supported", "extensions is not supported: it is VS Code's", "settings is not supported: it is VS Code's"} {
		if !strings.Contains(notes, k) {
			t.Errorf("notes lack %q: %s", k, notes)
		}
	}
}

// TestUntrustedRunArgsInside: an untrusted file keeps the runArgs whose
// effect stays inside the workspace (-e K=V, --init), as it keeps
// containerEnv; what reaches outside waits for trust, and only that is
// named as held back (not --init, which reaches nothing).
func TestUntrustedRunArgsInside(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, ".devcontainer/devcontainer.json", `{"image": "x", "runArgs": ["--init", "-e", "GIT_EDITOR=code --wait",
		"--cap-add=SYS_PTRACE", "--security-opt", "seccomp=unconfined", "-e", "HOST_VAR", "-v", "/etc:/host-etc", "--hostname", "box"]}`)
	c, err := Load(dir, Options{Home: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.RunArgs, " "); got != "--init -e GIT_EDITOR=code --wait --hostname box" {
		t.Errorf("kept %q", got)
	}
	if u := strings.Join(c.Untrusted, "\n"); u != "runArgs --cap-add=SYS_PTRACE --security-opt seccomp=unconfined -e HOST_VAR -v /etc:/host-etc" {
		t.Errorf("held back %q", u)
	}
	rt, err := c.Runtime()
	if err != nil || strings.Join(rt.Env, " ") != "GIT_EDITOR=code --wait" || rt.Hostname != "box" || len(rt.CapAdd) > 0 || rt.NoSeccomp || len(rt.Mounts) > 0 {
		t.Errorf("runtime %+v %v", rt, err)
	}
	// Nothing outside: nothing held back, nothing to trust.
	write(t, dir, ".devcontainer/devcontainer.json", `{"image": "x", "runArgs": ["--init"]}`)
	if c, err = Load(dir, Options{Home: t.TempDir()}); err != nil || c.UntrustedNote() != "" || len(c.RunArgs) != 1 {
		t.Errorf("--init alone: %v %q %q", err, c.UntrustedNote(), c.RunArgs)
	}
}

// TestPrivilegedMetadataSaysWhatToDo: an image (or a Feature) whose
// devcontainer.metadata asks for a privileged workspace is refused with
// what to do about it, not only why.
func TestPrivilegedMetadataSaysWhatToDo(t *testing.T) {
	for label, want := range map[string]string{
		`[{"privileged": true}]`:                           "use an image that does not ask for it",
		`[{"id": "ghcr.io/x/dind:2", "privileged": true}]`: "the Feature ghcr.io/x/dind:2 asks for a privileged workspace",
	} {
		_, err := (&Config{vars: newVars("", "", false, nil)}).MergeMetadata(label)
		if err == nil || !strings.Contains(err.Error(), want) || !doWords.MatchString(err.Error()) {
			t.Errorf("%s: %v", label, err)
		}
	}
}

// TestMalformedValuesNameTheKey: a value not of the spec's form is
// refused as it is read, naming the file, the key, what it is and what
// the key takes, never as the decoder's "cannot unmarshal … Config.runArgs
// of type []string"; a workspaceMount cove cannot mount stops there too,
// not as the workspace starts.
func TestMalformedValuesNameTheKey(t *testing.T) {
	for body, want := range map[string]string{
		`{"image": "x", "runArgs": "--init"}`:                                     "runArgs: a string, where it takes an array of strings",
		`{"image": "x", "remoteUser": 1000}`:                                      "remoteUser: a number, where it takes a string",
		`{"image": "x", "init": "true"}`:                                          "init: a string, where it takes true or false",
		`{"image": "x", "features": []}`:                                          "features: an array, where it takes an object",
		`{"image": "x", "build": {"dockerfile": 1}}`:                              "build.dockerfile: a number, where it takes a string",
		`{"image": "x", "mounts": ["source=a,target=b"]}`:                         `mounts: mount target "b": want an absolute path`,
		`{"image": "x", "containerEnv": ["A=1"]}`:                                 "containerEnv: want an object of names to values",
		`{"image": "x", "postCreateCommand": 42}`:                                 "postCreateCommand: want a string, an array of strings or an object",
		`{"image": "x", "workspaceMount": "type=tmpfs,target=/ws"}`:               `workspaceMount "type=tmpfs,target=/ws": a tmpfs would put an empty directory in memory`,
		`{"image": "x", "customizations": {"cove": {"kube": "gpu"}}}`:             `customizations.cove.kube: "gpu": write true`,
		`{"image": "x", "workspaceMount": "source=.,target=/ws,type=bind"}`:       `bind mount source "."`,
		`{"image": "x", "postCreateCommand": {"a": {"nested": "no"}}}`:            "postCreateCommand: a: want a string or an array of strings",
		`{"image": "x", "forwardPorts": "3000", "portsAttributes": {"3000": {}}}`: "forwardPorts: a string, where it takes an array",
	} {
		dir := t.TempDir()
		write(t, dir, ".devcontainer/devcontainer.json", body)
		path := filepath.Join(dir, ".devcontainer", "devcontainer.json")
		_, err := Load(dir, Options{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", body, err, want)
			continue
		}
		var tree map[string]any
		if jerr := json.Unmarshal([]byte(body), &tree); jerr != nil {
			t.Fatal(jerr)
		}
		if _, problems := refusal(err, path, tree); len(problems) > 0 {
			t.Errorf("%s: %v", body, problems)
		}
	}
	// A file that is not JSON says where, and to fix it there.
	dir := t.TempDir()
	write(t, dir, ".devcontainer/devcontainer.json", `{"image": "x" "name": "y"}`)
	if _, err := Load(dir, Options{}); err == nil || !strings.Contains(err.Error(), "line 1, column 15") || !strings.Contains(err.Error(), "fix the file there") {
		t.Errorf("syntax: %v", err)
	}
}

// TestTrustShowsPathsAsBound: what cove up --trust shows is what is bound:
// a mount of ${localEnv:HOME}/.gitconfig is shown as the user's file
// (/home/u/.gitconfig), never as /.gitconfig (the untrusted read, with the
// variable empty, which is not what the start binds); the variables read
// are named, their values (maybe secrets) not shown.
func TestTrustShowsPathsAsBound(t *testing.T) {
	dir, home := t.TempDir(), t.TempDir()
	write(t, dir, ".devcontainer.json", `{"image": "x", "containerEnv": {"T": "${localEnv:TOKEN}"},
		"mounts": ["source=${localEnv:HOME}/.gitconfig,target=/root/.gitconfig,type=bind,readonly"],
		"workspaceMount": "source=${localEnv:HOME}/src/p,target=/workspaces/p,type=bind"}`)
	getenv := func(k string) string { return map[string]string{"HOME": "/home/u", "TOKEN": "tok-secret"}[k] }
	opts := Options{Home: home, Getenv: getenv}
	_, grants, err := Trust(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	g := strings.Join(grants, "\n")
	if !strings.Contains(g, "mounts: the host path /home/u/.gitconfig") || !strings.Contains(g, "workspaceMount: the host path /home/u/src/p") {
		t.Errorf("trust does not show the host paths as they are bound:\n%s", g)
	}
	if strings.Contains(g, "path /.gitconfig") || strings.Contains(g, "tok-secret") {
		t.Errorf("trust shows a path not bound, or a variable's value:\n%s", g)
	}
	if !strings.Contains(g, "TOKEN in containerEnv.T") {
		t.Errorf("trust does not name the host variables it reads:\n%s", g)
	}
	c, err := Load(dir, opts)
	if err != nil || !c.Trusted || len(c.Mounts) != 1 || c.Mounts[0].Source != "/home/u/.gitconfig" {
		t.Fatalf("the trusted file binds something else than shown: %v %+v", err, c)
	}
}
