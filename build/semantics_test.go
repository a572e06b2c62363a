package build

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"

	"github.com/cove-sh/cove/image"
)

// buildConfig builds dockerfile (with context files) in-process, FROM
// scratch stages only (no RUN: no container is started), and returns the
// image's config and its root filesystem.
func buildConfig(t *testing.T, dockerfile string, files map[string]string, args map[string]string) (*v1.Config, string) {
	t.Helper()
	dir := t.TempDir()
	ctxDir := filepath.Join(dir, "ctx")
	if err := os.MkdirAll(ctxDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(ctxDir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	store, err := image.Open(filepath.Join(dir, "store"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Build(context.Background(), store, Options{Context: ctxDir, CacheDir: filepath.Join(dir, "cache"), Tag: "t:1", BuildArgs: args})
	if err != nil {
		t.Fatal(err)
	}
	cf, err := store.ConfigFile(res.Image)
	if err != nil {
		t.Fatal(err)
	}
	return &cf.Config, res.Image.RootFS
}

// TestConfigSemantics: the image config an instruction leaves, as the
// Dockerfile reference (and BuildKit) gives it, case by case.
func TestConfigSemantics(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, dockerfile string
		args             map[string]string
		check            func(t *testing.T, c *v1.Config)
	}{
		{
			// "If CMD is defined from the base image, setting ENTRYPOINT
			// will reset CMD to an empty value": a base that is a stage too.
			name: "entrypoint resets an inherited cmd",
			dockerfile: "FROM scratch AS base\nCMD [\"serve\"]\n" +
				"FROM base\nENTRYPOINT [\"/app\"]\n",
			check: func(t *testing.T, c *v1.Config) {
				if !reflect.DeepEqual(c.Entrypoint, []string{"/app"}) || c.Cmd != nil {
					t.Errorf("entrypoint %q cmd %q, want [/app] and none", c.Entrypoint, c.Cmd)
				}
			},
		},
		{
			// The stage's own CMD stays, even equal to the base's.
			name: "a stage's own cmd stays",
			dockerfile: "FROM scratch AS base\nCMD [\"serve\"]\n" +
				"FROM base\nCMD [\"serve\"]\nENTRYPOINT [\"/app\"]\n",
			check: func(t *testing.T, c *v1.Config) {
				if !reflect.DeepEqual(c.Cmd, []string{"serve"}) {
					t.Errorf("cmd %q, want [serve]", c.Cmd)
				}
			},
		},
		{
			name: "shell applies to shell-form cmd and entrypoint",
			dockerfile: "FROM scratch\nSHELL [\"/bin/bash\", \"-o\", \"pipefail\", \"-c\"]\n" +
				"ENTRYPOINT exec app\nCMD echo hi\n",
			check: func(t *testing.T, c *v1.Config) {
				if !reflect.DeepEqual(c.Entrypoint, []string{"/bin/bash", "-o", "pipefail", "-c", "exec app"}) ||
					!reflect.DeepEqual(c.Cmd, []string{"/bin/bash", "-o", "pipefail", "-c", "echo hi"}) {
					t.Errorf("entrypoint %q cmd %q", c.Entrypoint, c.Cmd)
				}
			},
		},
		{
			name: "variable forms",
			dockerfile: "ARG V=global\nFROM scratch\nARG V\nARG EMPTY\nENV A=${V:-d} B=${UNSET:-dflt} C=${V:+alt} D=${UNSET:+alt} E=\"$V-x\" F='$V'\n" +
				"ENV G ${V} and spaces\n",
			check: func(t *testing.T, c *v1.Config) {
				want := map[string]string{"A": "global", "B": "dflt", "C": "alt", "D": "", "E": "global-x", "F": "$V", "G": "global and spaces"}
				got := envMap(c.Env)
				for k, v := range want {
					if got[k] != v {
						t.Errorf("%s=%q, want %q (env %q)", k, got[k], v, c.Env)
					}
				}
			},
		},
		{
			name:       "build-arg overrides a redeclared global arg",
			dockerfile: "ARG V=global\nFROM scratch\nARG V\nENV A=$V\n",
			args:       map[string]string{"V": "given"},
			check: func(t *testing.T, c *v1.Config) {
				if envMap(c.Env)["A"] != "given" {
					t.Errorf("env %q, want A=given", c.Env)
				}
			},
		},
		{
			// A global ARG not redeclared in the stage is not in scope there.
			name:       "global arg out of scope without redeclaration",
			dockerfile: "ARG V=global\nFROM scratch\nENV A=x${V}x\n",
			check: func(t *testing.T, c *v1.Config) {
				if envMap(c.Env)["A"] != "xx" {
					t.Errorf("env %q, want A=xx", c.Env)
				}
			},
		},
		{
			name: "inherited config from a stage",
			dockerfile: "FROM scratch AS base\nENV A=1\nLABEL l=1\nEXPOSE 80\nSTOPSIGNAL SIGINT\nUSER 1000:1000\nWORKDIR /w\n" +
				"HEALTHCHECK --interval=5s CMD [\"true\"]\nONBUILD LABEL child=1\n" +
				"FROM base\nENV B=2\n",
			check: func(t *testing.T, c *v1.Config) {
				env := envMap(c.Env)
				if env["A"] != "1" || env["B"] != "2" || c.Labels["l"] != "1" || c.StopSignal != "SIGINT" ||
					c.User != "1000:1000" || c.WorkingDir != "/w" || c.Healthcheck == nil {
					t.Errorf("config %+v", c)
				}
				if _, ok := c.ExposedPorts["80/tcp"]; !ok {
					t.Errorf("exposed %v", c.ExposedPorts)
				}
				// The base's ONBUILD ran here (TestOnbuildTriggersRun).
				if c.Labels["child"] != "1" || len(c.OnBuild) != 0 {
					t.Errorf("onbuild: labels %v, carried on %q", c.Labels, c.OnBuild)
				}
			},
		},
		{
			// EXPOSE's ports are expanded, TCP unless a protocol is given;
			// VOLUME and STOPSIGNAL are recorded.
			name:       "expose, volume and stopsignal recorded",
			dockerfile: "FROM scratch\nARG P=8080\nENV Q=53\nEXPOSE $P ${Q}/udp\nVOLUME /data\nSTOPSIGNAL SIGTERM\n",
			check: func(t *testing.T, c *v1.Config) {
				want := map[string]struct{}{"8080/tcp": {}, "53/udp": {}}
				if !reflect.DeepEqual(c.ExposedPorts, want) {
					t.Errorf("exposed %v, want %v", c.ExposedPorts, want)
				}
				if _, ok := c.Volumes["/data"]; !ok || c.StopSignal != "SIGTERM" {
					t.Errorf("volumes %v stopsignal %q", c.Volumes, c.StopSignal)
				}
			},
		},
		{
			// A relative WORKDIR is joined to the current one; an absolute
			// one is kept as written, as BuildKit's NormalizeWorkdir (and
			// buildah) keep it.
			name:       "workdir relative and expanded",
			dockerfile: "FROM scratch\nENV D=/a\nWORKDIR $D\nWORKDIR b/../c/\nWORKDIR ${D}/d/\n",
			check: func(t *testing.T, c *v1.Config) {
				if c.WorkingDir != "/a/d/" {
					t.Errorf("workdir %q, want /a/d/", c.WorkingDir)
				}
			},
		},
		{
			name:       "workdir relative joined",
			dockerfile: "FROM scratch\nWORKDIR /a\nWORKDIR b/../c/\n",
			check: func(t *testing.T, c *v1.Config) {
				if c.WorkingDir != "/a/c" {
					t.Errorf("workdir %q, want /a/c", c.WorkingDir)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, _ := buildConfig(t, tc.dockerfile, nil, tc.args)
			tc.check(t, c)
		})
	}
}

// TestCopyDestinationsExpand: COPY's destination takes ARG and ENV values
// in every substitution form, and lands relative to WORKDIR.
func TestCopyDestinationsExpand(t *testing.T) {
	t.Parallel()
	_, root := buildConfig(t, "FROM scratch\nARG SUB=sub\nENV DIR=/data\nWORKDIR /w\n"+
		"COPY f ${DIR}/${SUB}/\nCOPY f ${UNSET:-/dflt}/g\nCOPY f rel/\n", map[string]string{"f": "bytes"}, nil)
	for _, p := range []string{"data/sub/f", "dflt/g", "w/rel/f"} {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil || string(b) != "bytes" {
			t.Errorf("/%s: %q %v", p, b, err)
		}
	}
}

// TestWorkdirIsTheUsers: the directories WORKDIR makes belong to the
// current USER, as BuildKit makes them (a RUN as that user then writes
// there); what existed keeps its owner.
func TestWorkdirIsTheUsers(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("the stored rootfs shows owners as root's only to root; rootless is checked by cmd/cove's rootless build tests")
	}
	_, root := buildConfig(t, "FROM scratch\nWORKDIR /srv\nUSER 1000:1001\nWORKDIR /srv/app/data\nUSER 0\nWORKDIR /other\n", nil, nil)
	for p, want := range map[string][2]uint32{"srv": {0, 0}, "srv/app": {1000, 1001}, "srv/app/data": {1000, 1001}, "other": {0, 0}} {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(root, p), &st); err != nil {
			t.Fatal(err)
		}
		if st.Uid != want[0] || st.Gid != want[1] {
			t.Errorf("/%s: %d:%d, want %d:%d", p, st.Uid, st.Gid, want[0], want[1])
		}
	}
}

// TestOnbuildTriggersRun: a base's ONBUILD instructions run first in the
// stage built FROM it (a stage's, as an image's), not in the base itself,
// and the new image does not carry them on.
func TestOnbuildTriggersRun(t *testing.T) {
	t.Parallel()
	c, root := buildConfig(t, "FROM scratch AS base\nONBUILD ENV TRIGGERED=1\nONBUILD COPY f /from-trigger\nENV BASE=1\n"+
		"FROM base\nENV OWN=2\n", map[string]string{"f": "bytes"}, nil)
	env := envMap(c.Env)
	if env["TRIGGERED"] != "1" || env["BASE"] != "1" || env["OWN"] != "2" {
		t.Errorf("env %q", c.Env)
	}
	if len(c.OnBuild) != 0 {
		t.Errorf("the child carries the triggers on: %q", c.OnBuild)
	}
	if b, err := os.ReadFile(filepath.Join(root, "from-trigger")); err != nil || string(b) != "bytes" {
		t.Errorf("the trigger's COPY: %q %v", b, err)
	}
	base, _ := buildConfig(t, "FROM scratch\nONBUILD ENV TRIGGERED=1\n", nil, nil)
	if envMap(base.Env)["TRIGGERED"] != "" || len(base.OnBuild) != 1 {
		t.Errorf("the base ran its own trigger or lost it: env %q onbuild %q", base.Env, base.OnBuild)
	}
}
