// Package shed gives back the pages of cove's own executable that a
// long-lived cove process in a container touched while it started, and
// will not need again.
//
// Such a process (a container's init, a workspace's IDE server) stays
// for the container's life, in its memory cgroup, and the kernel's OOM
// killer picks the task with the most resident pages. Cove's binary is
// large: most of a 24 MB init was its pages. Without this, a workload that reaches --memory got
// init killed, and with it the whole container (every terminal of a
// workspace), instead of the process that grew. (Its heap is small:
// runtime/debug.FreeOSMemory took 10 ms and gave nothing back.)
//
// The pages are only unmapped from the process: they stay in the page
// cache (the launcher maps the same file) and come back on a fault if the
// process runs that code again. Only mappings of a file that the process
// cannot write and has not written are dropped (no private copy of a
// page: a relocated read-only section of a PIE build has them); dropping
// one that has would lose what was written there.
package shed

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// A Shedder sheds its process. Open it before the process runs anything
// of a container's, and Shed when the start is done: smaps is read
// through the descriptor Open made, so it is the kernel's file about
// this process, whatever the container mounts on /proc meanwhile. A
// Shedder sheds what it found the first time.
type Shedder struct {
	smaps *os.File
	once  sync.Once
	clean []mapping
}

// Open opens this process's smaps for a later Shed.
func Open() *Shedder {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return &Shedder{} // a smaller process is worth having, not worth failing a start
	}
	return &Shedder{smaps: f}
}

// Shed drops this process's clean pages of files it maps (its executable).
func (s *Shedder) Shed() {
	s.once.Do(func() {
		if s.smaps == nil {
			return
		}
		defer s.smaps.Close()
		if b, err := io.ReadAll(s.smaps); err == nil {
			s.clean = cleanFileMappings(b)
		}
	})
	for _, m := range s.clean {
		// Not unix.Madvise: it wants a []byte of memory Go did not allocate.
		unix.Syscall(unix.SYS_MADVISE, m.start, m.end-m.start, unix.MADV_DONTNEED)
	}
}

type mapping struct{ start, end uintptr }

// cleanFileMappings reads /proc/self/smaps (a header "start-end perms
// offset dev inode path" per mapping, then "Key: N kB" lines) and returns
// the mappings of a file (an inode) that are readable, not writable, and
// hold no anonymous (privately copied) page: program text and read-only
// data as the file has them.
func cleanFileMappings(smaps []byte) []mapping {
	var out []mapping
	var cur mapping
	candidate, clean := false, false
	flush := func() {
		if candidate && clean {
			out = append(out, cur)
		}
		candidate, clean = false, false
	}
	sc := bufio.NewScanner(bytes.NewReader(smaps))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) == 0 {
			continue
		}
		if lo, hi, ok := bytes.Cut(f[0], []byte("-")); ok && len(f) >= 5 {
			flush()
			start, err1 := strconv.ParseUint(string(lo), 16, 64)
			end, err2 := strconv.ParseUint(string(hi), 16, 64)
			perms := f[1]
			candidate = err1 == nil && err2 == nil && end > start && len(perms) >= 4 &&
				perms[0] == 'r' && perms[1] == '-' && string(f[4]) != "0"
			cur = mapping{uintptr(start), uintptr(end)}
			continue
		}
		if string(f[0]) == "Anonymous:" && len(f) >= 2 {
			clean = string(f[1]) == "0"
		}
	}
	flush()
	return out
}
