package ide

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGitStagesOneHunk: of a file with two changed hunks, the one the
// page names (by index and ID) goes into the index and the other stays
// in the working tree; unstaging takes it out again. A stale ID, a hunk
// past the end, a path outside the project or pathspec magic changes
// nothing.
func TestGitStagesOneHunk(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	project := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", project}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
		return string(out)
	}
	var lines []string
	for i := 1; i <= 30; i++ {
		lines = append(lines, "line "+strings.Repeat("x", i%5)+string(rune('a'+i%26)))
	}
	orig := strings.Join(lines, "\n") + "\n"
	os.WriteFile(filepath.Join(project, "f.txt"), []byte(orig), 0o644)
	git("init", "-q", "-b", "main")
	git("add", ".")
	git("-c", "user.name=T", "-c", "user.email=t@t.invalid", "commit", "-q", "-m", "first")
	lines[2] = "FIRST CHANGE"
	lines = append(lines[:25], append([]string{"SECOND CHANGE"}, lines[25:]...)...)
	os.WriteFile(filepath.Join(project, "f.txt"), []byte(strings.Join(lines, "\n")+"\n"), 0o644)

	p, base := stack(t, project)
	c := authed(t, p)
	diff := func(staged string) []gitHunk {
		t.Helper()
		code, body := get(t, c, base+"/api/git/diff?path=f.txt&staged="+staged, nil)
		var d struct{ Hunks []gitHunk }
		if code != 200 || json.Unmarshal([]byte(body), &d) != nil {
			t.Fatalf("diff: %d %s", code, body)
		}
		return d.Hunks
	}
	post := func(path string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base+path, nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	hunks := diff("0")
	if len(hunks) != 2 || hunks[0].First != 3 || hunks[1].First != 26 {
		t.Fatalf("hunks: %+v", hunks)
	}
	for _, bad := range []struct {
		query string
		code  int
	}{
		{"path=f.txt&hunk=0&id=" + hunks[1].ID, http.StatusConflict}, // another hunk's ID
		{"path=f.txt&hunk=2&id=" + hunks[1].ID, http.StatusConflict},
		{"path=f.txt&hunk=-1&id=" + hunks[1].ID, http.StatusBadRequest},
		{"path=../f.txt&hunk=1&id=" + hunks[1].ID, http.StatusBadRequest},
		{"path=.&hunk=1&id=" + hunks[1].ID, http.StatusBadRequest},
		{"path=" + project + "/../x&hunk=1&id=" + hunks[1].ID, http.StatusBadRequest},
		{"path=:(glob)*&hunk=1&id=" + hunks[1].ID, http.StatusConflict}, // a file of that name: none
	} {
		if code := post("/api/git/stage-hunk?" + bad.query); code != bad.code {
			t.Errorf("stage-hunk?%s: %d, want %d", bad.query, code, bad.code)
		}
	}
	if got := git("diff", "--cached"); got != "" {
		t.Fatalf("the index changed on a refused request:\n%s", got)
	}

	if code := post("/api/git/stage-hunk?path=f.txt&hunk=1&id=" + hunks[1].ID); code != http.StatusNoContent {
		t.Fatalf("stage-hunk: %d", code)
	}
	cached, work := git("diff", "--cached"), git("diff")
	if !strings.Contains(cached, "+SECOND CHANGE") || strings.Contains(cached, "FIRST CHANGE") ||
		!strings.Contains(work, "+FIRST CHANGE") || strings.Contains(work, "SECOND CHANGE") {
		t.Fatalf("after staging the second hunk:\nindex:\n%s\nworking tree:\n%s", cached, work)
	}
	staged := diff("1")
	if len(staged) != 1 || staged[0].First != 26 {
		t.Fatalf("staged hunks: %+v", staged)
	}
	if code := post("/api/git/unstage-hunk?path=f.txt&hunk=0&id=" + staged[0].ID); code != http.StatusNoContent {
		t.Fatalf("unstage-hunk: %d", code)
	}
	if got := git("diff", "--cached"); got != "" {
		t.Fatalf("after unstaging, the index still differs:\n%s", got)
	}
	if b, _ := os.ReadFile(filepath.Join(project, "f.txt")); string(b) != strings.Join(lines, "\n")+"\n" {
		t.Fatalf("the working tree changed: %q", b)
	}
}

// TestParseFileDiffHunks: a hunk's sides and where its change starts, an
// insertion into an empty file, and the patch of one hunk alone, its
// other side as if nothing changed before it.
func TestParseFileDiffHunks(t *testing.T) {
	t.Parallel()
	d, err := parseFileDiff("diff --git a/f b/f\nindex 1..2 100644\n--- a/f\n+++ b/f\n" +
		"@@ -1,4 +1,4 @@\n a\n-b\n+B\n c\n d\n" +
		"@@ -20,3 +20,5 @@ func x\n t\n+u\n+v\n w\n x\n")
	if err != nil || len(d.hunks) != 2 || d.hunks[0].First != 2 || d.hunks[1].First != 21 || d.hunks[1].NewLines != 5 {
		t.Fatalf("%+v %v", d, err)
	}
	if p := d.patch(d.hunks[1], false); !strings.Contains(p, "@@ -20,3 +20,5 @@ func x\n t\n+u") || !strings.HasPrefix(p, "diff --git a/f b/f\n") {
		t.Errorf("patch:\n%s", p)
	}
	if _, err := parseFileDiff("diff --git a/f b/f\n@@ -1 +1 @@\n-a\n+b\ndiff --git a/g b/g\n"); err == nil {
		t.Error("two files' diff taken")
	}
	if _, err := parseFileDiff("diff --git a/f b/f\n@@ nonsense @@\n"); err == nil {
		t.Error("a bad hunk header taken")
	}
	e, _ := parseFileDiff("diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -0,0 +1,2 @@\n+a\n+b\n")
	if p := e.patch(e.hunks[0], true); !strings.Contains(p, "@@ -0,0 +1,2 @@") {
		t.Errorf("reverse patch of an insertion:\n%s", p)
	}
}
