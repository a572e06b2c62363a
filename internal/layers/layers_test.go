package layers

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/cove-sh/cove/"

// layer is each package's place, lowest first; a package may import only
// packages of a lower layer. A new package gets a line here.
var layer = map[string]int{
	// 0: leaves (internal/*, the web bundle, scripts' tools) — see leaf.
	"container": 1, "image": 1, "agent": 1, "workspace/filesync": 1, "workspace/compose": 1,
	"build": 2, "image/progress": 2, "settings": 2, "agent/mcpclient": 2, "agent/setup": 2,
	"devcontainer": 2, "workspace/kube": 2, "ide": 2,
	"agent/terminal": 3, "devcontainer/devimage": 3, "inside": 3,
	"workspace": 4,
	"launcher":  5, "task": 5,
	"cmd/cove": 6, "cmd/cove-inside": 6, "cmd/cove-init": 6,
}

// leaf says whether p is of layer 0: it may import no other package of
// cove's but leaves.
func leaf(p string) bool {
	return strings.HasPrefix(p, "internal/") || strings.HasPrefix(p, "scripts/") || p == "ide/web"
}

func rank(p string) (int, bool) {
	if leaf(p) {
		return 0, true
	}
	r, ok := layer[p]
	return r, ok
}

// TestImportsPointDown lists the module's packages with go list and checks
// each import of another of them against the layers.
func TestImportsPointDown(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		p := strings.TrimPrefix(f[0], module)
		rp, ok := rank(p)
		if !ok {
			t.Errorf("package %s has no layer: give it one in layers_test.go", p)
			continue
		}
		n++
		for _, imp := range f[1:] {
			q, ours := strings.CutPrefix(imp, module)
			if !ours {
				continue
			}
			rq, ok := rank(q)
			if ok && rq >= rp && !(rp == 0 && leaf(q)) {
				t.Errorf("%s (layer %d) imports %s (layer %d): imports point down", p, rp, q, rq)
			}
		}
	}
	if n < 20 {
		t.Fatalf("only %d packages listed", n)
	}
}
