// Package procstat reads /proc/PID/stat, whose second field (the command
// name, in parentheses) may itself hold spaces and parentheses.
package procstat

import (
	"fmt"
	"os"
	"strings"
)

// Fields returns the fields of /proc/PID/stat that follow the command
// name: Fields[0] is field 3 of proc(5) (the state), Fields[1] the parent
// PID, Fields[3] the session, Fields[19] the start time.
func Fields(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	return strings.Fields(string(b[i+1:])), nil
}
