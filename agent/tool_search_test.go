package agent

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/cove-sh/cove/internal/hostilerepo"
)

// TestSearchToolRunsNothingOfTheProject: the agent's search, run on the
// host, starts none of the programs the project's git config names, and
// still finds only what the ignore rules let through.
func TestSearchToolRunsNothingOfTheProject(t *testing.T) {
	r := hostilerepo.New(t)
	w, err := OpenWorkspace(r.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	a, err := SearchTool{W: w}.Plan(context.Background(), json.RawMessage(`{"pattern":"needle"}`))
	if err != nil {
		t.Fatal(err)
	}
	out, err := a.Do(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		got = append(got, strings.SplitN(line, ":", 2)[0])
	}
	want := "deep/er/still/here.go docs/x.md keep.log lib/vendor main.go sub/build/x.go sub/important.log"
	if strings.Join(got, " ") != want {
		t.Errorf("search found in %q, want %q", got, want)
	}
	if ran := r.Ran(t); len(ran) > 0 {
		t.Errorf("the host ran the project's programs: %q", ran)
	}
}
