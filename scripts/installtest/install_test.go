// Package installtest runs the curl-pipe installer end to end: a release
// built by scripts/release.sh, served over loopback HTTP, installed by
// install.sh under dash, bash and busybox sh, as root and as a user.
package installtest

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

const version = "1.2.3"

var dist string // the release, built once

func TestMain(m *testing.M) {
	tmp, err := os.MkdirTemp("", "cove-release-")
	if err != nil {
		panic(err)
	}
	os.Chmod(tmp, 0o755)
	dist = filepath.Join(tmp, "dist")
	cmd := exec.Command("../release.sh", version)
	cmd.Env = append(os.Environ(), "DIST="+dist)
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "release.sh: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(tmp)
	os.Exit(code)
}

// TestReleaseIsReproducible builds the release again and compares bytes.
func TestReleaseIsReproducible(t *testing.T) {
	again := filepath.Join(t.TempDir(), "dist")
	cmd := exec.Command("../release.sh", version)
	cmd.Env = append(os.Environ(), "DIST="+again)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("release.sh: %v\n%s", err, out)
	}
	a, _ := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
	b, _ := os.ReadFile(filepath.Join(again, "SHA256SUMS"))
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Fatalf("two builds differ:\n%s\n%s", a, b)
	}
	for _, arch := range []string{"amd64", "arm64"} {
		name := fmt.Sprintf("cove-%s-linux-%s.tar.gz", version, arch)
		if !strings.Contains(string(a), "  "+name+"\n") {
			t.Errorf("SHA256SUMS lacks %s:\n%s", name, a)
		}
	}
}

// server serves the release, and broken copies of it under prefixes.
func server(t *testing.T) string {
	t.Helper()
	files := http.FileServer(http.Dir(dist))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		prefix, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		archive := strings.HasSuffix(rest, ".tar.gz")
		switch {
		case prefix == "ok":
		case prefix == "tampered" && archive:
			b, _ := os.ReadFile(filepath.Join(dist, rest))
			b[len(b)/2] ^= 1
			w.Write(b)
			return
		case prefix == "badsums" && rest == "SHA256SUMS":
			b, _ := os.ReadFile(filepath.Join(dist, rest))
			if b[0] == '0' { // another hex digit: the amd64 line's hash is wrong
				b[0] = '1'
			} else {
				b[0] = '0'
			}
			w.Write(b)
			return
		case prefix == "nosums" && rest == "SHA256SUMS":
			http.NotFound(w, r)
			return
		case prefix == "cut" && archive:
			b, _ := os.ReadFile(filepath.Join(dist, rest))
			w.Header().Set("Content-Length", strconv.Itoa(len(b)))
			w.Write(b[:len(b)/2])
			if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
				c.Close()
			}
			return
		case prefix == "tampered" || prefix == "nosums" || prefix == "cut" || prefix == "badsums":
		default:
			http.NotFound(w, r)
			return
		}
		r.URL.Path = "/" + rest
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// install runs `curl -fsSL URL/install.sh | sh` with shell as sh.
func install(t *testing.T, shell []string, base, dir string, cred *syscall.Credential, extra ...string) (string, error) {
	t.Helper()
	script := fmt.Sprintf(`curl -fsSL %s/ok/install.sh | COVE_DOWNLOAD_URL=%s/ok %s %s %s`,
		base, base, dirEnv(dir), strings.Join(shell, " "), strings.Join(append([]string{"-s", "--"}, extra...), " "))
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + homeOf(cred)}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func dirEnv(dir string) string {
	if dir == "" {
		return ""
	}
	return "COVE_INSTALL_DIR=" + dir
}

func homeOf(cred *syscall.Credential) string {
	if cred == nil {
		return "/root"
	}
	u, err := user.LookupId(strconv.Itoa(int(cred.Uid)))
	if err != nil {
		return "/nonexistent"
	}
	return u.HomeDir
}

func coveVersion(t *testing.T, bin string) string {
	t.Helper()
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("%s version: %v", bin, err)
	}
	return strings.SplitN(string(out), "\n", 2)[0]
}

