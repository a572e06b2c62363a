#!/bin/bash
# The IDE's numbers: warm start of `cove up` (exec to the first 200 of the
# IDE page at the printed URL) and the terminal's Go benchmarks (cat
# throughput and keystroke echo through the WebSocket and the proxy), each
# beside its floor. See scripts/bench/README.md.
#
# Usage: sudo scripts/bench/ide.sh           (as root: cove up starts a container)
#
# Environment:
#   RUNS=20             timed warm starts (after WARMUP untimed ones)
#   WARMUP=2            untimed warm starts after the one that creates the workspace
#   CAT_RUNS=3          cats of the 100 MiB file per throughput benchmark (-benchtime Nx)
#   KEYS=2000           keystrokes per echo benchmark (-benchtime Nx)
#   PAGE_RUNS=10        page loads in headless Chromium (after one untimed)
#   BENCH_OUT           results file (default scripts/bench/results/ide-latest.md)
#   COVE_IDE_REGISTRY_STATE
#                       state dir of scripts/registry.sh (default
#                       /tmp/cove-ide-bench-registry); stopped at the end
#   CRANE               crane binary (default: crane in PATH, else ~/go/bin/crane)
#
# The markdown report goes to stdout and to BENCH_OUT; progress to stderr.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
runs=${RUNS:-20}
warmup=${WARMUP:-2}
cat_runs=${CAT_RUNS:-3}
keys=${KEYS:-2000}
out_md=${BENCH_OUT:-$here/results/ide-latest.md}
reg_state=${COVE_IDE_REGISTRY_STATE:-/tmp/cove-ide-bench-registry}
target_start_ms=300
target_api_ms=150 # issue 27: a warm `cove up` to the workspace API answering
target_mbps=200
target_echo_us=2000

log() { printf 'ide.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

for v in RUNS CAT_RUNS KEYS; do
	case ${!v:-1} in '' | *[!0-9]* | 0) die "$v must be a positive integer, not '${!v}'" ;; esac
done
case $warmup in '' | *[!0-9]*) die "WARMUP must be a non-negative integer, not '$warmup'" ;; esac
[ "$(id -u)" = 0 ] || die "must run as root (cove up starts a container: namespaces, cgroups)"

# ------------------------------------------------------------ tools

# shellcheck disable=SC1091 # scripts/bench/lib.sh, checked on its own
. "$here/lib.sh"
need python3 python3
need curl curl
[ -x /usr/bin/docker-registry ] || need docker-registry docker-registry
[ -x /bin/busybox ] || { apt-get install -y -q busybox-static >&2 || die "apt-get install busybox-static failed"; }
need go "golang (or a Go toolchain in PATH) to build cove"
crane=$(find_crane) || exit 1

tmp=$(mktemp -d /tmp/cove-bench-ide.XXXXXX)
cove=$tmp/cove
export COVE_ROOT=$tmp/coveroot
rootfs=$tmp/rootfs
project=$tmp/project
registry() { COVE_REGISTRY_STATE=$reg_state "$repo/scripts/registry.sh" "$@"; }

# workspaces: the names of every container under our COVE_ROOT.
workspaces() {
	"$cove" ps --all --json 2>/dev/null | python3 -c '
import json, sys
for c in json.load(sys.stdin) or []:
    print(c["name"])' 2>/dev/null || true
}
cleanup() {
	local w
	if [ -x "$cove" ]; then
		for w in $(workspaces); do "$cove" rm -f "$w" >/dev/null 2>&1 || true; done
	fi
	registry stop >/dev/null 2>&1 || true
	unmount_under "$tmp"
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cove_rev=$(build_cove "$repo" "$cove") || exit 1

# ------------------------------------------------------------ the image

# As start.sh: Debian's static busybox and its applets, one layer.
busybox_layer "$rootfs" "$tmp/layer.tar.gz"

reg_env=$(registry start) || die "scripts/registry.sh start failed"
reg=$(printf '%s\n' "$reg_env" | sed -n 's/^COVE_TEST_REGISTRY=//p')
[ -n "$reg" ] || die "scripts/registry.sh start printed no COVE_TEST_REGISTRY= line"
ref=$reg/bench/busybox:latest
push_layer "$crane" "$tmp/layer.tar.gz" "$ref"
log "cove pull $ref"
digest=$("$cove" pull -q "$ref" | tail -n1) || die "cove pull -q $ref failed"
case $digest in sha256:*) ;; *) die "cove pull printed '$digest', not a digest" ;; esac

