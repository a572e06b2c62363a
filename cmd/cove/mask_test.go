package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cove-sh/cove/internal/testregistry"
)

// TestRootlessRunMasksTheKernel runs containers as the covetest user (a
// user namespace) with the host's network and with none: what the kernel
// shows about the host (interrupt counts, firmware, timers, keys) is
// masked there too, /proc/sys and the other read-only paths are read-only
// mounts, no write reaches a host sysctl, and the hostname read through
// /proc/sys is the container's. Masking needs a /dev/null bind and tmpfs
// mounts made in the user namespace: the run starting at all shows they
// work there.
func TestRootlessRunMasksTheKernel(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	u, uid, gid := testUser(t)
	ref := testregistry.Push(t, addr, layered(t))
	base := rootlessBase(t, "cove-rootless-mask-")
	root := filepath.Join(base, "root")
	os.Mkdir(root, 0o755)
	os.Chown(root, uid, gid)

	sysctls := []string{"/proc/sys/kernel/printk_ratelimit", "/proc/sys/net/ipv4/tcp_fin_timeout"}
	before := map[string]string{}
	for _, p := range sysctls {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Skipf("this kernel has no %s", p)
		}
		before[p] = strings.TrimSpace(string(b))
	}
	restore := func() {
		for p, v := range before {
			if b, _ := os.ReadFile(p); strings.TrimSpace(string(b)) != v {
				os.WriteFile(p, []byte(v), 0)
			}
		}
	}
	t.Cleanup(restore)

	// What the user can see of the host outside a container, it must not
	// see inside: a count of bytes (files) or entries (directories).
	var script strings.Builder
	shown := 0
	for _, p := range []string{"/proc/interrupts", "/proc/keys", "/proc/timer_list", "/proc/kcore", "/proc/sched_debug"} {
		if f, err := os.Open(p); err == nil {
			f.Close()
			shown++
			fmt.Fprintf(&script, "echo %s $(head -c 4096 %s 2>/dev/null | wc -c)\n", p, p)
		}
	}
	for _, d := range []string{"/sys/firmware", "/proc/acpi", "/proc/scsi", "/sys/devices/virtual/powercap"} {
		if entries, err := os.ReadDir(d); err == nil && len(entries) > 0 {
			shown++
			fmt.Fprintf(&script, "echo %s $(ls -A %s | wc -l)\n", d, d)
		}
	}
	for _, p := range sysctls {
		fmt.Fprintf(&script, "echo 1%s > %s 2>/dev/null && echo wrote %s\n", before[p], p, p)
	}
	script.WriteString(`
		for p in /proc/sys /proc/irq /proc/bus /proc/fs /proc/sysrq-trigger; do
			[ -e $p ] || continue
			grep -q " $p [^ ]* ro," /proc/self/mounts && echo ro $p || echo rw $p
		done
		[ "$(cat /proc/sys/kernel/hostname)" = "$(hostname)" ] && echo hostname $(hostname)`)
	for _, net := range []string{"private", "host", "none"} {
		t.Run("net-"+net, func(t *testing.T) {
			defer restore()
			cmd, out, errb := coveProc(root, "run", "--rm", "--net", net, "--hostname", "masked", ref, "sh", "-c", script.String())
			asTestUser(cmd, u, uid, gid)
			if err := cmd.Run(); err != nil {
				t.Fatalf("rootless run: %v\n%s", err, errb)
			}
			for p, v := range before {
				if b, _ := os.ReadFile(p); strings.TrimSpace(string(b)) != v {
					t.Errorf("the host's %s changed from %s to %s", p, v, b)
				}
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if len(lines) < shown+1 || lines[len(lines)-1] != "hostname masked" {
				t.Fatalf("output %q", out)
			}
			for _, l := range lines[:len(lines)-1] {
				f := strings.Fields(l)
				switch {
				case f[0] == "wrote":
					t.Errorf("a write from inside reached %s", f[1])
				case f[0] == "rw":
					t.Errorf("%s is writable inside", f[1])
				case f[0] != "ro" && f[1] != "0":
					t.Errorf("inside, %s shows %s bytes or entries, want none", f[0], f[1])
				}
			}
		})
	}
}
