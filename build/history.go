package build

import (
	"fmt"
	"strings"
	"time"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
)

// The image's history is written as BuildKit's Dockerfile frontend writes
// it (dockerfile2llb's commitToHistory), so that docker history, and
// tools that read it, show a cove-built image as a docker-built one:
// each entry's created_by in BuildKit's words for the instruction, the
// comment below, empty_layer for the ones that change only the config.
// FROM and ONBUILD leave no entry (FROM's are the base's own).

// historyComment is the comment of every entry a Dockerfile instruction
// leaves, BuildKit's.
const historyComment = "buildkit.dockerfile.v0"

// layerSuffix ends the created_by of the instructions that run a file
// operation (RUN, COPY, ADD), as BuildKit marks them.
const layerSuffix = " # buildkit"

// healthcheckText is the shape BuildKit prints HEALTHCHECK's config in
// (%+v of its HealthcheckConfig): the same fields, in the same order.
type healthcheckText struct {
	Test          []string
	Interval      time.Duration
	Timeout       time.Duration
	StartPeriod   time.Duration
	StartInterval time.Duration
	Retries       int
}

// configCreatedBy is the created_by of an instruction that changes only
// the stage's config, once applied (its words expanded, the config set);
// ok is false for one that leaves no entry.
func configCreatedBy(st *stage, c instructions.Command) (string, bool) {
	cfg := &st.cfg.Config
	switch c := c.(type) {
	case *instructions.EnvCommand:
		var b strings.Builder
		b.WriteString("ENV")
		for _, kv := range c.Env {
			b.WriteString(" " + kv.String())
		}
		return b.String(), true
	case *instructions.LabelCommand:
		var b strings.Builder
		b.WriteString("LABEL")
		for _, kv := range c.Labels {
			b.WriteString(" " + kv.String())
		}
		return b.String(), true
	case *instructions.WorkdirCommand:
		return "WORKDIR " + cfg.WorkingDir, true
	case *instructions.MaintainerCommand:
		return "MAINTAINER " + c.Maintainer, true
	case *instructions.CmdCommand:
		return fmt.Sprintf("CMD %q", cfg.Cmd), true
	case *instructions.EntrypointCommand:
		return fmt.Sprintf("ENTRYPOINT %q", cfg.Entrypoint), true
	case *instructions.HealthCheckCommand:
		h := c.Health
		return fmt.Sprintf("HEALTHCHECK %+v", healthcheckText{Test: h.Test, Interval: h.Interval, Timeout: h.Timeout,
			StartPeriod: h.StartPeriod, StartInterval: h.StartInterval, Retries: h.Retries}), true
	case *instructions.UserCommand:
		return "USER " + c.User, true
	case *instructions.VolumeCommand:
		return fmt.Sprintf("VOLUME %v", c.Volumes), true
	case *instructions.StopSignalCommand:
		return "STOPSIGNAL " + c.Signal, true
	case *instructions.ShellCommand:
		return fmt.Sprintf("SHELL %v", c.Shell), true
	}
	return "", false
}

// argCreatedBy is ARG's created_by: each name with the value it took,
// or alone when it has none.
func argCreatedBy(st *stage, args []instructions.KeyValuePairOptional) string {
	parts := make([]string, 0, len(args))
	for _, kv := range args {
		if st.unset[kv.Key] {
			parts = append(parts, kv.Key)
		} else {
			parts = append(parts, kv.Key+"="+st.args[kv.Key])
		}
	}
	return "ARG " + strings.Join(parts, " ")
}

// runCreatedBy is RUN's created_by: the stage's build args as BuildKit
// lists them (|N, then each NAME=value in the order declared, the
// environment's value where ENV set one too) and the command's argv.
// A predefined proxy arg not declared with ARG is no part of it.
func runCreatedBy(st *stage, argv []string) string {
	var parts []string
	if n := len(st.argOrder); n > 0 {
		parts = append(parts, fmt.Sprintf("|%d", n))
		env := envMap(st.cfg.Config.Env)
		for _, k := range st.argOrder {
			v, ok := env[k]
			if !ok {
				v = st.args[k]
			}
			parts = append(parts, k+"="+v)
		}
	}
	return "RUN " + strings.Join(append(parts, argv...), " ") + layerSuffix
}

// copyCreatedBy is COPY's or ADD's created_by: the flags BuildKit names
// (--parents, --chown, --chmod; not --from, --link or --exclude), the
// sources, each heredoc as <<NAME, and the destination, as written
// once expanded.
func copyCreatedBy(a copyArgs) string {
	var b strings.Builder
	if a.add {
		b.WriteString("ADD")
	} else {
		b.WriteString("COPY")
	}
	if a.parents {
		b.WriteString(" --parents")
	}
	if a.chown != "" {
		b.WriteString(" --chown=" + a.chown)
	}
	if a.chmod != "" {
		b.WriteString(" --chmod=" + a.chmod)
	}
	for _, s := range a.srcs {
		b.WriteString(" " + s)
	}
	for _, d := range a.docs {
		b.WriteString(" <<" + d.Path)
	}
	b.WriteString(" " + a.dest + layerSuffix)
	return b.String()
}

// envMap is an environment list (K=V) as a map.
func envMap(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}
