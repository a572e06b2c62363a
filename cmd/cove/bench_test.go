package main

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cove-sh/cove/internal/llmtest"
	"github.com/cove-sh/cove/internal/testimage"
	"github.com/cove-sh/cove/internal/testregistry"
	"github.com/cove-sh/cove/workspace"
)

// BenchmarkAgentIdleRSS measures the memory of an idle `cove agent`: the
// real binary, its conversation open in a workspace, waiting at the
// prompt (resident set, VmRSS, in MB; the workspace's processes not
// counted: they are the container's).
//
//	export $(scripts/registry.sh start | grep COVE_)
//	go test ./cmd/cove -run '^$' -bench AgentIdleRSS -benchtime 3x
func BenchmarkAgentIdleRSS(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	img, err := testimage.Layered()
	if err != nil {
		b.Fatal(err)
	}
	ref := testregistry.Push(b, testregistry.Addr(b), img)
	srv := llmtest.New(b)
	root, project := b.TempDir(), b.TempDir()
	defer func() {
		rm, _, _ := coveProc(root, "rm", "-f", workspace.Name(project))
		rm.Run()
	}()
	var total float64
	for range b.N {
		cmd, _, errb := coveProc(root, "agent", "--image", ref, project)
		cmd.Env = append(cmd.Env, "COVE_BASE_URL="+srv.URL(), "COVE_MODEL=test-model")
		stdin, err := cmd.StdinPipe()
		if err != nil {
			b.Fatal(err)
		}
		cmd.Stdout = nil
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		banner, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil || !strings.HasPrefix(banner, "cove agent ·") {
			b.Fatalf("no banner: %q %v\n%s", banner, err, errb)
		}
		time.Sleep(300 * time.Millisecond) // settled at the prompt
		rss := vmRSS(b, cmd.Process.Pid)
		stdin.Close() // end of input: the chat ends
		if err := cmd.Wait(); err != nil {
			b.Fatalf("cove agent: %v\n%s", err, errb)
		}
		total += rss
	}
	b.ReportMetric(total/float64(b.N), "idle-RSS-MB")
}

// vmRSS is a process's resident set in MB.
func vmRSS(b *testing.B, pid int) float64 {
	s, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(s), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return float64(kb) / 1024
		}
	}
	b.Fatal("no VmRSS")
	return 0
}
