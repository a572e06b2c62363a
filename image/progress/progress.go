// Package progress draws an image pull's progress: a bar per layer on a
// terminal, a line per finished layer elsewhere.
package progress

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

// Bars draws image.Progress reports: a bar per layer on a terminal, a
// line per finished layer elsewhere, nothing when quiet. image.Pull calls
// Update one report at a time.
type Bars struct {
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

// New draws the pull of ref on w. A w with a Terminal method (stderr
// copied to the IDE's log) draws on what that gives: the bars are for the
// terminal alone.
func New(w io.Writer, ref string, quiet bool) *Bars {
	if t, ok := w.(interface{ Terminal() io.Writer }); ok {
		w = t.Terminal()
	}
	pr := &Bars{w: w, ref: ref, quiet: quiet, bars: map[int]*layerBar{}}
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

// Update draws one report; give it to image.WithProgress.
func (pr *Bars) Update(ev image.Progress) {
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

func (pr *Bars) line(ev image.Progress) {
	pos := fmt.Sprintf("%d/%d", ev.Index+1, ev.Count)
	switch ev.Phase {
	case image.PhaseRetrying:
		fmt.Fprintf(pr.w, "layer %s %s: retrying after: %v\n", pos, short(ev.Layer.String()), ev.Err)
	case image.PhaseExtracted:
		fmt.Fprintf(pr.w, "layer %s %s: done\n", pos, short(ev.Layer.String()))
	}
}

// Wait lets the bars draw their last state; call it once Pull returned.
func (pr *Bars) Wait() {
	if pr.p == nil {
		return
	}
	for _, lb := range pr.bars {
		lb.bar.Abort(false)
	}
	pr.p.Wait()
}

// Bytes is n as a person reads a size: 512 MiB, 1.5 GiB.
func Bytes(n int64) string {
	for _, u := range []struct {
		size int64
		name string
	}{{1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d %s", n/u.size, u.name)
		}
	}
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
