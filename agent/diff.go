package agent

import (
	udiff "github.com/aymanbagabas/go-udiff"
)

// unifiedDiff is the change from old to new as a unified diff with three
// lines of context, for approvals and the audit log.
func unifiedDiff(path, old, new string) string {
	return udiff.Unified("a/"+path, "b/"+path, old, new)
}
