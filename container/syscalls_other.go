//go:build !amd64 && !arm64

package container

// auditArch: cove has no seccomp filter for this architecture (seccompRules says so).
const auditArch = 0

var syscallTable []syscallEntry
