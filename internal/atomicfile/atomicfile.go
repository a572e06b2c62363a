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
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
