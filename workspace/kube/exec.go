package kube

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/cove-sh/cove/internal/kubeclient"
)

// TermSize is a terminal's size.
type TermSize = kubeclient.TermSize

// ExecOptions are a command's streams in the Pod. With TTY, Stderr is
// unused (the terminal carries both) and Resize, if set, sends its sizes.
type ExecOptions = kubeclient.ExecOptions

// path is the Pod's path in the API.
func (p *Pod) path() string {
	return "/api/v1/namespaces/" + url.PathEscape(p.Namespace) + "/pods/" + url.PathEscape(p.Name)
}

// Exec runs argv in the workspace's container and returns its exit
// status, through the API server's WebSocket exec protocol.
func (p *Pod) Exec(ctx context.Context, argv []string, o ExecOptions) (int, error) {
	code, err := p.cluster.api.Exec(ctx, p.path(), "workspace", argv, o)
	var refused *kubeclient.ExecError
	if errors.As(err, &refused) {
		// The runtime's refusal to start the command: say it as a shell
		// and cove exec do, with their statuses.
		for _, e := range []struct {
			says string
			code int
		}{{"executable file not found", 127}, {"no such file or directory", 127}, {"permission denied", 126}} {
			if strings.Contains(err.Error(), "exec failed: unable to start container process") && strings.Contains(err.Error(), e.says) {
				w := o.Stderr
				if w == nil || o.TTY {
					w = o.Stdout
				}
				if w != nil {
					fmt.Fprintf(w, "cove: %s: %s\n", argv[0], e.says)
				}
				return e.code, nil
			}
		}
	}
	if err != nil {
		return 0, fmt.Errorf("exec in %s/%s: %w", p.Namespace, p.Name, err)
	}
	return code, nil
}
