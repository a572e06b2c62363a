package container

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// The attacks in these tests are what a hostile workload under a root
// launcher tries first; each one passes only if the host saw nothing.

// hostFile reads a host file that the test needs, skipping the test when
// this kernel has no such file.
func hostFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if os.IsNotExist(err) {
		t.Skipf("this kernel has no %s", p)
	}
	must(t, err)
	return strings.TrimSpace(string(b))
}

// netModes runs f for a container sharing the host's network namespace
// (where /proc/sys/net is the host's) and for one with its own.
func netModes(t *testing.T, f func(t *testing.T, net string)) {
	for _, net := range []string{"private", "host", "none"} {
		t.Run("net-"+net, func(t *testing.T) { f(t, net) })
	}
}

// TestRunCannotWriteHostSysctls: container root writes global kernel
// settings (the first step of a core_pattern escape) and, with the host's
// network, the host's network settings, and an IRQ's CPU affinity. Every
// value on the host stays what it was, and every write fails.
func TestRunCannotWriteHostSysctls(t *testing.T) {
	needRoot(t)
	img, cfg := testImage(t, nil)
	// Harmless to flip for a moment: how often the kernel rate-limits its
	// log, how long a lease breaker waits, a TCP timeout.
	sysctls := []string{"/proc/sys/kernel/printk_ratelimit", "/proc/sys/fs/lease-break-time", "/proc/sys/net/ipv4/tcp_fin_timeout"}
	before := map[string]string{}
	for _, p := range sysctls {
		before[p] = hostFile(t, p)
	}
	// Whatever happens, the host gets its values back (after each run, so
	// that one run's write does not hide the next one's).
	restore := func() {
		for p, v := range before {
			if b, _ := os.ReadFile(p); strings.TrimSpace(string(b)) != v {
				os.WriteFile(p, []byte(v), 0)
			}
		}
	}
	t.Cleanup(restore)
	netModes(t, func(t *testing.T, net string) {
		defer restore()
		var script strings.Builder
		for _, p := range sysctls {
			n, err := strconv.Atoi(before[p])
			must(t, err)
			fmt.Fprintf(&script, "echo %d > %s 2>/dev/null && echo wrote %s || echo refused %s\n", n+1, p, p, p)
		}
		// The same value back: a success would show the IRQ affinity
		// is writable without changing it.
		if aff, err := os.ReadFile("/proc/irq/default_smp_affinity"); err == nil {
			fmt.Fprintf(&script, "echo %s > /proc/irq/default_smp_affinity 2>/dev/null && echo wrote irq || echo refused irq\n", strings.TrimSpace(string(aff)))
		}
		r := runIn(t, img, cfg, Limits{}, func(s *Spec) { s.Net = net }, "sh", "-c", script.String()).ok(t)
		for _, p := range sysctls {
			if now := hostFile(t, p); now != before[p] {
				t.Errorf("the host's %s changed from %s to %s", p, before[p], now)
			}
		}
		if strings.Contains(r.stdout, "wrote") || strings.Count(r.stdout, "refused") < len(sysctls) {
			t.Errorf("writes from inside:\n%s", r.stdout)
		}
	})
}

// TestRunSysrqTriggerIsReadOnly opens /proc/sysrq-trigger for writing
// (and writes nothing: a letter there would act on the host's kernel).
func TestRunSysrqTriggerIsReadOnly(t *testing.T) {
	needRoot(t)
	if _, err := os.Stat("/proc/sysrq-trigger"); err != nil {
		t.Skip("this kernel has no /proc/sysrq-trigger (CONFIG_MAGIC_SYSRQ off)")
	}
	img, cfg := testImage(t, nil)
	// >> opens O_WRONLY|O_APPEND (no O_TRUNC) and writes no byte.
	r := runIn(t, img, cfg, Limits{}, nil, "sh", "-c", `(exec 3>>/proc/sysrq-trigger) 2>&1 && echo opened || echo refused`).ok(t)
	if !strings.Contains(r.stdout, "refused") || !strings.Contains(r.stdout, "Read-only file system") {
		t.Fatalf("opening /proc/sysrq-trigger for writing: %q", r.stdout)
	}
}

