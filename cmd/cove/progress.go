package main

import (
	"fmt"
	"io"
	"os"
	"sync/atomic"

	"github.com/cove-sh/cove/image"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/term"
)

// progress draws image.Progress reports: a bar per layer on a terminal, a
// line per finished layer elsewhere, nothing when quiet. image.Pull calls
// update one report at a time.
type progress struct {
	w     io.Writer
	quiet bool
	ref   string // named once, when the first layer is reported
	named bool
	p     *mpb.Progress
	bars  map[int]*layerBar
}

type layerBar struct {
	bar   *mpb.Bar
	phase atomic.Value // string
}

func newProgress(w io.Writer, ref string, quiet bool) *progress {
	if t, ok := w.(interface{ Terminal() io.Writer }); ok {
		w = t.Terminal() // stderr copied to the IDE's log (notes.go): the bars draw on stderr alone
	}
	pr := &progress{w: w, ref: ref, quiet: quiet, bars: map[int]*layerBar{}}
	if f, ok := w.(*os.File); ok && !quiet && term.IsTerminal(int(f.Fd())) {
		// A terminal that reports no size (some ptys) cannot hold bars.
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 0 {
			pr.p = mpb.New(mpb.WithOutput(w), mpb.WithWidth(30))
		}
	}
	return pr
}

func short(s string) string {
	if len(s) > 19 {
		return s[:19]
	}
	return s
}

func (pr *progress) update(ev image.Progress) {
	if pr.quiet {
		return
	}
	if !pr.named {
		// What is being pulled, once, above its layers.
		pr.named = true
		fmt.Fprintf(pr.w, "pulling %s (%d layers)\n", pr.ref, ev.Count)
	}
	if pr.p == nil {
		pr.line(ev)
		return
	}
	lb, ok := pr.bars[ev.Index]
	if !ok {
		lb = &layerBar{}
		lb.phase.Store("waiting")
		name := short(ev.Layer.String())
		// Total 0 at first: mpb then completes the bar only when we say so
		// (after extraction), not when the download reaches its size.
		lb.bar = pr.p.New(0, mpb.BarStyle(), mpb.BarPriority(ev.Index),
			mpb.PrependDecorators(decor.Name(name+" ", decor.WCSyncSpaceR)),
			mpb.AppendDecorators(
				// A layer already here has no size to count: no "0 b / 0 b".
				decor.Any(func(st decor.Statistics) string {
					if st.Total <= 0 && st.Current == 0 {
						return ""
					}
					return fmt.Sprintf("% .1f / % .1f ", decor.SizeB1024(st.Current), decor.SizeB1024(st.Total))
				}, decor.WCSyncSpace),
				decor.Any(func(decor.Statistics) string { return lb.phase.Load().(string) }),
			))
		pr.bars[ev.Index] = lb
	}
	switch ev.Phase {
	case image.PhaseDownloading:
		lb.phase.Store("downloading")
		lb.bar.SetTotal(ev.Total, false)
		lb.bar.SetCurrent(ev.Done)
	case image.PhaseRetrying:
		lb.phase.Store("retrying: " + ev.Err.Error())
	case image.PhaseCached:
		lb.phase.Store("already here")
	case image.PhaseDownloaded:
		lb.phase.Store("downloaded")
		lb.bar.SetTotal(ev.Total, false)
		lb.bar.SetCurrent(ev.Done)
	case image.PhaseExtracting:
		lb.phase.Store("extracting")
	case image.PhaseExtracted:
		lb.phase.Store("done")
		lb.bar.SetTotal(-1, true)
	}
}

func (pr *progress) line(ev image.Progress) {
	pos := fmt.Sprintf("%d/%d", ev.Index+1, ev.Count)
	switch ev.Phase {
	case image.PhaseRetrying:
		fmt.Fprintf(pr.w, "layer %s %s: retrying after: %v\n", pos, short(ev.Layer.String()), ev.Err)
	case image.PhaseExtracted:
		fmt.Fprintf(pr.w, "layer %s %s: done\n", pos, short(ev.Layer.String()))
	}
}

// wait lets the bars draw their last state; call it once Pull returned.
func (pr *progress) wait() {
	if pr.p == nil {
		return
	}
	for _, lb := range pr.bars {
		lb.bar.Abort(false)
	}
	pr.p.Wait()
}
