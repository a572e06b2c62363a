package kube

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
)

// CovePath is where cove's own binary is in the Pod.
const CovePath = coveDir + "/cove"

// Bring copies cove's static binary (bin, on this machine) into the Pod,
// so that `cove ide serve` and the workspace-side helpers run there as
// they do in a local container. It streams the file over exec into the
// Pod's /.cove (an emptyDir), so the image needs only /bin/sh.
func (p *Pod) Bring(ctx context.Context, bin string) error {
	f, err := os.Open(bin)
	if err != nil {
		return fmt.Errorf("bring cove into the Pod: %w", err)
	}
	defer f.Close()
	var errb bytes.Buffer
	script := "set -e; cat > " + CovePath + ".new; chmod 0755 " + CovePath + ".new; mv -f " + CovePath + ".new " + CovePath
	code, err := p.Exec(ctx, []string{"/bin/sh", "-c", script}, ExecOptions{Stdin: f, Stderr: &errb})
	if err != nil {
		return fmt.Errorf("bring cove into the Pod: %w", err)
	}
	if code != 0 {
		return fmt.Errorf("bring cove into the Pod: exit %d: %s", code, strings.TrimSpace(errb.String()))
	}
	return nil
}
