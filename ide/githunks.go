package ide

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// Hunks: the Source Control view stages and unstages one of git's hunks
// of a file at a time:
//
//	POST /api/git/stage-hunk?path=P&hunk=N&id=ID    the working tree's hunk N into the index
//	POST /api/git/unstage-hunk?path=P&hunk=N&id=ID  the index's hunk N back out of it
//
// The page names a hunk only by its index in the diff it was shown (GET
// /api/git/diff gives them) and that hunk's ID, a hash of its text: the
// patch applied is built here, from the diff git prints now, and applied
// only if that hunk is still the one the page showed. Nothing the page
// sends becomes part of a patch.

// maxHunks bounds the hunks one file's diff may have for the page.
const maxHunks = 5000

// gitHunk is one hunk of a file's diff as git printed it.
type gitHunk struct {
	Index    int    `json:"index"`
	OldStart int    `json:"oldStart"`
	OldLines int    `json:"oldLines"`
	NewStart int    `json:"newStart"`
	NewLines int    `json:"newLines"`
	First    int    `json:"first"` // the new side's first changed line (from 1), where the page puts its button
	ID       string `json:"id"`
	text     string // the "@@" line and the lines after it
	rest     string // what follows the "@@ … @@" on its line (git's function context)
}

// gitFileDiff is one file's diff: git's header lines, then its hunks.
type gitFileDiff struct {
	header string
	hunks  []gitHunk
}

// hunkHead is a hunk's first line: @@ -a[,b] +c[,d] @@ context.
var hunkHead = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$`)
})

// fileDiff is git's diff of the file at path, the index against the
// working tree, or HEAD against the index (staged).
func (g gitAPI) fileDiff(ctx context.Context, path string, staged bool) (gitFileDiff, error) {
	// Every option that could make two runs print different hunks, or
	// hand the diff to a program the project configures, is fixed here.
	// The working tree's side is diff-files, not diff: git diff refreshes
	// the index under .git/index.lock (GIT_OPTIONAL_LOCKS or not), and a
	// commit made meanwhile would fail on it.
	args := []string{"diff-files", "-p"}
	if staged {
		args = []string{"diff", "--cached"}
	}
	args = append(args, "--no-ext-diff", "--no-textconv", "--no-color", "--no-renames", "--src-prefix=a/", "--dst-prefix=b/", "-U3")
	out, err := g.run(ctx, nil, append(args, "--", path)...)
	if err != nil {
		return gitFileDiff{}, err
	}
	return parseFileDiff(string(out))
}

// parseFileDiff takes apart one file's diff; more than one file, or a
// hunk header it cannot read, is an error.
func parseFileDiff(out string) (gitFileDiff, error) {
	var d gitFileDiff
	var head strings.Builder
	files := 0
	for _, line := range strings.SplitAfter(out, "\n") {
		if line == "" {
			continue
		}
		switch {
		case strings.HasPrefix(line, "diff --git "):
			if files++; files > 1 {
				return d, &gitError{"the diff names more than one file"}
			}
			head.WriteString(line)
		case strings.HasPrefix(line, "@@"):
			m := hunkHead().FindStringSubmatch(strings.TrimRight(line, "\n"))
			if m == nil {
				return d, &gitError{"git printed a hunk header cove cannot read"}
			}
			if len(d.hunks) == maxHunks {
				return d, &gitError{fmt.Sprintf("the diff has more than %d hunks", maxHunks)}
			}
			num := func(s, dflt string) int {
				if s == "" {
					s = dflt
				}
				n, _ := strconv.Atoi(s)
				return n
			}
			d.hunks = append(d.hunks, gitHunk{Index: len(d.hunks), OldStart: num(m[1], ""), OldLines: num(m[2], "1"),
				NewStart: num(m[3], ""), NewLines: num(m[4], "1"), rest: m[5], text: line})
		case len(d.hunks) > 0:
			h := &d.hunks[len(d.hunks)-1]
			h.text += line
		default:
			head.WriteString(line)
		}
	}
	d.header = head.String()
	for i := range d.hunks {
		h := &d.hunks[i]
		sum := sha256.Sum256([]byte(h.text))
		h.ID = hex.EncodeToString(sum[:16])
		h.First = firstChanged(*h)
	}
	return d, nil
}

// firstChanged is the new side's line number of h's first changed line:
// its start past the context lines before the change.
func firstChanged(h gitHunk) int {
	n := h.NewStart
	for _, l := range strings.Split(h.text, "\n")[1:] {
		if !strings.HasPrefix(l, " ") {
			break
		}
		n++
	}
	return max(n, 1)
}

// patch is the patch of h alone. Its header's other side is computed as
// if h were the file's only change: forward (staging), the old side is
// where h applies and the new one follows from it; reverse (unstaging),
// the other way round.
func (d gitFileDiff) patch(h gitHunk, reverse bool) string {
	oldStart, newStart := h.OldStart, h.NewStart
	if reverse {
		oldStart = alone(h.NewStart, h.NewLines, h.OldLines)
	} else {
		newStart = alone(h.OldStart, h.OldLines, h.NewLines)
	}
	_, body, _ := strings.Cut(h.text, "\n")
	return fmt.Sprintf("%s@@ -%d,%d +%d,%d @@%s\n%s", d.header, oldStart, h.OldLines, newStart, h.NewLines, h.rest, body)
}

// alone is the start of a hunk's side of n lines whose other side starts
// at start with m lines, with nothing changed before it: the same line,
// but an empty side names the line before it (unified diff's rule).
func alone(start, m, n int) int {
	switch {
	case m == 0 && n > 0:
		return start + 1
	case m > 0 && n == 0:
		return start - 1
	}
	return start
}

// hunk serves stage-hunk and unstage-hunk.
func (g gitAPI) hunk(w http.ResponseWriter, r *http.Request) {
	p, err := g.path(r)
	if err != nil {
		httpError(w, err)
		return
	}
	q := r.URL.Query()
	n, err := strconv.Atoi(q.Get("hunk"))
	if err != nil || n < 0 || n >= maxHunks {
		http.Error(w, "no such hunk: "+closeReason(q.Get("hunk")), http.StatusBadRequest)
		return
	}
	unstage := strings.HasPrefix(r.URL.Path, "/api/git/unstage-")
	d, err := g.fileDiff(r.Context(), p, unstage)
	if err != nil {
		gitHTTPError(w, err)
		return
	}
	if n >= len(d.hunks) || d.hunks[n].ID != q.Get("id") {
		http.Error(w, "the file's diff changed since it was shown: look again", http.StatusConflict)
		return
	}
	args := []string{"apply", "--cached", "--whitespace=nowarn"}
	if unstage {
		args = append(args, "-R")
	}
	if _, err := g.run(r.Context(), []byte(d.patch(d.hunks[n], unstage)), append(args, "-")...); err != nil {
		gitHTTPError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
