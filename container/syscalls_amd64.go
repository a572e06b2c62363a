package container

// auditArch is AUDIT_ARCH_X86_64, what seccomp_data.arch says for native calls.
const auditArch = 0xc000003e

// syscallTable is this architecture's system calls by name, sorted.
var syscallTable = syscallsAMD64[:]