// maskedFiles are masked paths that are files on kernels that have them.
var maskedFiles = []string{"/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/latency_stats", "/proc/interrupts"}

// TestRunMasksKernelInfo reads what the host's kernel shows about its
// memory, keys, timers (with the host's pids and tasks) and firmware:
// inside, each is empty.
func TestRunMasksKernelInfo(t *testing.T) {
	needRoot(t)
	img, cfg := testImage(t, nil)
	var script strings.Builder
	present := 0
	for _, p := range maskedFiles {
		if _, err := os.Stat(p); err == nil {
			present++
			fmt.Fprintf(&script, "echo %s $(head -c 4096 %s 2>/dev/null | wc -c)\n", p, p)
		}
	}
	for _, d := range []string{"/proc/acpi", "/proc/scsi", "/proc/asound", "/sys/firmware", "/sys/devices/virtual/powercap"} {
		if entries, err := os.ReadDir(d); err == nil && len(entries) > 0 {
			present++
			fmt.Fprintf(&script, "echo %s $(ls -A %s | wc -l)\n", d, d)
		}
	}
	if present == 0 {
		t.Skip("this kernel shows none of the masked paths")
	}
	netModes(t, func(t *testing.T, net string) {
		r := runIn(t, img, cfg, Limits{}, func(s *Spec) { s.Net = net }, "sh", "-c", script.String()).ok(t)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(lines) != present {
			t.Fatalf("output %q", r.stdout)
		}
		for _, l := range lines {
			if f := strings.Fields(l); len(f) != 2 || f[1] != "0" {
				t.Errorf("inside, %s shows %s bytes or entries, want none", f[0], f[1])
			}
		}
	})
}

// TestRunOwnHostname: the container's hostname is its own, and root in it
// can set it through /proc/sys/kernel/hostname (kept writable in the
// read-only /proc/sys); the host's stays. hostname(1) calls
// sethostname(2), which needs CAP_SYS_ADMIN: the workload never had it (as
// in Docker), so its try changes nothing anywhere.
func TestRunOwnHostname(t *testing.T) {
	needRoot(t)
	img, cfg := testImage(t, nil)
	host, err := os.Hostname()
	must(t, err)
	netModes(t, func(t *testing.T, net string) {
		r := runIn(t, img, cfg, Limits{}, func(s *Spec) { s.Net = net }, "sh", "-c", `
			hostname; cat /proc/sys/kernel/hostname
			hostname foo 2>/dev/null
			echo bar > /proc/sys/kernel/hostname; hostname; cat /proc/sys/kernel/hostname`)
		if now, _ := os.Hostname(); now != host {
			os.WriteFile("/proc/sys/kernel/hostname", []byte(host), 0)
			t.Fatalf("the host's hostname changed from %s to %s", host, now)
		}
		if r.err != nil || r.stdout != "box\nbox\nbar\nbar\n" {
			t.Fatalf("hostname inside: %q (exit %d, %v, stderr %q)", r.stdout, r.code, r.err, r.stderr)
		}
	})
}

// TestRunSysIsReadOnly: sysfs, the host's devices and kernel knobs, is
// read-only inside (it was already; this keeps it so).
func TestRunSysIsReadOnly(t *testing.T) {
	needRoot(t)
	img, cfg := testImage(t, nil)
	mtu := hostFile(t, "/sys/class/net/lo/mtu")
	netModes(t, func(t *testing.T, net string) {
		r := runIn(t, img, cfg, Limits{}, func(s *Spec) { s.Net = net }, "sh", "-c",
			"echo "+mtu+" > /sys/class/net/lo/mtu 2>/dev/null && echo wrote || echo refused").ok(t)
		if r.stdout != "refused\n" {
			t.Fatalf("writing sysfs: %q", r.stdout)
		}
	})
}