mkdir -p "$project"
echo 'hello from the IDE benchmark' >"$project/README.md"

# ------------------------------------------------------------ warm start

# The timer: a small Go program (stdlib only), so that the clock starts at
# the exec of cove and stops at the 200, without a shell or curl between.
mkdir -p "$tmp/warmstart"
cat >"$tmp/warmstart/go.mod" <<'EOF'
module warmstart

go 1.22
EOF
cat >"$tmp/warmstart/main.go" <<'EOF'
// warmstart COVE RUNS WARMUP ARGS...: runs `COVE ARGS...` (cove up
// --no-browser …) once to create the workspace, WARMUP times untimed,
// then RUNS times timed; each time from the exec to the first 200 of the
// IDE page at the URL it prints (token in the URL, as a browser opens
// it), and on to the first answer of the workspace's own server through
// the proxy (GET /api/tree, as the page's first call), then Ctrl-C
// (SIGINT) and the wait for its exit. After the last run's answer it
// waits 3 s (the IDE server sheds its start's pages after 2) and reads
// the resident set of the workspace's IDE server.
// Prints one line a run: "create|warmup|run MS_URL MS_200 MS_STOP GETS MS_API RSS_KB".
package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

var urlLine = regexp.MustCompile(`^http://127\.0\.0\.1:\d+/\?token=[0-9a-f]{48}\n$`)

// stderrOf is what cove wrote to its stderr file so far.
type stderrOf struct{ f *os.File }

func (s stderrOf) String() string {
	b, _ := os.ReadFile(s.f.Name())
	return strings.TrimSpace(string(b))
}

func ms(d time.Duration) string { return strconv.FormatFloat(float64(d.Nanoseconds())/1e6, 'f', 2, 64) }

// ideServerRSS is the largest VmRSS (KB) of a process running `cove ide
// serve` on this machine (the benchmark's one workspace), 0 if none.
func ideServerRSS() int {
	rss := 0
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		cmd, err := os.ReadFile("/proc/" + p.Name() + "/cmdline")
		if err != nil || !strings.Contains(string(cmd), "\x00ide\x00serve\x00") {
			continue
		}
		st, _ := os.ReadFile("/proc/" + p.Name() + "/status")
		for _, l := range strings.Split(string(st), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
				if n, _ := strconv.Atoi(f[1]); n > rss {
					rss = n
				}
			}
		}
	}
	return rss
}

// untilOK GETs url (with the token's header) every 1 ms until a 200,
// and returns the body.
func untilOK(client *http.Client, url, token string, start time.Time, gets *int) ([]byte, error) {
	last := "nothing"
	for {
		*gets++
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("X-Cove-Token", token)
		}
		resp, gerr := client.Do(req)
		if gerr == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return b, nil
			}
			last = fmt.Sprintf("%s: %.200q", resp.Status, b)
		} else {
			last = gerr.Error()
		}
		if time.Since(start) > 30*time.Second {
			return nil, fmt.Errorf("no 200 from %s within 30 s (%d GETs; last: %s)", url, *gets, last)
		}
		time.Sleep(time.Millisecond)
	}
}

