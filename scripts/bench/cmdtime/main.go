// Command cmdtime times command lines side by side (see scripts/bench/latency.sh):
// round after round, each command once in turn, so that a machine whose load
// moves during the run moves every row alike. Each round takes the commands
// in a new random order: in a fixed one, a row always ran just after the
// same neighbour, and what that one left running (podman's cleanup after
// podman exec) slowed it: cove exec and cove --help read 1.4× slower than
// the same binary's rows later in the round. It prints, per command, a tab-
// separated line: label, runs, failed runs, median and min wall time (ms),
// median CPU time (user+system of the command and its children, ms) and
// median peak RSS (KB, of the largest process).
//
//	cmdtime RUNS WARMUP LABEL=[PREPARE ::: ]COMMAND... (each through sh -c)
//
// PREPARE, when given, runs untimed just before each run of COMMAND (the
// container a `cove stop` row stops); a run whose PREPARE fails counts as
// failed.
package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type row struct {
	label, prep, cmd string
	wall, cpu        []float64
	rss              []float64
	failed           int
	firstErr         string
}

func main() {
	if len(os.Args) < 4 {
		fmt.Fprintln(os.Stderr, "usage: cmdtime RUNS WARMUP LABEL=COMMAND...")
		os.Exit(2)
	}
	runs, err1 := strconv.Atoi(os.Args[1])
	warm, err2 := strconv.Atoi(os.Args[2])
	if err1 != nil || err2 != nil || runs < 1 || warm < 0 {
		fmt.Fprintln(os.Stderr, "cmdtime: RUNS and WARMUP must be numbers")
		os.Exit(2)
	}
	var rows []*row
	for _, a := range os.Args[3:] {
		l, c, ok := strings.Cut(a, "=")
		if !ok {
			fmt.Fprintf(os.Stderr, "cmdtime: %q is not LABEL=COMMAND\n", a)
			os.Exit(2)
		}
		r := &row{label: l, cmd: c}
		if p, c, ok := strings.Cut(c, " ::: "); ok {
			r.prep, r.cmd = p, c
		}
		rows = append(rows, r)
	}
	for i := 0; i < warm+runs; i++ {
		for _, j := range rand.Perm(len(rows)) {
			once(rows[j], i >= warm)
		}
	}
	for _, r := range rows {
		fmt.Printf("%s\t%d\t%d\t%.2f\t%.2f\t%.2f\t%.0f\t%s\n", r.label, len(r.wall), r.failed,
			median(r.wall), slices.Min(append(r.wall, 0)[:max(len(r.wall), 1)]), median(r.cpu), median(r.rss), r.firstErr)
	}
}

// once runs r's command; the shell's own exec is in the time, as it is
// for every row.
func once(r *row, timed bool) {
	if r.prep != "" {
		if out, err := exec.Command("/bin/sh", "-c", r.prep).CombinedOutput(); err != nil {
			if timed {
				r.failed++
				if r.firstErr == "" {
					r.firstErr = strings.ReplaceAll(strings.TrimSpace("prepare: "+err.Error()+": "+string(out)), "\n", " ")
				}
			}
			return
		}
	}
	cmd := exec.Command("/bin/sh", "-c", "exec "+r.cmd)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	if !timed {
		return
	}
	if err != nil {
		r.failed++
		if r.firstErr == "" {
			r.firstErr = strings.ReplaceAll(strings.TrimSpace(err.Error()+": "+stderr.String()), "\n", " ")
		}
		return
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	r.wall = append(r.wall, float64(wall.Microseconds())/1000)
	r.cpu = append(r.cpu, float64(cpu.Microseconds())/1000)
	r.rss = append(r.rss, float64(ru.Maxrss))
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(v))
	return s[len(s)/2]
}
