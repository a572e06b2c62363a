package container

// auditArch is AUDIT_ARCH_AARCH64, what seccomp_data.arch says for native calls.
const auditArch = 0xc00000b7

// syscallTable is this architecture's system calls by name, sorted.
var syscallTable = syscallsARM64[:]
