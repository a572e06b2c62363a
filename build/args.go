package build

import (
	"strings"
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
