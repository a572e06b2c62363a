package workspace

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cove-sh/cove/internal/atomicfile"
)

// Made is how a workspace was made: the command line's flags that define
// it (--image, the limits, the network, …), by name, each with its values
// as given. A start that succeeds keeps them beside the workspace's layer
// (made.json, on the host's side, out of the workspace's reach), and a
// later plain cove up in the project starts it with them, as it was: a
// flag given again wins, --image with another image asks for --fresh.
// They are kept as flags, not as what they mean, so that a flag added
// later (-p) is remembered by naming it among the defining ones.
type Made map[string][]string

// madeFile is the record's name in the workspace's layer directory.
const madeFile = "made.json"

// MadeWith are the flags DIR's workspace on this machine was last
// started with; none for a workspace that was never started (or was
// started before cove kept them).
func (lo *Local) MadeWith(dir string) (Made, error) {
	path := filepath.Join(lo.Layout.Data, "workspaces", Name(dir), madeFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("how the workspace of %s was made: %w", dir, err)
	}
	var m Made
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("how the workspace of %s was made: %s: %w (cove up --fresh writes it anew)", dir, path, err)
	}
	return m, nil
}

// write keeps m in the layer directory (none: nothing to remember).
func (m Made) write(layerDir string) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(layerDir, madeFile), append(b, '\n')); err != nil {
		return fmt.Errorf("remember how the workspace was made: %w", err)
	}
	return nil
}
