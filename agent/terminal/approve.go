package terminal

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/cove-sh/cove/agent"
	"github.com/cove-sh/cove/internal/termtext"
)

// Approve is Agent.Approve for a run with no chat (cove agent -p): it asks
// on the controlling terminal (/dev/tty, as standard input and output may
// be pipes), the edit's diff first, coloured unless NO_COLOR is set. With
// no terminal it refuses, telling the model why, and counts the refusal in
// unapproved, so that the caller can say the answer is incomplete.
func Approve(unapproved *int) func(context.Context, *agent.Action) agent.Decision {
	return func(ctx context.Context, act *agent.Action) agent.Decision {
		tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
		if err != nil {
			*unapproved++
			return agent.Decision{Reason: "no one can approve it here (run cove agent in a terminal, or with --yes)"}
		}
		defer tty.Close()
		if act.Diff != "" {
			fmt.Fprint(tty, colourDiff(termtext.Visible(act.Diff), os.Getenv("NO_COLOR") == ""))
		}
		fmt.Fprint(tty, allowQuestion(act))
		line, _ := bufio.NewReader(tty).ReadString('\n')
		return allowAnswer(line, act)
	}
}

// allowQuestion is the terminal's approval question for act: y or n, or,
// for an action that may be allowed for the session, a number for which.
func allowQuestion(act *agent.Action) string {
	q := termtext.Visible(act.Summary) + " — allow? [y/N"
	for i, k := range act.Always {
		q += fmt.Sprintf(", %d: always %s", i+1, termtext.Visible(k))
	}
	return q + ", or say why not] "
}

// allowAnswer reads the answer to allowQuestion.
func allowAnswer(line string, act *agent.Action) agent.Decision {
	line = strings.TrimSpace(line)
	if strings.EqualFold(line, "y") || strings.EqualFold(line, "yes") {
		return agent.Decision{Approve: true}
	}
	for i, k := range act.Always {
		if line == fmt.Sprint(i+1) {
			return agent.Decision{Approve: true, Always: k}
		}
	}
	return agent.Decision{Reason: line}
}
