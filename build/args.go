package build

import (
	"errors"
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

// checkBuiltinArgs refuses the BuildKit built-in build args that ask for
// what cove build does not make. The others: BUILDKIT_SYNTAX
// (checkSyntax), BUILDKIT_DOCKERFILE_CHECK (newLinter),
// BUILDKIT_SANDBOX_HOSTNAME (RUN's hostname), BUILDKIT_CACHE_MOUNT_NS
// (cache mounts' ids) and SOURCE_DATE_EPOCH are done as BuildKit does
// them; BUILDKIT_CONTEXT_KEEP_GIT_DIR and BUILDKIT_GIT_ADVICE concern a
// git context, which cove build does not take, and BUILDKIT_BUILD_NAME
// names the build in buildx's history, which cove keeps none of.
func checkBuiltinArgs(args map[string]string) error {
	if v, ok := args["BUILDKIT_INLINE_CACHE"]; ok && isTrue(v) {
		return errors.New("--build-arg BUILDKIT_INLINE_CACHE: cove build writes no cache metadata into an image (its step cache stays on this machine); drop the build arg")
	}
	if v, ok := args["BUILDKIT_MULTI_PLATFORM"]; ok && isTrue(v) {
		return errors.New("--build-arg BUILDKIT_MULTI_PLATFORM: cove build makes one platform's image, never an index of several; drop the build arg")
	}
	return nil
}

// isTrue reads a boolean build arg as BuildKit does (strconv.ParseBool);
// what does not parse is false.
func isTrue(v string) bool {
	b, err := strconv.ParseBool(v)
	return err == nil && b
}