func once(cove string, args []string, measureRSS bool) (tURL, tOK, tAPI, tStop time.Duration, gets, rss int, err error) {
	cmd := exec.Command(cove, args...)
	// stderr to a file: nothing to copy, nothing for Wait to wait for.
	errf, err := os.CreateTemp("", "warmstart-stderr")
	if err != nil {
		return
	}
	defer os.Remove(errf.Name())
	defer errf.Close()
	cmd.Stderr = errf
	stderr := stderrOf{errf}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return
	}
	start := time.Now()
	if err = cmd.Start(); err != nil {
		return
	}
	exited := make(chan error, 1)
	stop := func() {
		s := time.Now()
		cmd.Process.Signal(syscall.SIGINT)
		select {
		case werr := <-exited:
			tStop = time.Since(s)
			if werr != nil && err == nil {
				err = fmt.Errorf("cove up after SIGINT: %v; stderr: %s", werr, stderr.String())
			}
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-exited
			if err == nil {
				err = fmt.Errorf("cove up did not exit within 30 s of SIGINT; stderr: %s", stderr.String())
			}
		}
	}
	line, rerr := bufio.NewReader(out).ReadString('\n')
	tURL = time.Since(start)
	go func() { exited <- cmd.Wait() }() // nothing more comes on stdout
	defer stop()
	if rerr != nil || !urlLine.MatchString(line) {
		return tURL, 0, 0, 0, 0, 0, fmt.Errorf("first stdout line %q (%v), want the URL; stderr: %s", line, rerr, stderr.String())
	}
	url := strings.TrimSpace(line)
	client := &http.Client{Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	b, gerr := untilOK(client, url, "", start, &gets)
	if gerr != nil {
		return tURL, 0, 0, 0, gets, 0, fmt.Errorf("%v; stderr: %s", gerr, stderr.String())
	}
	tOK = time.Since(start)
	if !strings.Contains(string(b), "<title>Cove</title>") {
		return tURL, tOK, 0, 0, gets, 0, fmt.Errorf("200 from %s, but not the IDE page: %.200q", url, b)
	}
	base, token, _ := strings.Cut(url, "/?token=")
	b, gerr = untilOK(client, base+"/api/tree?path=.", token, start, &gets)
	if gerr != nil {
		return tURL, tOK, 0, 0, gets, 0, fmt.Errorf("the workspace's API: %v; stderr: %s", gerr, stderr.String())
	}
	tAPI = time.Since(start)
	if !strings.Contains(string(b), "README.md") {
		return tURL, tOK, tAPI, 0, gets, 0, fmt.Errorf("/api/tree answered without the project's README.md: %.200q", b)
	}
	if measureRSS {
		time.Sleep(3 * time.Second)
		rss = ideServerRSS()
	}
	return tURL, tOK, tAPI, 0, gets, rss, nil
}

func main() {
	cove := os.Args[1]
	runs, _ := strconv.Atoi(os.Args[2])
	warmup, _ := strconv.Atoi(os.Args[3])
	args := os.Args[4:]
	for i := -1; i < warmup+runs; i++ {
		kind := "run"
		if i < 0 {
			kind = "create"
		} else if i < warmup {
			kind = "warmup"
		}
		tURL, tOK, tAPI, tStop, gets, rss, err := once(cove, args, i == warmup+runs-1)
		if err != nil {
			fmt.Fprintf(os.Stderr, "warmstart: %s %d: %v\n", kind, i+1, err)
			os.Exit(1)
		}
		fmt.Println(kind, ms(tURL), ms(tOK), ms(tStop), gets, ms(tAPI), rss)
	}
}
EOF
(cd "$tmp/warmstart" && CGO_ENABLED=0 GOFLAGS='' go build -o "$tmp/warmstart.bin" .) || die "building the timer failed"

up_args=(up --no-browser --image "$ref" "$project")
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
log "warm start: cove ${up_args[*]}: 1 run that creates the workspace, $warmup warm-up, $runs timed"
"$tmp/warmstart.bin" "$cove" "$runs" "$warmup" "${up_args[@]}" >"$tmp/warm.txt" || die "the warm-start runs failed (see above)"
[ "$(grep -c '^run ' "$tmp/warm.txt")" = "$runs" ] || die "the timer printed $(grep -c '^run ' "$tmp/warm.txt") timed runs, not $runs"
# The same with --net none, on a project of its own (a workspace keeps
# the network it was made with): the private network's share.
mkdir -p "$project-nonet"
cp "$project/README.md" "$project-nonet/"
log "warm start: the same with --net none"
"$tmp/warmstart.bin" "$cove" "$runs" "$warmup" up --no-browser --net none --image "$ref" "$project-nonet" >"$tmp/warm-nonet.txt" || die "the --net none warm-start runs failed (see above)"
left=$(workspaces | while read -r w; do "$cove" ps --json | grep -q "\"$w\"" && echo "$w"; done || true)
notes=()
[ -z "$left" ] || notes+=("**cove up**: after the last SIGINT, \`cove ps\` still lists the workspace as running: $left")

