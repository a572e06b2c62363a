package build

import (
	"fmt"
	"strings"

	"github.com/moby/buildkit/frontend/dockerfile/linter"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
)

// The Dockerfile's parser directives: escape is the parser's own;
// syntax and check are read here.

// checkSyntax refuses a Dockerfile whose # syntax= directive (or the
// BUILDKIT_SYNTAX build arg, which overrides it) names a frontend other
// than the Dockerfile one: cove build has BuildKit's Dockerfile frontend
// built in and runs no frontend image, so another syntax (a custom
// frontend) cannot be built as its author meant.
func checkSyntax(df []byte, buildArgs map[string]string) error {
	ref, _, loc, ok := parser.DetectSyntax(df)
	what := "# syntax=" + ref
	if v, set := buildArgs["BUILDKIT_SYNTAX"]; set {
		ref, ok, what = v, true, "--build-arg BUILDKIT_SYNTAX="+v
	}
	if !ok || isDockerfileFrontend(ref) {
		return nil
	}
	line := 0
	if len(loc) > 0 {
		line = loc[0].Start.Line
	}
	return fmt.Errorf("line %d: %s: cove build has the Dockerfile frontend built in (docker/dockerfile:1) and runs no other frontend image; build this file with docker buildx, or drop the directive if it is a Dockerfile", line, what)
}

// isDockerfileFrontend says whether ref names the Dockerfile frontend
// (any version, labs too) or BuildKit's built-in name for it.
func isDockerfileFrontend(ref string) bool {
	ref = strings.TrimSpace(ref)
	if ref == "dockerfile.v0" {
		return true
	}
	ref = strings.TrimPrefix(strings.TrimPrefix(ref, "docker.io/"), "index.docker.io/")
	if i := strings.IndexAny(ref, ":@"); i >= 0 {
		ref = ref[:i]
	}
	return ref == "docker/dockerfile" || ref == "docker/dockerfile-upstream"
}

// newLinter is the linter the parser runs its build checks with,
// configured by the # check= directive as BuildKit configures it: each
// warning is shown as BuildKit shows it, and with error=true the build
// fails on one (Linter.Error). The checks BuildKit runs while converting
// the Dockerfile, not while parsing it, are not run.
func (b *builder) newLinter(df []byte) (*linter.Linter, error) {
	cfg := &linter.Config{}
	v, _, loc, ok := parser.ParseDirective("check", df)
	what := "# check=" + v
	if arg, set := b.opts.BuildArgs["BUILDKIT_DOCKERFILE_CHECK"]; set {
		v, ok, what, loc = arg, true, "--build-arg BUILDKIT_DOCKERFILE_CHECK="+arg, nil // the build arg wins, as in BuildKit
	}
	if ok {
		var err error
		if cfg, err = linter.ParseLintOptions(v); err != nil {
			line := 0
			if len(loc) > 0 {
				line = loc[0].Start.Line
			}
			return nil, fmt.Errorf("line %d: %s: %w (see the Dockerfile reference's check directive)", line, what, err)
		}
	}
	cfg.Warn = func(rule, _, url, msg string, loc []parser.Range) {
		line := 0
		if len(loc) > 0 {
			line = loc[0].Start.Line
		}
		b.logf("WARN: %s (%s)", linter.LintFormatShort(rule, msg, line), url)
	}
	return linter.New(cfg), nil
}
