package image

import (
	"os"
	"testing"

	"github.com/cove-sh/cove/internal/userns"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == userns.HelperArg {
		// Run as a user with subordinate ids (scripts/test.sh runs some
		// of these tests as covetest), a pull extracts in this binary
		// re-executed as the user namespace helper, as cove's does.
		userns.Main(os.Args[2:], map[string]userns.Task{ExtractTask: Extract, KeepIDTask: CopyKeepID})
	}
	os.Exit(m.Run())
}
