package build

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// entry is a history entry as a test expects it.
type entry struct {
	createdBy string
	empty     bool
}

// checkHistory compares the last len(want) entries of h with want, each
// with BuildKit's comment.
func checkHistory(t *testing.T, h []v1.History, want []entry) {
	t.Helper()
	if len(h) < len(want) {
		t.Fatalf("%d history entries, want at least %d: %+v", len(h), len(want), h)
	}
	got := h[len(h)-len(want):]
	for i, w := range want {
		g := got[i]
		if g.CreatedBy != w.createdBy || g.EmptyLayer != w.empty || g.Comment != historyComment {
			t.Errorf("entry %d: %q empty=%v comment %q, want %q empty=%v", i, g.CreatedBy, g.EmptyLayer, g.Comment, w.createdBy, w.empty)
		}
	}
}

// TestHistoryAsBuildKit: each instruction's history entry has BuildKit's
// created_by (dockerfile2llb's words: COPY and ADD without --from, with
// their heredocs as <<NAME and # buildkit; config instructions with Go's
// formatting of what they set), its comment, and empty_layer for what
// changes only the config. ONBUILD and FROM leave none; the trigger an
// ONBUILD left runs, and is recorded, in the stage built on it.
func TestHistoryAsBuildKit(t *testing.T) {
	t.Parallel()
	b := testBuild{dockerfile: "FROM scratch AS base\nARG A=1\nARG NOVAL\nENV E=x F=\"y z\"\nLABEL l=v\n" +
		"WORKDIR /w\nWORKDIR /w\nCOPY --chmod=600 f ./\nADD --chmod=755 <<EOF /h\nhi\nEOF\n" +
		"EXPOSE 80 53/udp 8000-8001\nUSER 1000\nVOLUME /data\nSTOPSIGNAL SIGINT\nSHELL [\"/bin/bash\", \"-c\"]\n" +
		"HEALTHCHECK --interval=5s --retries=3 CMD [\"true\"]\nCMD echo $E\nENTRYPOINT [\"/app\"]\n" +
		"ONBUILD LABEL t=1\nMAINTAINER me\n" +
		"FROM base\nCOPY --from=base /h /h2\n",
		files: map[string]string{"f": "bytes"}}.mustRun(t)
	checkHistory(t, b.cf.History, []entry{
		{"ARG A=1", true},
		{"ARG NOVAL", true},
		{"ENV E=x F=y z", true},
		{"LABEL l=v", true},
		{"WORKDIR /w", false},
		// BuildKit makes a layer for this one too, empty; cove makes none.
		{"WORKDIR /w", true},
		{"COPY --chmod=600 f ./ # buildkit", false},
		{"ADD --chmod=755 <<EOF /h # buildkit", false},
		{"EXPOSE [53/udp 80/tcp 8000/tcp 8001/tcp]", true}, // the parser sorts them
		{"USER 1000", true},
		{"VOLUME [/data]", true},
		{"STOPSIGNAL SIGINT", true},
		{"SHELL [/bin/bash -c]", true},
		{"HEALTHCHECK {Test:[CMD true] Interval:5s Timeout:0s StartPeriod:0s StartInterval:0s Retries:3}", true},
		{`CMD ["/bin/bash" "-c" "echo $E"]`, true},
		{`ENTRYPOINT ["/app"]`, true},
		{"MAINTAINER me", true},
		{"LABEL t=1", true},
		{"COPY /h /h2 # buildkit", false},
	})
	if got := b.file(t, "h"); got != "hi\n" {
		t.Errorf("ADD <<EOF wrote %q, want \"hi\\n\"", got)
	}
	for p, want := range map[string]string{"h": "-rwxr-xr-x", "w/f": "-rw-------"} {
		if m := fileMode(t, b, p); m != want {
			t.Errorf("/%s: mode %s, want %s", p, m, want)
		}
	}
	if len(b.cf.Config.ExposedPorts) != 4 {
		t.Errorf("exposed %v, want 80/tcp 53/udp 8000/tcp 8001/tcp", b.cf.Config.ExposedPorts)
	}
}

// TestRunHistoryAsBuildKit: RUN's created_by is BuildKit's: the stage's
// ARGs as |N NAME=value (ENV's value where ENV set the name too; empty
// for an ARG without one, which is then in no RUN's environment), the
// shell and the command, # buildkit; a #! heredoc is a file the shell
// runs from /dev/pipes.
func TestRunHistoryAsBuildKit(t *testing.T) {
	t.Parallel()
	b := testBuild{busybox: true, dockerfile: "FROM busybox:test\nARG A=1\nARG B\nENV A=env\n" +
		"RUN echo \"${B-unset}\" > /b\nRUN <<EOF\n#!/bin/sh\necho \"$0\" > /script\nEOF\n"}.mustRun(t)
	checkHistory(t, b.cf.History, []entry{
		{"ARG A=1", true},
		{"ARG B", true},
		{"ENV A=env", true},
		{`RUN |2 A=env B= /bin/sh -c echo "${B-unset}" > /b # buildkit`, false},
		{"RUN |2 A=env B= /bin/sh -c /dev/pipes/EOF # buildkit", false},
	})
	if got := b.file(t, "b"); got != "unset\n" {
		t.Errorf("an ARG without a value is in RUN's environment: /b %q", got)
	}
	if got := b.file(t, "script"); got != "/dev/pipes/EOF\n" {
		t.Errorf("the #! heredoc ran as %q, want /dev/pipes/EOF", got)
	}
}

