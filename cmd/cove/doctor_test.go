package main

import "testing"

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
