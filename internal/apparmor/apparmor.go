// Package apparmor tells whether AppArmor keeps cove from unprivileged user
// namespaces (Ubuntu 23.10 and later: kernel.apparmor_restrict_unprivileged_userns=1)
// and what lifts it: a profile for cove's binary that allows them, as
// Ubuntu ships for podman, buildah and Chromium, or the sysctl.
package apparmor

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ProfileName is the name of the profile Profile writes.
const ProfileName = "cove"

// ProfileFile is where install.sh (as root) puts the profile.
const ProfileFile = "/etc/apparmor.d/cove"

// Restricted reports whether the process whose /proc is procRoot ("/proc"
// on a real host; a directory of files in tests) is refused unprivileged
// user namespaces by AppArmor: the sysctl is on and the process does not
// run under cove's own profile (which allows them).
func Restricted(procRoot string) bool {
	if readTrim(filepath.Join(procRoot, "sys/kernel/apparmor_restrict_unprivileged_userns")) != "1" {
		return false
	}
	label := readTrim(filepath.Join(procRoot, "self/attr/apparmor/current"))
	if label == "" {
		label = readTrim(filepath.Join(procRoot, "self/attr/current")) // kernels before 5.8
	}
	return label != ProfileName && !strings.HasPrefix(label, ProfileName+" ")
}

// Profile is an AppArmor profile that lets the cove binary at path create
// user namespaces, and otherwise leaves it unconfined, as the profiles
// Ubuntu ships for other rootless tools do.
func Profile(path string) string {
	return fmt.Sprintf(`# cove: lets %[1]s create user namespaces, which
# kernel.apparmor_restrict_unprivileged_userns=1 refuses to unconfined
# programs. Written by cove's install.sh (or cove doctor --apparmor-profile).
abi <abi/4.0>,
include <tunables/global>

profile %[2]s %[1]s flags=(unconfined) {
  userns,

  include if exists <local/%[2]s>
}
`, path, ProfileName)
}

// Executable is the path of the running cove, as a profile names it
// (symlinks resolved): the launcher, which makes a container's user
// namespace (cove-inside, which then runs as its init, needs no profile).
func Executable() string {
	p, err := os.Executable()
	if err != nil {
		return "/usr/local/bin/cove"
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		p = r
	}
	return p
}

// Advice says what to do on a host where Restricted is true, for the cove
// binary at path.
func Advice(path string) string {
	return fmt.Sprintf("AppArmor refuses unprivileged user namespaces here (kernel.apparmor_restrict_unprivileged_userns=1): "+
		"give cove a profile that allows them: cove doctor --apparmor-profile | sudo tee %[1]s >/dev/null && sudo apparmor_parser -r %[1]s "+
		"(it names %[2]s: again if cove moves; install.sh as root does this), "+
		"or lift the restriction for every program: sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0; or run cove as root",
		ProfileFile, path)
}

func readTrim(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