# stats COLUMN [FILE]: "median p90 min max" of the timed runs' COLUMN (2:
# URL printed, 3: 200, 4: stop, 6: the workspace's API), nearest-rank
# percentiles.
stats() {
	awk -v c="$1" '$1 == "run" { print $c }' "${2:-$tmp/warm.txt}" | sort -g | awk '
		{ v[NR] = $1 }
		END {
			r50 = int(NR * 0.5); if (r50 < NR * 0.5) r50++
			r90 = int(NR * 0.9); if (r90 < NR * 0.9) r90++
			printf "%.1f %.1f %.1f %.1f\n", v[r50], v[r90], v[1], v[NR]
		}'
}
read -r ok_med ok_p90 ok_min ok_max <<<"$(stats 3)"
read -r url_med url_p90 url_min url_max <<<"$(stats 2)"
read -r stop_med stop_p90 stop_min stop_max <<<"$(stats 4)"
read -r api_med api_p90 api_min api_max <<<"$(stats 6)"
read -r apin_med apin_p90 apin_min apin_max <<<"$(stats 6 "$tmp/warm-nonet.txt")"
ide_rss=$(awk '$1 == "run" { r = $7 } END { print r + 0 }' "$tmp/warm.txt")
[ "$ide_rss" -gt 0 ] || notes+=("**IDE server RSS**: no \`cove ide serve\` process found after the last run's answer")
create_ms=$(awk '$1 == "create" { print $3 }' "$tmp/warm.txt")
gets_max=$(awk '$1 == "run" && $5 > m { m = $5 } END { print m + 0 }' "$tmp/warm.txt")
log "warm start: median $ok_med ms, p90 $ok_p90 ms, min $ok_min ms (URL printed after $url_med ms); the workspace's API answers at $api_med ms ($apin_med ms with --net none); the IDE server holds $ide_rss KB"

# ------------------------------------------------------------ page load

# A workspace served once more, for Chromium to load the page from
# (ide/web/test/pageload.mjs, playwright-core from ide/web/node_modules).
page_runs=${PAGE_RUNS:-10}
page_dcl="" page_tree="" page_prompt=""
if command -v node >/dev/null && [ -x /usr/bin/chromium ] && [ -d "$repo/ide/web/node_modules/playwright-core" ]; then
	"$cove" "${up_args[@]}" >"$tmp/page-up.out" 2>"$tmp/page-up.err" &
	page_up=$!
	for _ in $(seq 100); do [ -s "$tmp/page-up.out" ] && break; sleep 0.1; done
	page_url=$(head -n1 "$tmp/page-up.out")
	log "page load: $page_runs loads of $page_url in headless Chromium"
	node "$repo/ide/web/test/pageload.mjs" "$page_url" "$page_runs" >"$tmp/page.txt" || notes+=("**page load**: pageload.mjs failed")
	kill -INT "$page_up"
	wait "$page_up" || true
	# pmedian COLUMN: the median of a column of page.txt.
	pmedian() { awk -v c="$1" '$1 == "run" { print $c }' "$tmp/page.txt" | sort -g | awk '{ v[NR] = $1 } END { if (NR) { r = int(NR * 0.5); if (r < NR * 0.5) r++; print v[r] } }'; }
	page_dcl=$(pmedian 2) page_tree=$(pmedian 3) page_prompt=$(pmedian 4)
else
	notes+=("**page load** not measured: it needs node, /usr/bin/chromium and ide/web/node_modules (scripts/build-web.sh)")
