// Package trustrecord keeps what the user trusted (a project's agent
// config, a devcontainer.json) in a file of the user's own config
// directory, never in the project: a map from what was trusted (a path)
// to what it was bound to (a hash of its content), so that a change the
// workspace makes afterwards is untrusted again.
package trustrecord

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cove-sh/cove/internal/atomicfile"
	"golang.org/x/sys/unix"
)

// File is a record of trust at Path.
type File struct{ Path string }

// Get is what key was bound to when trusted, "" when it was not.
func (f File) Get(key string) string {
	return f.read()[key]
}

// Set binds key to value and writes the record whole (0600, in a 0700
// directory made if missing). Two coves trusting two projects at once
// both keep theirs: the read, change and write hold a lock (Path.lock).
func (f File) Set(key, value string) error {
	if err := os.MkdirAll(filepath.Dir(f.Path), 0o700); err != nil {
		return err
	}
	lock, err := os.OpenFile(f.Path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("lock the trust record %s: %w", f.Path, err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("lock the trust record %s: %w", f.Path, err)
	}
	m := f.read()
	m[key] = value
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(f.Path, append(b, '\n'))
}

func (f File) read() map[string]string {
	m := map[string]string{}
	if b, err := os.ReadFile(f.Path); err == nil {
		json.Unmarshal(b, &m)
	}
	return m
}

// Hash is what a record binds content to: "sha256:HEX".
func Hash(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
