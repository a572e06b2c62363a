package main

import (
	"strings"
	"testing"
)

func TestKernelAtLeast(t *testing.T) {
	t.Parallel()
	for release, want := range map[string]bool{
		"6.1.0-57-cloud-amd64": true, "5.12.0": true, "5.15.0-91-generic": true, "5.11.22": false,
		"4.19.0-26-amd64": false, "5.4": false, "10.0": true, "weird": true,
	} {
		if got := kernelAtLeast(release, 5, 12); got != want {
			t.Errorf("kernelAtLeast(%q, 5, 12) = %v, want %v", release, got, want)
		}
	}
}

// TestCpusCheckNamesTheThrottleRisk: before Linux 6.18 doctor says what a
// tight --cpus can do to the machine, and how to avoid it; from 6.18 it
// is fine.
func TestCpusCheckNamesTheThrottleRisk(t *testing.T) {
	t.Parallel()
	for release, want := range map[string]string{"6.1.0-57-cloud-amd64": "note", "6.17.9": "note", "6.18.44-fc-v1045": "ok", "7.0": "ok"} {
		c := cpusCheck(release)
		if c.status != want {
			t.Errorf("cpusCheck(%q) = %+v, want %s", release, c, want)
		}
		if want == "note" && (!strings.Contains(c.detail, "--cpus at 1 or more") || !strings.Contains(c.detail, "6.18")) {
			t.Errorf("cpusCheck(%q) says neither what to do nor which kernel mends it: %s", release, c.detail)
		}
	}
}
