package workspace

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cove-sh/cove/container"
	"github.com/cove-sh/cove/devcontainer"
)

// TestRootlessStartExplainsAppArmor: a rootless start refused with EPERM on
// a host whose AppArmor restricts user namespaces is told so; the same
// error elsewhere, or another error, is left as it is.
func TestRootlessStartExplainsAppArmor(t *testing.T) {
	proc := func(sysctl string) string {
		root := t.TempDir()
		p := filepath.Join(root, "sys/kernel/apparmor_restrict_unprivileged_userns")
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(sysctl+"\n"), 0o644)
		return root
	}
	eperm := fmt.Errorf("start the container: %w", syscall.EPERM)
	fromInit := errors.New("mount /proc: operation not permitted")
	other := errors.New("no such image")
	for _, tc := range []struct {
		err    error
		sysctl string
		want   bool
	}{
		{eperm, "1", true}, {fromInit, "1", true}, {other, "1", false}, {eperm, "0", false},
	} {
		if got := deniedByAppArmor(tc.err, proc(tc.sysctl)); got != tc.want {
			t.Errorf("%v with the sysctl at %s: %v, want %v", tc.err, tc.sysctl, got, tc.want)
		}
	}
}

// TestBoundaryLayerAccountsReadConfined: the workspace's kept layer is
// its to write; the accounts the launcher reads from it (for
// remoteUser) are read confined to it: a symlink to a host file is not
// followed, and a FIFO does not hang the launcher.
func TestBoundaryLayerAccountsReadConfined(t *testing.T) {
	layer, host := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(host, "shadow"), []byte("root:HOST-SECRET:19000:0:99999:7:::\n"), 0o600)
	os.MkdirAll(filepath.Join(layer, "etc"), 0o755)
	os.Symlink(filepath.Join(host, "shadow"), filepath.Join(layer, "etc", "passwd"))
	if err := syscall.Mkfifo(filepath.Join(layer, "etc", "group"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var passwd string
	go func() {
		var err error
		passwd, _, err = copyAccounts(layer, t.TempDir())
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			b, _ := os.ReadFile(passwd)
			t.Errorf("read through the layer's symlink: %q", b)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("a FIFO in the layer hangs the launcher")
	}
	os.Remove(filepath.Join(layer, "etc", "passwd"))
	os.WriteFile(filepath.Join(layer, "etc", "passwd"), []byte("vscode:x:1234:1234::/home/vscode:/bin/sh\n"), 0o644)
	os.Remove(filepath.Join(layer, "etc", "group"))
	p, g, err := copyAccounts(layer, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if u, err := container.LookupUser("vscode", p, g); err != nil || u.UID != 1234 || u.Home != "/home/vscode" {
		t.Errorf("the layer's own account: %+v %v", u, err)
	}
}

// TestEnvScript: a Pod's EnvFile sets containerEnv and remoteEnv resolved
// against the image's environment, quoted for sh, and unsets remoteEnv's
// nulls.
func TestEnvScript(t *testing.T) {
	dir := t.TempDir()
	dc, err := devcontainer.Parse(dir, filepath.Join(dir, ".devcontainer.json"), []byte(`{
		"containerEnv": {"TOOLPATH": "/opt/tool:${containerEnv:PATH}", "QUOTED": "it's $HOME"},
		"remoteEnv": {"HOSTNAME": null}
	}`), devcontainer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	base, script := envScript(dc, "PATH=/usr/bin:/bin\nHOSTNAME=pod\nbad name=x\n")
	if len(base) != 2 {
		t.Errorf("base %q", base)
	}
	out, err := exec.Command("/bin/sh", "-c", script+`echo "$TOOLPATH|$QUOTED|${HOSTNAME-unset}"`).Output()
	if err != nil || string(out) != "/opt/tool:/usr/bin:/bin|it's $HOME|unset\n" {
		t.Errorf("the script %q gives %q (%v)", script, out, err)
	}
}

// TestRootlessKeepIDChoice: a rootless workspace's non-root user is mapped
// to (keep-id) when subordinate ids exist, with its cost said; without
// them, or with updateRemoteUserUID false, it is not, and the note says
// the user cannot write the project (and, without ids, how to have them).
func TestRootlessKeepIDChoice(t *testing.T) {
	u := container.User{UID: 1000, GID: 1001}
	var notes []string
	note := func(n string) { notes = append(notes, n) }
	if k := rootlessKeepID("vscode", u, "proj-abc123", true, true, false, note); k == nil || *k != (container.KeepID{UID: 1000, GID: 1001}) ||
		len(notes) != 1 || !strings.Contains(notes[0], "sudo give nothing; for root, cove exec -u root proj-abc123") {
		t.Errorf("with subordinate ids, an image stored without owners: %+v, %q", k, notes)
	}
	notes = nil
	if k := rootlessKeepID("vscode", u, "proj-abc123", true, true, true, note); k == nil || *k != (container.KeepID{UID: 1000, GID: 1001}) ||
		len(notes) != 1 || strings.Contains(notes[0], "sudo") || !strings.Contains(notes[0], "for root, cove exec -u root proj-abc123") {
		t.Errorf("with subordinate ids, an image with its owners: %+v, %q", k, notes)
	}
	notes = nil
	if k := rootlessKeepID("vscode", u, "proj-abc123", true, false, false, note); k != nil || len(notes) != 1 ||
		!strings.Contains(notes[0], "the workspace's user vscode (uid 1000) cannot write the project") ||
		!strings.Contains(notes[0], "/etc/subuid") || !strings.Contains(notes[0], "or run cove as root") {
		t.Errorf("without subordinate ids: %+v, %q", k, notes)
	}
	notes = nil
	if k := rootlessKeepID("vscode", u, "proj-abc123", false, true, true, note); k != nil || len(notes) != 1 ||
		!strings.Contains(notes[0], "updateRemoteUserUID is false") {
		t.Errorf("updateRemoteUserUID false: %+v, %q", k, notes)
	}
}

// TestCommandOutputIsAttributed: a line of a command's output that starts
// as cove's own do is marked as the workspace's, however the writes cut
// it; other lines pass as they are, control characters shown.
func TestCommandOutputIsAttributed(t *testing.T) {
	var b strings.Builder
	w := commandOutput(&b)
	for _, p := range []string{"cove: note: forged\nok line\ncov", "e: warning: split\n", "x cove: fine\nco", "at\n\x1b[1mbold\n"} {
		w.Write([]byte(p))
	}
	want := "(workspace) cove: note: forged\nok line\n(workspace) cove: warning: split\nx cove: fine\ncoat\n␛[1mbold\n"
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

// TestBinaryAskedAtEachStart: a Local with Init and Inside asks them for
// the programs at each start (each written out again if it went
// meanwhile): the init is cove-init, else cove-inside, else Binary; what
// is bound at /.cove/cove is cove-inside, else Binary.
func TestBinaryAskedAtEachStart(t *testing.T) {
	initCalls, insideCalls := 0, 0
	lo := &Local{Binary: "/usr/local/bin/cove", Init: func() (string, error) {
		initCalls++
		if initCalls == 2 {
			return "", errors.New("no room")
		}
		return fmt.Sprintf("/var/lib/cove/bin/cove-init-%d", initCalls), nil
	}, Inside: func() (string, error) {
		insideCalls++
		if insideCalls >= 2 {
			return "", errors.New("no room")
		}
		return fmt.Sprintf("/var/lib/cove/bin/cove-inside-%d", insideCalls), nil
	}}
	for i, want := range []string{"/var/lib/cove/bin/cove-init-1", "/var/lib/cove/bin/cove-inside-1", "/var/lib/cove/bin/cove-init-3", "/usr/local/bin/cove"} {
		if i == 3 {
			lo.Init = nil
		}
		if got, err := lo.binary(); err != nil || got != want {
			t.Errorf("start %d: init %q %v, want %q", i+1, got, err, want)
		}
	}
	if got, err := lo.tools(); err != nil || got != "/usr/local/bin/cove" {
		t.Errorf("tools with no cove-inside to be had: %q %v, want cove", got, err)
	}
	if _, err := (&Local{}).binary(); err == nil {
		t.Error("no binary at all: no error")
	}
}