// TestProxyArgs: the predefined proxy args, given as build args, are in
// RUN's environment under both cases without an ARG line, and (unless an
// ARG declares them) in no history entry and no cache key: a new proxy
// password does not rebuild. Declared, they are build args as any other.
func TestProxyArgs(t *testing.T) {
	t.Parallel()
	df := "FROM busybox:test\nRUN env | grep -i _proxy= | sort > /proxies\n"
	args := func(host string) map[string]string {
		return map[string]string{"HTTP_PROXY": "http://u:pw@" + host + ":3128", "no_proxy": "localhost"}
	}
	dir := t.TempDir()
	b := testBuild{dir: dir, busybox: true, dockerfile: df, opts: Options{BuildArgs: args("one")}}.mustRun(t)
	want := "HTTP_PROXY=http://u:pw@one:3128\nNO_PROXY=localhost\nhttp_proxy=http://u:pw@one:3128\nno_proxy=localhost\n"
	if got := b.file(t, "proxies"); got != want {
		t.Errorf("RUN's proxy environment:\n%s\nwant\n%s", got, want)
	}
	for _, h := range b.cf.History {
		if strings.Contains(h.CreatedBy, "pw@") || strings.Contains(h.CreatedBy, "localhost") {
			t.Errorf("a proxy arg in the history: %q", h.CreatedBy)
		}
	}
	again := testBuild{dir: dir, busybox: true, dockerfile: df, opts: Options{BuildArgs: args("two")}}.mustRun(t)
	if again.res.Hits != again.res.Steps {
		t.Errorf("a new proxy rebuilt: %d of %d steps cached", again.res.Hits, again.res.Steps)
	}

	declared := "FROM busybox:test\nARG HTTP_PROXY\nRUN echo \"$HTTP_PROXY\" > /p\n"
	dir = t.TempDir()
	b = testBuild{dir: dir, busybox: true, dockerfile: declared, opts: Options{BuildArgs: args("one")}}.mustRun(t)
	checkHistory(t, b.cf.History, []entry{{`RUN |1 HTTP_PROXY=http://u:pw@one:3128 /bin/sh -c echo "$HTTP_PROXY" > /p # buildkit`, false}})
	again = testBuild{dir: dir, busybox: true, dockerfile: declared, opts: Options{BuildArgs: args("two")}}.mustRun(t)
	if again.res.Hits == again.res.Steps || again.file(t, "p") != "http://u:pw@two:3128\n" {
		t.Errorf("a declared proxy arg changed and the RUN was cached: %d of %d, /p %q", again.res.Hits, again.res.Steps, again.file(t, "p"))
	}
}

// TestArgScopes: the platform ARGs are in the global scope without an
// ARG line (FROM --platform=$BUILDPLATFORM, a global ARG's default), and
// in a stage only once redeclared; a stage's ARGs are its child stage's.
func TestArgScopes(t *testing.T) {
	t.Parallel()
	b := testBuild{dockerfile: "ARG G=${TARGETOS}-x\nFROM --platform=$BUILDPLATFORM scratch AS a\n" +
		"ARG TARGETARCH\nARG G\nARG OWN=own\nENV T=$TARGETARCH B=x${BUILDOS}x G=$G\n" +
		"FROM a\nENV I=$TARGETARCH O=$OWN\n"}.mustRun(t)
	env := envMap(b.cf.Config.Env)
	want := map[string]string{"T": runtime.GOARCH, "B": "xx", "G": "linux-x", "I": runtime.GOARCH, "O": "own"}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s=%q, want %q (env %q)", k, env[k], v, b.cf.Config.Env)
		}
	}
}

// TestLabelOption: Options.Labels (--label) are on the final image, over
// the Dockerfile's, with no history entry of their own, as in BuildKit.
func TestLabelOption(t *testing.T) {
	t.Parallel()
	b := testBuild{dockerfile: "FROM scratch\nLABEL l=file k=kept\n",
		opts: Options{Labels: map[string]string{"l": "flag", "a": "1"}}}.mustRun(t)
	want := map[string]string{"l": "flag", "k": "kept", "a": "1"}
	if fmt.Sprint(b.cf.Config.Labels) != fmt.Sprint(want) {
		t.Errorf("labels %v, want %v", b.cf.Config.Labels, want)
	}
	if len(b.cf.History) != 1 {
		t.Errorf("history %+v, want the LABEL line's entry only", b.cf.History)
	}
}

// TestBuiltinArgs: BuildKit's built-in build args that change a RUN do
// here too: BUILDKIT_SANDBOX_HOSTNAME is RUN's hostname (and in its cache
// key), BUILDKIT_CACHE_MOUNT_NS gives cache mounts a namespace of their
// own.
func TestBuiltinArgs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	df := "FROM busybox:test\nRUN hostname > /h\nRUN --mount=type=cache,id=c,target=/c ls /c > /seen; touch /c/mark\n"
	build := func(host, ns string, noCache bool) *built {
		args := map[string]string{"BUILDKIT_SANDBOX_HOSTNAME": host, "BUILDKIT_CACHE_MOUNT_NS": ns}
		return testBuild{dir: dir, busybox: true, dockerfile: df, opts: Options{BuildArgs: args, NoCache: noCache}}.mustRun(t)
	}
	if b := build("box", "a", false); b.file(t, "h") != "box\n" || b.file(t, "seen") != "" {
		t.Errorf("hostname %q, a new cache held %q", b.file(t, "h"), b.file(t, "seen"))
	}
	if b := build("other", "b", false); b.file(t, "h") != "other\n" || b.file(t, "seen") != "" {
		t.Errorf("another hostname: %q (cached?); namespace b's cache held %q", b.file(t, "h"), b.file(t, "seen"))
	}
	if b := build("box", "a", true); b.file(t, "seen") != "mark\n" {
		t.Errorf("namespace a's cache again held %q, want mark", b.file(t, "seen"))
	}
}
