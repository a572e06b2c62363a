package apparmor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeProc writes the files Restricted reads into a directory standing in
// for /proc: the sysctl, and the process's AppArmor label ("" for none).
func fakeProc(t *testing.T, sysctl, label string) string {
	t.Helper()
	root := t.TempDir()
	write := func(rel, body string) {
		p := filepath.Join(root, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if sysctl != "" {
		write("sys/kernel/apparmor_restrict_unprivileged_userns", sysctl+"\n")
	}
	if label != "" {
		write("self/attr/apparmor/current", label+"\n")
	}
	return root
}

// TestRestricted: Ubuntu 24.04's setting is detected for an unconfined
// cove, and not where the sysctl is off or absent, or where cove runs
// under its own profile.
func TestRestricted(t *testing.T) {
	for _, tc := range []struct {
		name, sysctl, label string
		want                bool
	}{
		{"ubuntu 24.04, unconfined", "1", "unconfined", true},
		{"sysctl on, no label file", "1", "", true},
		{"under cove's profile", "1", "cove (unconfined)", false},
		{"under another profile", "1", "podman (unconfined)", true},
		{"sysctl off", "0", "unconfined", false},
		{"no AppArmor", "", "", false},
	} {
		if got := Restricted(fakeProc(t, tc.sysctl, tc.label)); got != tc.want {
			t.Errorf("%s: Restricted = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestProfileAndAdvice: the profile names the binary's path and allows
// user namespaces; the advice gives the command that installs it and the
// sysctl.
func TestProfileAndAdvice(t *testing.T) {
	p := Profile("/home/a/.local/bin/cove")
	for _, want := range []string{"abi <abi/4.0>,", "profile cove /home/a/.local/bin/cove flags=(unconfined) {", "  userns,"} {
		if !strings.Contains(p, want) {
			t.Errorf("profile lacks %q:\n%s", want, p)
		}
	}
	a := Advice("/usr/local/bin/cove")
	for _, want := range []string{"cove doctor --apparmor-profile | sudo tee /etc/apparmor.d/cove", "sudo apparmor_parser -r /etc/apparmor.d/cove",
		"/usr/local/bin/cove", "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"} {
		if !strings.Contains(a, want) {
			t.Errorf("advice lacks %q: %s", want, a)
		}
	}
}
