// Package execfile writes a file that is run next. A fork elsewhere in
// the process between the file's open and close gives the child a copy
// of its descriptor, held until that child execs: running the file then
// fails with ETXTBSY ("text file busy"; golang/go#22315). Tests that
// write a program and run it while other tests start processes met it.
package execfile

import (
	"io/fs"
	"os"
	"syscall"
)

// Write is os.WriteFile with no fork of this process while the file is
// open: the fork lock held for reading keeps forks out.
func Write(path string, data []byte, perm fs.FileMode) error {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	return os.WriteFile(path, data, perm)
}
