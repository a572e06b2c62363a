package build

import (
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// proxyArgs are the predefined proxy args of the Dockerfile reference,
// by their upper-case names: usable in RUN without an ARG line.
var proxyArgs = []string{"HTTP_PROXY", "HTTPS_PROXY", "FTP_PROXY", "NO_PROXY", "ALL_PROXY"}

// proxyEnv is the environment the build args give RUN for the proxy args,
// as BuildKit gives it: a value given under either case is set under
// both (of two given, the lower-case one wins, as BuildKit's sorted
// reading has it).
func proxyEnv(buildArgs map[string]string) []string {
	var env []string
	for _, name := range proxyArgs {
		v, ok := buildArgs[strings.ToLower(name)]
		if !ok {
			v, ok = buildArgs[name]
		}
		if ok && v != "" {
			env = append(env, name+"="+v, strings.ToLower(name)+"="+v)
		}
	}
	return env
}

// checkSignal accepts what STOPSIGNAL may name, as BuildKit checks it: a
// signal number, a name with or without SIG (SIGTERM, term), or a
// real-time one (SIGRTMIN+3, RTMAX-1).
func checkSignal(sig string) error {
	if n, err := strconv.Atoi(sig); err == nil {
		if n <= 0 {
			return fmt.Errorf("%s: not a signal number", sig)
		}
		return nil
	}
	name := strings.TrimPrefix(strings.ToUpper(sig), "SIG")
	if rest, ok := strings.CutPrefix(name, "RTMIN"); ok && rtOffset(rest, '+') {
		return nil
	}
	if rest, ok := strings.CutPrefix(name, "RTMAX"); ok && rtOffset(rest, '-') {
		return nil
	}
	if unix.SignalNum("SIG"+name) == 0 {
		return fmt.Errorf("%s: not a signal (give a name such as SIGTERM, or a number)", sig)
	}
	return nil
}

// rtOffset says whether s is "" or sign and a number, as after RTMIN.
func rtOffset(s string, sign byte) bool {
	if s == "" {
		return true
	}
	n, err := strconv.Atoi(s[1:])
	return s[0] == sign && err == nil && n >= 0 && n <= 30
}
