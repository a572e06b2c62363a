package devcontainer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cove-sh/cove/internal/atomicfile"
)

// The user trusts a devcontainer.json on the host (cove up --trust): the
// record lives in the user's own config directory, keyed by the file's
// path and bound to its content, so a change the workspace makes to it
// afterwards is untrusted again.

// TrustPath is the record of trusted devcontainer.json files.
func TrustPath(home string) string {
	return filepath.Join(home, ".config", "cove", "trusted-devcontainer.json")
}

func readTrust(home string) map[string]string {
	m := map[string]string{}
	if b, err := os.ReadFile(TrustPath(home)); err == nil {
		json.Unmarshal(b, &m)
	}
	return m
}

func contentHash(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Trusted says whether the user trusted the config at path with content
// raw.
func Trusted(home, path string, raw []byte) bool {
	return raw != nil && readTrust(home)[path] == contentHash(raw)
}

// Trust records that the user trusts the project's devcontainer.json (the
// one opts chooses) as it is now, and returns its path and what trusting
// it lets take effect (what an untrusted read holds back: the command run
// on the host, the host paths, capabilities, run arguments, host
// variables), for the user to see; a project without one has nothing to
// trust.
func Trust(dir string, opts Options) (path string, grants []string, err error) {
	c, err := Load(dir, Options{ConfigPath: opts.ConfigPath})
	if err != nil {
		return "", nil, err
	}
	if c == nil {
		return "", nil, fmt.Errorf("%s has no devcontainer.json to trust", dir)
	}
	m := readTrust(opts.Home)
	m[c.Path] = contentHash(c.Raw)
	if err := os.MkdirAll(filepath.Dir(TrustPath(opts.Home)), 0o700); err != nil {
		return "", nil, err
	}
	b, _ := json.MarshalIndent(m, "", "  ")
	return c.Path, c.Untrusted, atomicfile.WriteFile(TrustPath(opts.Home), append(b, '\n'))
}
