package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDoctorPrintsAppArmorProfile: cove doctor --apparmor-profile prints a
// profile for this binary that allows user namespaces.
func TestDoctorPrintsAppArmorProfile(t *testing.T) {
	t.Parallel()
	r := cove(t, t.TempDir(), "doctor", "--apparmor-profile")
	exe, _ := os.Executable()
	exe, _ = filepath.EvalSymlinks(exe)
	if r.code != 0 || !strings.Contains(r.stdout, "profile cove "+exe+" flags=(unconfined) {") || !strings.Contains(r.stdout, "userns,") {
		t.Fatalf("doctor --apparmor-profile: %+v", r)
	}
}