fi
# The UI's weight: what loads at once (app.js and the chunks it imports,
# app.css) and what loads on demand, raw and as served (gzip).
eager="$repo/ide/web/dist/app.js $repo/ide/web/dist/app.css $(grep -o 'from"\./chunks/[^"]*"' "$repo/ide/web/dist/app.js" | sed 's|from"\./|'"$repo"'/ide/web/dist/|; s|"$||' | sort -u | tr '\n' ' ')"
kb() { cat "$@" | wc -c | awk '{ printf "%.0f", $1 / 1024 }'; }
gzkb() { for f in "$@"; do cat "$f.gz"; done | wc -c | awk '{ printf "%.0f", $1 / 1024 }'; }
# shellcheck disable=SC2086 # a list of paths without spaces
eager_kb=$(kb $eager) eager_gz=$(gzkb $eager)
lazy=$(find "$repo/ide/web/dist/chunks" -name '*.js' | sort | tr '\n' ' ')
# shellcheck disable=SC2086
all_kb=$(kb $eager $lazy) all_gz=$(gzkb $eager $lazy)

# ------------------------------------------------------------ Go benchmarks

log "go test -c ./ide"
(cd "$repo" && go test -c -o "$tmp/ide.test" ./ide) || die "go test -c ./ide failed"
bench() { (cd "$repo/ide" && "$tmp/ide.test" -test.run '^$' -test.bench "$1" -test.benchtime "$2" -test.count 1) | tee -a "$tmp/bench.txt" >&2; }
: >"$tmp/bench.txt"
log "throughput: cat of 100 MiB, $cat_runs× each"
bench '^(BenchmarkTerminalThroughput|BenchmarkPTYFloor)$' "${cat_runs}x" || die "the throughput benchmarks failed"
log "echo: $keys keystrokes each"
bench '^(BenchmarkTerminalEcho|BenchmarkPTYEcho)$' "${keys}x" || die "the echo benchmarks failed"
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# metric BENCH UNIT: the value before UNIT on BENCH's line.
metric() {
	awk -v b="$1" -v u="$2" '$1 ~ "^" b "(-[0-9]+)?$" { for (i = 2; i <= NF; i++) if ($i == u) print $(i - 1) }' "$tmp/bench.txt" | tail -n1
}
term_mbps=$(metric BenchmarkTerminalThroughput MB/s)
floor_mbps=$(metric BenchmarkPTYFloor MB/s)
term_p50=$(metric BenchmarkTerminalEcho p50-µs) term_p99=$(metric BenchmarkTerminalEcho p99-µs)
floor_p50=$(metric BenchmarkPTYEcho p50-µs) floor_p99=$(metric BenchmarkPTYEcho p99-µs)
frame_b=$(metric BenchmarkTerminalThroughput B/frame) read_b=$(metric BenchmarkPTYFloor B/read)
for v in term_mbps floor_mbps term_p50 term_p99 floor_p50 floor_p99 frame_b read_b; do
	[ -n "${!v}" ] || die "no $v in the benchmarks' output"
done

# ------------------------------------------------------------ report

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f×", a / b }'; }
# verdict OK: met / not met
verdict() { if [ "$1" = 1 ]; then echo "**met**"; else echo "**not met**"; fi; }
lt() { awk -v a="$1" -v b="$2" 'BEGIN { print (a < b) ? 1 : 0 }'; }

report() {
	echo "# IDE: warm start and terminal"
	echo
	echo "- Date: $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "- Host: $(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)), $(awk '/MemTotal/ { printf "%.0f GB", $2 / 1048576 }' /proc/meminfo) RAM, Linux $(uname -r), $(sed -n 's/^PRETTY_NAME="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' /etc/os-release); load average $load_before before, $load_after after; other jobs may have been running"
	echo "- cove $cove_rev (static, CGO_ENABLED=0, $(go version | awk '{ print $3 }')); image \`${ref#*/}\`: Debian's busybox-static and its applets, one layer, from a local registry (scripts/registry.sh), pulled before timing"
	echo
	echo "| what | cove | floor | × floor | target | |"
	echo "|---|---:|---:|---:|---|---|"
	echo "| warm start: exec of \`cove up --no-browser\` → first 200 of the IDE page, median ($runs runs) | $ok_med ms | | | < $target_start_ms ms | $(verdict "$(lt "$ok_med" "$target_start_ms")") |"
	echo "| warm start, p90 / min / max | $ok_p90 / $ok_min / $ok_max ms | | | | |"
	echo "| warm start → the workspace's own server answers through the proxy (GET /api/tree), median: private network / \`--net none\` | $api_med / $apin_med ms | | | ≤ $target_api_ms ms | $(verdict "$(lt "$api_med" "$((target_api_ms + 1))")") / $(verdict "$(lt "$apin_med" "$((target_api_ms + 1))")") |"
	echo "| the same, p90 / min / max: private network; \`--net none\` | $api_p90 / $api_min / $api_max; $apin_p90 / $apin_min / $apin_max ms | | | | |"
	echo "| the workspace's IDE server (\`cove ide serve\`), resident 3 s after its first answer (VmRSS) | $ide_rss KB | | | | |"
	echo "| terminal throughput: cat of a 100 MiB file, WebSocket through the proxy, browser-like acks | $term_mbps MB/s | $floor_mbps MB/s | $(ratio "$term_mbps" "$floor_mbps") | ≥ $target_mbps MB/s | $(verdict "$(lt "$target_mbps" "$term_mbps")") |"
	echo "| keystroke echo round trip, p50 | $term_p50 µs | $floor_p50 µs | $(ratio "$term_p50" "$floor_p50") | < $target_echo_us µs | $(verdict "$(lt "$term_p50" "$target_echo_us")") |"
	echo "| keystroke echo round trip, p99 | $term_p99 µs | $floor_p99 µs | $(ratio "$term_p99" "$floor_p99") | | |"
	if [ -n "$page_prompt" ]; then
		echo "| page load in headless Chromium (software GL): navigation → the shell's prompt on screen, median ($page_runs loads) | $page_prompt ms | | | | |"
		echo "| page load: → DOMContentLoaded / → the file tree | $page_dcl / $page_tree ms | | | | |"
	fi
	echo "| the UI loaded at once (app.js, app.css and the chunks app.js imports), raw / gzipped as served | $eager_kb / $eager_gz KiB | | | | |"
	echo "| all of the UI, the languages, merge view and markdown loaded on demand included | $all_kb / $all_gz KiB | | | | |"
	echo
	echo "Floors: throughput, the same cat on a bare PTY (creack/pty) read in a loop of 32 KiB reads (× floor: cove's MB/s / the floor's, 1.00× = as fast as the PTY itself); echo, the same program on a bare PTY, one byte written to the master and read back (× floor: cove's µs / the floor's). There is no ttyd or gotty in Debian to compare with. The bare PTY gave $read_b bytes a read (Linux's n_tty buffer holds 4 KiB); the terminal's output frames carried $frame_b bytes on average (at most 32 KiB a frame)."
	echo
	echo "Warm start in parts (medians): the URL printed after $url_med ms (p90 $url_p90, min $url_min, max $url_max), the 200 at $ok_med ms; Ctrl-C (SIGINT) to the exit of \`cove up\`, the workspace stopped: $stop_med ms (p90 $stop_p90, min $stop_min, max $stop_max). The first start, which creates the workspace: $create_ms ms. At most $gets_max GET(s) a run until the 200."
	echo
	echo "How it is measured:"
	echo
	echo "- warm start (\`scripts/bench/ide.sh\`, a small Go timer): the image is in cove's store and the workspace was created by a first \`cove up\`, followed by $warmup untimed warm-up run(s); each timed run execs \`cove up --no-browser --image IMAGE DIR\`, reads the URL line from its stdout, GETs it (the token in the URL, as a browser opens it) every 1 ms until a 200 whose page is the IDE's, then \`/api/tree?path=.\` with the token's header until a 200 that lists the project's file (the workspace's own server, through the proxy, as the page's first call; the same again on a second project with \`--net none\`), then sends SIGINT and waits until \`cove up\` has stopped the workspace and exited (exit status 0 checked). The clock runs from the exec to the 200."
	echo "- throughput (\`BenchmarkTerminalThroughput\`, $cat_runs timed cat(s), after one untimed): the terminals WebSocket handler on a Unix socket behind the real Proxy on a loopback port (as a workspace serves it), a new terminal per cat running \`sh -c 'stty -echo && printf R && head -c1 >/dev/null && exec cat FILE'\` (cooked output: each \\n goes out as \\r\\n); the clock runs from the keystroke that starts cat to the exit frame. The client reads frames and acks as ide/web/src/terminal.js does (once 32 KiB beyond its last ack, and 50 ms after the last frame); it fails unless the output arrives in order without gaps and its byte count and CRC-32 are those of the file with \\r\\n line ends. MB/s: 10^6 bytes of the file a second. \`BenchmarkPTYFloor\`: the same program and checks on a bare PTY."
	echo "- echo (\`BenchmarkTerminalEcho\`, $keys keystrokes): one terminal running \`sh -c 'stty raw -echo && printf R && exec cat'\` (cat writes each byte back, as a line editor in raw mode does; the PTY does not echo); a keystroke is an input frame of one byte, timed until an output frame brings exactly that byte back; p50 and p99 by nearest rank. \`BenchmarkPTYEcho\`: the same on a bare PTY."
	echo "- rerun: \`sudo RUNS=$runs CAT_RUNS=$cat_runs KEYS=$keys scripts/bench/ide.sh\`; the Go benchmarks alone: \`go test ./ide -run '^\$' -bench 'Throughput|PTYFloor' -benchtime ${cat_runs}x\` and \`go test ./ide -run '^\$' -bench Echo -benchtime ${keys}x\`"
	echo
	echo "Go benchmark output:"
	echo
	echo '```'
	grep '^Benchmark' "$tmp/bench.txt"
	echo '```'
	if [ ${#notes[@]} -gt 0 ]; then
		echo
		echo "Problems seen:"
		echo
		for n in "${notes[@]}"; do echo "- $n"; done
	fi
}

mkdir -p "$(dirname "$out_md")"
report | tee "$out_md"
log "report written to $out_md"
