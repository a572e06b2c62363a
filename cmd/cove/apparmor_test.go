package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
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

// TestDoctorPrintsAppArmorProfile: cove doctor --apparmor-profile prints a
// profile for this binary that allows user namespaces.
func TestDoctorPrintsAppArmorProfile(t *testing.T) {
	r := cove(t, t.TempDir(), "doctor", "--apparmor-profile")
	exe, _ := os.Executable()
	exe, _ = filepath.EvalSymlinks(exe)
	if r.code != 0 || !strings.Contains(r.stdout, "profile cove "+exe+" flags=(unconfined) {") || !strings.Contains(r.stdout, "userns,") {
		t.Fatalf("doctor --apparmor-profile: %+v", r)
	}
}
