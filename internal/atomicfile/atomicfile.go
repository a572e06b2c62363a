// Package atomicfile replaces files so that readers see the old content or
// the new, never a part: the state files other cove processes read.
package atomicfile

import (
	"os"
	"path/filepath"
)

// WriteFile writes b to a temporary file beside path, syncs it and renames
// it over path. The file gets mode 0600 (CreateTemp's).
func WriteFile(path string, b []byte) error {
	return write(path, b, true)
}

// WriteVolatile is WriteFile without the sync, for a record that means
// nothing once the machine restarts (one about a process, or about a
// directory in memory): while the machine runs, readers still see all of
// it or none; a crash may leave it empty (or zeroed, on some file systems),
// which its readers must take for a record the crash cut short. The sync
// is the dear part of a small write (a journal commit and a flush of the
// disk's cache: 1–64 ms apiece in strace -T on this project's machine with
// its disk busy; latency.sh's BUSY_DISK rows show what it cost a start).
func WriteVolatile(path string, b []byte) error {
	return write(path, b, false)
}

func write(path string, b []byte, sync bool) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if sync {
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
