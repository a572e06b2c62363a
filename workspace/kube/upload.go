package kube

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
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
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("bring cove into the Pod: %w", err)
	}
	var errb bytes.Buffer
	// The size is checked before the binary takes its place: an exec's
	// input can end short (its stream closed before all of it was read).
	script := "set -e; cat > " + CovePath + ".new; n=$(wc -c < " + CovePath + ".new); " +
		"[ \"$n\" -eq " + strconv.FormatInt(fi.Size(), 10) + " ] || { echo \"only $n bytes arrived\" >&2; exit 1; }; " +
		"chmod 0755 " + CovePath + ".new; mv -f " + CovePath + ".new " + CovePath
	code, err := p.Exec(ctx, []string{"/bin/sh", "-c", script}, ExecOptions{Stdin: f, Stderr: &errb})
	if err != nil {
		return fmt.Errorf("bring cove into the Pod: %w", err)
	}
	if code != 0 {
		return fmt.Errorf("bring cove into the Pod: exit %d: %s", code, strings.TrimSpace(errb.String()))
	}
	return nil
}