var shells = map[string][]string{
	"dash":       {"dash"},
	"bash":       {"bash"},
	"busybox sh": {"busybox", "sh"},
}

func TestInstallUnderEachShell(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (it also installs as the covetest user)")
	}
	base := server(t)
	for name, sh := range shells {
		t.Run(name, func(t *testing.T) {
			if _, err := exec.LookPath(sh[0]); err != nil {
				t.Skipf("%s not installed", sh[0])
			}
			dir := filepath.Join(t.TempDir(), "bin")
			out, err := install(t, sh, base, dir, nil)
			if err != nil {
				t.Fatalf("install: %v\n%s", err, out)
			}
			if v := coveVersion(t, filepath.Join(dir, "cove")); v != "cove "+version {
				t.Fatalf("installed %q\n%s", v, out)
			}
			if !strings.Contains(out, "is not on your PATH") {
				t.Errorf("no PATH hint for %s:\n%s", dir, out)
			}
			// Twice is fine.
			if out, err := install(t, sh, base, dir, nil); err != nil {
				t.Fatalf("second install: %v\n%s", err, out)
			}
		})
	}
}

func TestInstallAsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run as covetest")
	}
	u, err := user.Lookup("covetest")
	if err != nil {
		t.Skip("no covetest user")
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	target := filepath.Join(u.HomeDir, ".local", "bin", "cove")
	os.Remove(target)
	t.Cleanup(func() { os.Remove(target) })
	out, err := install(t, []string{"dash"}, server(t), "", &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)})
	if err != nil {
		t.Fatalf("install as covetest: %v\n%s", err, out)
	}
	fi, err := os.Stat(target)
	if err != nil {
		t.Fatalf("not in ~/.local/bin: %v\n%s", err, out)
	}
	if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != uid {
		t.Errorf("installed as uid %d, want %d", st.Uid, uid)
	}
	if v := coveVersion(t, target); v != "cove "+version {
		t.Fatalf("installed %q", v)
	}
}

// TestInstallFailsClosed: a tampered archive, a missing SHA256SUMS and a
// download cut off half-way each abort with a clear message and leave the
// cove installed before untouched.
func TestInstallFailsClosed(t *testing.T) {
	base := server(t)
	dir := filepath.Join(t.TempDir(), "bin")
	if out, err := install(t, []string{"dash"}, base, dir, nil); err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	bin := filepath.Join(dir, "cove")
	before := sum(t, bin)
	cases := map[string]string{
		"tampered": "does not match SHA256SUMS",
		"badsums":  "does not match SHA256SUMS",
		"nosums":   "cannot download",
		"cut":      "cut off or missing",
	}
	for prefix, want := range cases {
		script := fmt.Sprintf(`curl -fsSL %s/ok/install.sh | COVE_DOWNLOAD_URL=%s/%s COVE_INSTALL_DIR=%s dash`, base, base, prefix, dir)
		out, err := exec.Command("/bin/sh", "-c", script).CombinedOutput()
		if err == nil {
			t.Errorf("%s: the install succeeded:\n%s", prefix, out)
		}
		if !strings.Contains(string(out), want) {
			t.Errorf("%s: output does not say %q:\n%s", prefix, want, out)
		}
		if sum(t, bin) != before {
			t.Fatalf("%s: the installed cove changed", prefix)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("the install dir holds %d entries after the failures, want just cove", len(entries))
	}
}

func TestInstallDryRunChangesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bin")
	out, err := install(t, []string{"dash"}, server(t), dir, nil, "--dry-run")
	if err != nil || !strings.Contains(out, "would download") {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the dry run made %s", dir)
	}
}

// TestUpgradeWhileRunning replaces a cove that is running: the install
// succeeds and the running one goes on.
func TestUpgradeWhileRunning(t *testing.T) {
	base := server(t)
	dir := filepath.Join(t.TempDir(), "bin")
	if out, err := install(t, []string{"bash"}, base, dir, nil); err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	// A long-running cove: it holds until its stdin closes.
	running := exec.Command(filepath.Join(dir, "cove"), "init", "--hold-userns")
	stdin, _ := running.StdinPipe()
	if err := running.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); running.Wait() }()
	if out, err := install(t, []string{"bash"}, base, dir, nil); err != nil {
		t.Fatalf("upgrade while running: %v\n%s", err, out)
	}
	if err := running.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatal("the running cove died")
	}
	if v := coveVersion(t, filepath.Join(dir, "cove")); v != "cove "+version {
		t.Fatalf("installed %q", v)
	}
}

