// Command syscallprobe makes the system calls its arguments name and
// prints the error each returned, for the seccomp tests: it runs inside a
// container, where the filter is what is being checked.
//
// Each argument is LABEL:NR[:ARG...] (numbers in Go syntax); each line of
// output is "LABEL ERRNO" (0 when the call succeeded).
package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

func main() {
	for _, a := range os.Args[1:] {
		f := strings.Split(a, ":")
		var n [7]uintptr
		for i, s := range f[1:] {
			v, err := strconv.ParseUint(s, 0, 64)
			if err != nil || i >= len(n) {
				fmt.Fprintf(os.Stderr, "syscallprobe: bad argument %q\n", a)
				os.Exit(2)
			}
			n[i] = uintptr(v)
		}
		r, _, errno := syscall.RawSyscall6(n[0], n[1], n[2], n[3], n[4], n[5], n[6])
		if errno == 0 && strings.HasPrefix(f[0], "socket") {
			syscall.Close(int(r))
		}
		fmt.Printf("%s %d\n", f[0], int(errno))
	}
}