func sum(t *testing.T, path string) string {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	io.Copy(h, f)
	return fmt.Sprintf("%x", h.Sum(nil))
}

// TestInstallHelpAndVersionWithURL: --help through the pipe prints the
// usage (it printed nothing: it read "$0", which is the shell), and
// COVE_VERSION with COVE_DOWNLOAD_URL is an error that says why, not
// silently the files at the URL.
func TestInstallHelpAndVersionWithURL(t *testing.T) {
	base := server(t)
	out, err := install(t, []string{"dash"}, base, "", nil, "--help")
	if err != nil || !strings.Contains(out, "COVE_VERSION") || !strings.Contains(out, "--dry-run") {
		t.Errorf("--help: %v\n%s", err, out)
	}
	dir := filepath.Join(t.TempDir(), "bin")
	script := fmt.Sprintf(`curl -fsSL %s/ok/install.sh | COVE_VERSION=0.0.1 COVE_DOWNLOAD_URL=%s/ok COVE_INSTALL_DIR=%s sh`, base, base, dir)
	b, err := exec.Command("/bin/sh", "-c", script).CombinedOutput()
	if err == nil || !strings.Contains(string(b), "COVE_VERSION=0.0.1 and COVE_DOWNLOAD_URL together") {
		t.Errorf("COVE_VERSION with COVE_DOWNLOAD_URL: %v\n%s", err, b)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("%s was made", dir)
	}
}

// TestInstallWritesAppArmorProfile: as root, on a host whose AppArmor
// refuses unprivileged user namespaces (Ubuntu 24.04; a directory stands
// in for / here), the installer writes the profile that lets the installed
// cove use them, the same as cove doctor --apparmor-profile prints; where
// the restriction is off, it writes none.
func TestInstallWritesAppArmorProfile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the installer writes the profile only as root")
	}
	base := server(t)
	for _, sysctl := range []string{"1", "0"} {
		sysroot := t.TempDir()
		p := filepath.Join(sysroot, "proc/sys/kernel/apparmor_restrict_unprivileged_userns")
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(sysctl+"\n"), 0o644)
		dir := filepath.Join(t.TempDir(), "bin")
		script := fmt.Sprintf(`curl -fsSL %s/ok/install.sh | COVE_DOWNLOAD_URL=%s/ok COVE_INSTALL_DIR=%s COVE_TEST_SYSROOT=%s dash`, base, base, dir, sysroot)
		cmd := exec.Command("/bin/sh", "-c", script)
		cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/root"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("install: %v\n%s", err, out)
		}
		profile, err := os.ReadFile(filepath.Join(sysroot, "etc/apparmor.d/cove"))
		if sysctl == "0" {
			if err == nil {
				t.Errorf("with the restriction off, the installer wrote a profile:\n%s", profile)
			}
			continue
		}
		if err != nil {
			t.Fatalf("no profile written: %v\n%s", err, out)
		}
		want, err := exec.Command(filepath.Join(dir, "cove"), "doctor", "--apparmor-profile").Output()
		if err != nil {
			t.Fatal(err)
		}
		if string(profile) != string(want) {
			t.Errorf("install.sh's profile:\n%s\ncove doctor --apparmor-profile:\n%s", profile, want)
		}
		if !strings.Contains(string(profile), "profile cove "+filepath.Join(dir, "cove")+" flags=(unconfined)") {
			t.Errorf("the profile does not name %s:\n%s", filepath.Join(dir, "cove"), profile)
		}
		if !strings.Contains(string(out), "ok: user namespaces (AppArmor restricts them") {
			t.Errorf("the installer does not say the profile lifts the restriction:\n%s", out)
		}
	}
}
