package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
)

// podmanCases are the Dockerfiles TestBuildSameAsPodman builds, each
// modelled on the Dockerfile reference's own examples
// (https://docs.docker.com/reference/dockerfile/), on busybox (base): BASE
// in a Dockerfile is base, REPO its repository.
func podmanCases(t *testing.T, base string) []podmanCase {
	repo := strings.TrimSuffix(base, ":latest")
	cases := []podmanCase{
		{
			// FROM: "Understand how ARG and FROM interact".
			name: "arg-from",
			dockerfile: "ARG CODE_VERSION=latest\nFROM REPO:${CODE_VERSION} AS base\nCMD /code/run-app\n\n" +
				"FROM REPO:${CODE_VERSION}\nCMD /code/run-extras\n\n" +
				"FROM REPO:$CODE_VERSION\nARG CODE_VERSION\nRUN echo $CODE_VERSION > image_version\n",
		},
		{
			// ARG: "Scope", "Using ARG variables" (ENV overrides ARG), and a
			// stage's ARG inherited by a stage FROM it.
			name: "arg-scope",
			args: []string{"username=what_user", "CONT_IMG_VER=v2.0.1"},
			dockerfile: "FROM BASE AS parent\nARG INHERITED=from-parent\n\n" +
				"FROM parent\nLABEL before=${username:-some_user}\nARG username\nLABEL after=$username\n" +
				"ARG CONT_IMG_VER\nENV CONT_IMG_VER=v1.0.0\n" +
				"ARG NEXT_VER\nENV NEXT_VER=${NEXT_VER:-v1.0.0}\n" +
				"RUN echo \"$CONT_IMG_VER [$INHERITED] [$username]\" > /args\n" +
				"USER ${username:-some_user}\n",
		},
		{
			// ENV: its examples, the substitution example ("The value of def
			// becomes hello") and the alternative syntax ENV <key> <value>.
			name: "env",
			dockerfile: "FROM BASE\nENV MY_NAME=\"John Doe\"\nENV MY_DOG=Rex\\ The\\ Dog\nENV MY_CAT=fluffy\n" +
				"ENV abc=hello\nENV abc=bye def=$abc\nENV ghi=$abc\n" +
				"ENV ONE TWO= THREE=world\nENV MY_VAR my-value\nENV LEGACY value with  spaces\n" +
				"RUN echo \"$MY_NAME|$MY_DOG|$def|$ghi|$ONE|$LEGACY\" > /env.txt\n",
		},
		{
			// "Environment replacement": the modifiers and its example
			// (WORKDIR ${FOO}, ADD . $FOO, COPY \$FOO /quux), and WORKDIR's.
			name:  "substitution",
			files: map[string]string{"$FOO": "a file named $FOO\n", "f": "f\n"},
			dockerfile: "FROM BASE\nENV FOO=/bar\nWORKDIR ${FOO}\nADD . $FOO\nCOPY \\$FOO /quux\nENV EMPTY=\n" +
				"LABEL a=${EMPTY:-word} b=${UNSET:-word} d=${FOO:+word} e=${EMPTY:+word} h=\\${FOO} i=${FOO}_bar\n" +
				"ENV DIRPATH=/path\nWORKDIR $DIRPATH/$DIRNAME\nRUN pwd > /pwd\n",
		},
		{
			// "Environment replacement": ${variable-word} and
			// ${variable+word}, set but empty against unset.
			name: "substitution-unset",
			dockerfile: "FROM BASE\nENV EMPTY=\n" +
				"LABEL b=${EMPTY-word} c=${UNSET-word} f=${EMPTY+word} g=${UNSET+word}\n",
		},
		{
			// "Format" (a # in an argument, a comment in a continuation,
			// whitespace kept) and "Shell and exec form".
			name:  "run-forms",
			timed: true,
			dockerfile: "FROM BASE\nRUN echo 'we are running some # of cool things' > /hash\n" +
				"RUN echo hello \\\n# comment\nworld > /continued\n" +
				"RUN echo \"\\\n     hello\\\n     world\" > /spaces\n" +
				"RUN [\"/bin/sh\", \"-c\", \"echo $HOME > /home.txt\"]\n" +
				"RUN [\"/bin/busybox\", \"touch\", \"/not-$HOME\"]\n" +
				"RUN mkdir /x && cd /x && echo $0 > shell\n",
		},
		{
			// "Here-Documents": running a multi-line script.
			name: "heredoc-run",
			dockerfile: "FROM BASE\nRUN <<EOT\n  mkdir -p foo/bar\nEOT\n" +
				"RUN <<EOT sh\n  set -ex\n  echo in-sh > /sh.txt\nEOT\n" +
				"RUN <<EOT\n#!/bin/sh\necho shebang > /shebang.txt\nEOT\n" +
				"RUN <<FILE1 cat > file1 && <<FILE2 cat > file2\nI am\nfirst\nFILE1\nI am\nsecond\nFILE2\n",
		},
		{
			// "Here-Documents": creating inline files, expanded or not.
			name: "heredoc-copy",
			dockerfile: "FROM BASE\nARG NAME=world\nCOPY <<EOF greeting.txt\nhello world\nEOF\n" +
				"COPY <<EOF /expanded.txt\nhello $NAME\nEOF\n" +
				"COPY <<\"EOF\" /literal.txt\nhello $NAME\nEOF\n" +
				"COPY <<-EOF /stripped.txt\n\ttab\n\tEOF\n" +
				"COPY --chmod=0755 <<EOF /run.sh\n#!/bin/sh\nEOF\n",
		},
		{
			// "Understand how CMD and ENTRYPOINT interact": ENTRYPOINT resets
			// an inherited CMD, through stages; ENTRYPOINT [] clears.
			name: "cmd-entrypoint",
			dockerfile: "FROM BASE AS base\nCMD [\"exec_cmd\", \"p1_cmd\"]\n" +
				"FROM base AS exec\nENTRYPOINT [\"exec_entry\", \"p1_entry\"]\n" +
				"FROM exec\nLABEL x=y\n",
		},
		{
			// The table's shell-form rows, and SHELL applied to RUN, CMD and
			// ENTRYPOINT, inherited by a stage FROM this one.
			name: "shell",
			dockerfile: "FROM BASE AS sh\nSHELL [\"/bin/sh\", \"-ec\"]\nRUN echo \"$0 $-\" > /flags\n" +
				"FROM sh\nRUN echo \"$-\" > /child-flags\nENTRYPOINT exec top -b\nCMD exec_cmd p1_cmd\n",
		},
		{
			// LABEL and MAINTAINER: their examples, inheritance and override,
			// and a stage's labels not carried by COPY --from.
			name: "label",
			dockerfile: "FROM BASE AS base\nLABEL \"com.example.vendor\"=\"ACME Incorporated\"\nLABEL com.example.label-with-value=\"foo\"\n" +
				"LABEL version=\"1.0\"\nLABEL description=\"This text illustrates \\\nthat label-values can span multiple lines.\"\n" +
				"FROM BASE AS other\nLABEL from.other=yes\nRUN echo other > /other\n" +
				"FROM base\nLABEL multi.label1=\"value1\" multi.label2=\"value2\" other=\"value3\"\nLABEL version=\"2.0\"\n" +
				"ENV ENV_VAR=bar\nLABEL example=\"foo-$ENV_VAR\" single='foo-$ENV_VAR'\nMAINTAINER SvenDowideit@home.org.au\n" +
				"COPY --from=other /other /other\n",
		},
		{
			// EXPOSE: TCP by default, both protocols, variables.
			name:       "expose",
			dockerfile: "FROM BASE\nENV PORT=8080\nEXPOSE 80/tcp\nEXPOSE 80/udp\nEXPOSE 80 443 ${PORT}\n",
		},
		{
			// COPY "Source" and "Destination": several sources, trailing
			// slashes, relative to WORKDIR, a directory's contents merged
			// with what is there, parent navigation and a leading slash
			// removed from a source.
			name:  "copy-dirs",
			timed: true,
			files: map[string]string{"file1.txt": "1\n", "file2.txt": "2\n", "test.txt": "test\n",
				"something/a": "new a\n", "something/sub/b": "b\n", "something/link@": "sub/b"},
			modes: map[string]os.FileMode{"something": 0o750, "something/sub": 0o700, "something/a": 0o755},
			dockerfile: "FROM BASE\nCOPY file1.txt file2.txt /usr/src/things/\nCOPY test.txt /abs/\nCOPY test.txt /abs2\n" +
				"WORKDIR /usr/src/app\nCOPY test.txt rel/\nCOPY something/ /something\n" +
				"RUN mkdir -p /merged/sub && echo old > /merged/sub/old && echo old > /merged/a && chmod 0711 /merged\n" +
				"COPY something /merged/\nCOPY ../file1.txt /parent-nav\nCOPY /test.txt /leading-slash\n",
		},
		{
			// COPY "Pattern matching".
			name: "copy-globs",
			files: map[string]string{"a.png": "a\n", "b.png": "b\n", "c.txt": "c\n", "index.js": "js\n", "index.ts": "ts\n",
				"dir.png/inner": "inner\n"},
			dockerfile: "FROM BASE\nCOPY *.png /dest/\nCOPY index.?s /dest/\nCOPY *.txt /txt/\n",
		},
		{
			// "Pattern matching": a name with [ and ], escaped as Go's
			// filepath.Match has it.
			name:       "copy-glob-escape",
			files:      map[string]string{"arr[0].txt": "arr\n", "arr0.txt": "not this one\n"},
			dockerfile: "FROM BASE\nCOPY arr[[]0].txt /dest/\n",
		},
		{
			// COPY --chown and --chmod: the reference's examples.
			name: "copy-chown",
			files: map[string]string{"files1": "1\n", "files2": "2\n", "dir/x": "x\n", "dir/sub/y": "y\n",
				"etc/passwd": "root:x:0:0:root:/root:/bin/sh\nbin:x:1:1:bin:/bin:/bin/false\nmyuser:x:1001:1002::/home/myuser:/bin/sh\n",
				"etc/group":  "root:x:0:\nbin:x:1:\nmygroup:x:1003:\n"},
			// The users come from a COPY: names are looked up in the
			// stage's files as they are at the instruction.
			dockerfile: "FROM BASE\nCOPY etc /etc/\n" +
				"COPY --chown=55:mygroup files* /somedir/\nCOPY --chown=bin files* /bin-owned/\nCOPY --chown=1 files* /one/\n" +
				"COPY --chown=10:11 files* /ten/\nCOPY --chown=myuser:mygroup --chmod=644 files* /mine/\n" +
				"ARG MODE=440\nCOPY --chmod=$MODE dir /moded/\nCOPY --chown=myuser dir /userdir\n",
		},
		{
			// COPY --link: "your source files are copied into an empty
			// destination directory".
			name:  "copy-link",
			files: map[string]string{"foo": "foo\n", "d/x": "x\n"},
			dockerfile: "FROM BASE\nRUN mkdir -p /real && ln -s /real /link\n" +
				"COPY --link /foo /bar\nCOPY --link d /linked/\nCOPY --link foo /link/foo\n",
		},
		{
			// COPY --parents: its examples.
			name: "copy-parents",
			files: map[string]string{"x/a.txt": "xa\n", "y/a.txt": "ya\n", "x/y/a.txt": "xya\n", "x/y/b.txt": "xyb\n",
				"src/a.txt": "a\n", "src/x/b.txt": "b\n", "src/x/y/c.txt": "c\n", "src/x/y/d.md": "d\n"},
			dockerfile: "FROM BASE\nCOPY ./x/a.txt ./y/a.txt /no_parents/\nCOPY --parents ./x/a.txt ./y/a.txt /parents/\n" +
				"COPY --parents ./x/./y/*.txt /pivot/\nCOPY --parents ./src/**/*.txt /deep/\n",
		},
		{
			// COPY --exclude: its examples.
			name: "copy-exclude",
			files: map[string]string{"home.txt": "t\n", "homer.md": "m\n", "homework.go": "g\n",
				"homedir/a.txt": "a\n", "homedir/b.go": "b\n"},
			dockerfile: "FROM BASE\nCOPY --exclude=*.txt hom* /mydir/\nCOPY --exclude=*.txt --exclude=*.md hom* /mydir2/\n",
		},
		{
			// ADD "Adding local tar archives": plain and gzip, a union
			// with what is there, and a name alone not making an archive.
			name: "add-tar",
			files: map[string]string{"a.tar": string(testTar(t, false)), "b.tar.gz": string(testTar(t, true)),
				"fake.tar.gz": ""},
			dockerfile: "FROM BASE\nADD a.tar /unpacked/\nADD b.tar.gz /unpacked-gz\nADD fake.tar.gz /fake/\n" +
				"RUN mkdir -p /merge/dir && echo old > /merge/keep && echo old > /merge/f && chmod 0750 /merge/dir\n" +
				"ADD a.tar /merge/\n",
		},
		{
			// WORKDIR: relative to the previous one, environment
			// variables, made even when no later step uses it, and the
			// issue's USER then WORKDIR then another USER.
			name: "workdir",
			dockerfile: "FROM BASE\nWORKDIR /a\nWORKDIR b\nWORKDIR c\nRUN pwd > /pwd\n" +
				"ENV DIRPATH=/path\nWORKDIR $DIRPATH/$DIRNAME\n" +
				"USER 1000:1000\nWORKDIR /owned\nUSER nobody\nRUN id > /tmp/id\n" +
				"WORKDIR /unused\n",
		},
		{
			// USER: a name, name:group ("only the specified group
			// membership"), a uid, uid:gid, and a uid without a primary
			// group ("run with the root group").
			name: "user",
			dockerfile: "FROM BASE\nRUN echo 'app:x:1000:1000::/home/app:/bin/sh' >> /etc/passwd && echo 'app:x:1000:' >> /etc/group && " +
				"echo 'staff:x:50:app' >> /etc/group\n" +
				"USER app\nRUN id > /tmp/id-app\nUSER app:staff\nRUN id > /tmp/id-app-staff\n" +
				"USER 2000:2001\nRUN id > /tmp/id-2000\nUSER 4321\nRUN id > /tmp/id-4321\nUSER app\n",
		},
		{
			// VOLUME (its example, and changes after it kept, as BuildKit
			// keeps them), STOPSIGNAL, HEALTHCHECK.
			name: "volume",
			dockerfile: "FROM BASE\nRUN mkdir /myvol && echo \"hello world\" > /myvol/greeting\nVOLUME /myvol\n" +
				"RUN echo changed > /myvol/greeting && echo new > /myvol/new\n" +
				"VOLUME [\"/var/www\", \"/var/log/apache2\"]\nVOLUME /var/log /var/db\nSTOPSIGNAL SIGKILL\n" +
				"HEALTHCHECK --interval=5m --timeout=3s \\\n  CMD curl -f http://localhost/ || exit 1\n",
		},
		{
			// HEALTHCHECK NONE "disable any healthcheck inherited from the
			// base image"; its options, exec form; STOPSIGNAL by number.
			name: "healthcheck",
			dockerfile: "FROM BASE AS base\nHEALTHCHECK --interval=10s --timeout=2s --start-period=5s --retries=4 CMD [\"/bin/true\"]\nSTOPSIGNAL 9\n" +
				"FROM base AS none\nHEALTHCHECK NONE\n" +
				"FROM base\nCOPY --from=none /etc/passwd /p\n",
		},
		{
			// ONBUILD: triggers run after FROM, in order, and are not
			// inherited by grand-children; the final stage's own are kept.
			name:  "onbuild",
			files: map[string]string{"app.py": "print(1)\n"},
			dockerfile: "FROM BASE AS builder\nONBUILD ADD . /app/src\nONBUILD RUN echo built > /app/built\n" +
				"FROM builder AS child\nLABEL child=1\n" +
				"FROM child\nONBUILD RUN echo grandchild\n",
		},
		{
			// Multi-stage: COPY --from a stage by name, by number and from
			// an image; a stage the target does not need is not built.
			name:  "multistage",
			timed: true,
			files: map[string]string{"hello.c": "int main() { return 0; }\n"},
			dockerfile: "FROM BASE AS build\nCOPY . .\nRUN mkdir /out && cat hello.c > /out/hello && chmod 0755 /out/hello\n" +
				"FROM BASE AS unused\nRUN exit 1\n" +
				"FROM scratch\nCOPY --from=build /out/hello /\nCOPY --from=0 /etc/passwd /etc/\nCOPY --from=BASE /bin/busybox /bb\n",
		},
		{
			// .dockerignore: comments, ! exceptions, ** and ?, a leading
			// slash, a directory with an exception below it.
			name: "dockerignore",
			files: map[string]string{
				".dockerignore": "# comment\n*.md\n!README.md\n**/*.tmp\ntemp?\n/abs\nbuild/\n!build/keep\n.git\n",
				"README.md":     "r\n", "CHANGES.md": "c\n", "a.tmp": "a\n", "sub/b.tmp": "b\n", "sub/deeper/c.tmp": "c\n",
				"sub/ok": "ok\n", "tempa": "t\n", "temp10": "t10\n", "abs/x": "x\n", "build/x": "x\n", "build/keep": "k\n",
				".git/HEAD": "ref\n", "main.go": "package main\n"},
			dockerfile: "FROM BASE\nCOPY . /ctx/\n",
		},
		{
			// xattrs of the context's files and of a tar's entries.
			name:   "xattrs",
			files:  map[string]string{"x": "x\n", "d/y": "y\n", "t.tar": string(testTar(t, false))},
			xattrs: map[string]string{"x": "user.origin=context", "d/y": "user.deep=1", "d": "user.dir=yes"},
			dockerfile: "FROM BASE AS s\nCOPY x /x\n" +
				"FROM BASE\nCOPY x /x\nCOPY d /d/\nADD t.tar /t/\nCOPY --from=s /x /from-stage\nRUN mv /x /moved\n",
		},
	}
	for i := range cases {
		df := strings.ReplaceAll(cases[i].dockerfile, "REPO", repo)
		cases[i].dockerfile = strings.ReplaceAll(df, "BASE", base)
	}
	return cases
}

// testTar is a small archive (gzip-compressed if gz): a file owned by
// 1000:1000, a directory, a symlink, a setuid file and an xattr.
func testTar(t *testing.T, gz bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range []*tar.Header{
		{Name: "f", Typeflag: tar.TypeReg, Mode: 0o640, Uid: 1000, Gid: 1000, Size: 4,
			PAXRecords: map[string]string{"SCHILY.xattr.user.tar": "from-tar"}},
		{Name: "dir/", Typeflag: tar.TypeDir, Mode: 0o700},
		{Name: "dir/g", Typeflag: tar.TypeReg, Mode: 0o644, Size: 4},
		{Name: "link", Typeflag: tar.TypeSymlink, Linkname: "f", Mode: 0o777},
		{Name: "suid", Typeflag: tar.TypeReg, Mode: 0o4755, Size: 4},
	} {
		h.Format = tar.FormatPAX
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write([]byte("new\n"))
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if !gz {
		return buf.Bytes()
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(buf.Bytes())
	zw.Close()
	return z.Bytes()
}

// podmanDepartures are where podman 4.3 (buildah 1.28) is known to build
// podmanCases otherwise than the Dockerfile reference says, each with the
// reference's sentence; cove follows the reference.
var podmanDepartures = []departure{
	{name: "RUN heredocs", cases: "heredoc-run", what: "build",
		ref: `"Here-documents allow redirection of subsequent Dockerfile lines to the input of RUN or COPY commands" ` +
			`(buildah reads the heredoc's lines as instructions: Unknown instruction: "MKDIR")`,
		wants: map[string]string{"foo": dirLine(0o755, 0, 0), "foo/bar": dirLine(0o755, 0, 0),
			"sh.txt": fileLine(0o644, 0, 0, "in-sh\n"), "shebang.txt": fileLine(0o644, 0, 0, "shebang\n"),
			"file1": fileLine(0o644, 0, 0, "I am\nfirst\n"), "file2": fileLine(0o644, 0, 0, "I am\nsecond\n")}},
	{name: "COPY heredocs", cases: "heredoc-copy", what: "build",
		ref: `"With COPY instructions, you can replace the source parameter with a here-doc indicator to write ` +
			`the contents of the here-document directly to a file" (buildah: stat "/<<EOF": no such file)`,
		wants: map[string]string{"greeting.txt": fileLine(0o644, 0, 0, "hello world\n"),
			"expanded.txt": fileLine(0o644, 0, 0, "hello world\n"), "literal.txt": fileLine(0o644, 0, 0, "hello $NAME\n"),
			"stripped.txt": fileLine(0o644, 0, 0, "tab\n"), "run.sh": fileLine(0o755, 0, 0, "#!/bin/sh\n")}},
	{name: "${variable-word} and ${variable+word}", cases: "substitution-unset", what: "build",
		ref: "\"${variable-word} indicates that if variable is set (even if empty) then the result will be that value. " +
			"If variable is unset then word will be the result\" (buildah: Missing ':' in substitution)",
		wants: map[string]string{"config.Labels": `{"b":"","c":"word","f":"word","g":""}`}},
	{name: "COPY --link", cases: "copy-link", what: "build",
		ref: `"When --link is used your source files are copied into an empty destination directory" ` +
			`(buildah: COPY only supports the --chmod=<permissions> --chown=<uid:gid> and the --from=<image|stage> flags)`,
		wants: map[string]string{"bar": fileLine(0o644, 0, 0, "foo\n"), "real": dirLine(0o755, 0, 0),
			"link": dirLine(0o755, 0, 0), "link/foo": fileLine(0o644, 0, 0, "foo\n"),
			"linked": dirLine(0o755, 0, 0), "linked/x": fileLine(0o644, 0, 0, "x\n")}},
	{name: "COPY --parents", cases: "copy-parents", what: "build",
		ref: `"The --parents flag preserves parent directories for src entries" (buildah: COPY only supports ...)`,
		wants: map[string]string{"no_parents/a.txt": fileLine(0o644, 0, 0, "ya\n"),
			"parents/x/a.txt": fileLine(0o644, 0, 0, "xa\n"), "parents/y/a.txt": fileLine(0o644, 0, 0, "ya\n"),
			"pivot/y/a.txt": fileLine(0o644, 0, 0, "xya\n"), "pivot/y/b.txt": fileLine(0o644, 0, 0, "xyb\n"), "pivot/x": "",
			"deep/src/a.txt": fileLine(0o644, 0, 0, "a\n"), "deep/src/x/b.txt": fileLine(0o644, 0, 0, "b\n"),
			"deep/src/x/y/c.txt": fileLine(0o644, 0, 0, "c\n"), "deep/src/x/y/d.md": ""}},
	{name: "COPY --exclude", cases: "copy-exclude", what: "build",
		ref: `"The --exclude flag lets you specify a path expression for files to be excluded" (buildah: COPY only supports ...)`,
		wants: map[string]string{"mydir/home.txt": "", "mydir/homer.md": fileLine(0o644, 0, 0, "m\n"),
			"mydir/homework.go": fileLine(0o644, 0, 0, "g\n"), "mydir/b.go": fileLine(0o644, 0, 0, "b\n"), "mydir/a.txt": "",
			"mydir2/homer.md": "", "mydir2/homework.go": fileLine(0o644, 0, 0, "g\n"), "mydir2/b.go": fileLine(0o644, 0, 0, "b\n")}},
	{name: "EXPOSE both protocols", cases: "expose", what: "config.ExposedPorts",
		ref:  `"To expose on both TCP and UDP, include two lines: EXPOSE 80/tcp, EXPOSE 80/udp" (podman keeps a port's first protocol only: no 80/udp)`,
		want: `{"443/tcp":{},"80/tcp":{},"80/udp":{},"8080/tcp":{}}`},
	{name: "SHELL and a shell-form CMD", cases: "shell", what: "config.Cmd",
		ref: `"The following instructions can be affected by the SHELL instruction when the shell form of them is used ` +
			`in a Dockerfile: RUN, CMD and ENTRYPOINT" (buildah uses it for RUN only)`,
		want: `["/bin/sh","-ec","exec_cmd p1_cmd"]`},
	{name: "SHELL and a shell-form ENTRYPOINT", cases: "shell", what: "config.Entrypoint",
		ref:  `the same sentence: SHELL affects a shell-form ENTRYPOINT (buildah uses /bin/sh -c)`,
		want: `["/bin/sh","-ec","exec top -b"]`},
	{name: "changes to a VOLUME kept", cases: "volume", what: "myvol/greeting",
		ref:  `"If any build steps change the data within the volume after it has been declared, those changes will be discarded when using the legacy builder. When using Buildkit, the changes will instead be kept." (buildah discards them)`,
		want: fileLine(0o644, 0, 0, "changed\n")},
	{name: "a file made in a VOLUME kept", cases: "volume", what: "myvol/new",
		ref: `the same sentence`, want: fileLine(0o644, 0, 0, "new\n")},
	{name: "ARG inherited by a stage", cases: "arg-scope", what: "args",
		ref:  `"An ARG variable declared within a build stage is automatically inherited by other stages based on that stage" (buildah: empty)`,
		want: fileLine(0o644, 0, 0, "v1.0.0 [from-parent] [what_user]\n")},
	{name: "an escaped [ in a COPY source", cases: "copy-glob-escape", what: "dest/arr[0].txt",
		ref:  "\"to add a file named arr[0].txt, use the following; COPY arr[[]0].txt /dest/\" (buildah copies arr0.txt instead)",
		want: fileLine(0o644, 0, 0, "arr\n")},
	{name: "an escaped [ matches no other name", cases: "copy-glob-escape", what: "dest/arr0.txt",
		ref: `the same sentence`, want: ""},
	{name: "directories COPY --chmod makes", cases: "copy-chown", what: "mine",
		ref: `"If destination doesn't exist, it's created, along with all missing directories in its path": BuildKit makes them ` +
			`with --chmod's mode and --chown's owner (tonistiigi/fsutil 183e7fb, "copy: fix custom chmod for parent directories"); ` +
			`buildah with 0755`,
		want: dirLine(0o644, 1001, 1003)},
	{name: "a directory source's destination COPY --chmod makes", cases: "copy-chown", what: "moded",
		ref: `the same: made with --chmod's mode; buildah 0755`, want: dirLine(0o440, 0, 0)},
}

// fileLine is treeListing's line for a regular file.
func fileLine(mode os.FileMode, uid, gid int, content string) string {
	sum := sha256.Sum256([]byte(content))
	return fmt.Sprintf("%v %d:%d %s", mode, uid, gid, hex.EncodeToString(sum[:8]))
}

// dirLine is treeListing's line for a directory.
func dirLine(mode os.FileMode, uid, gid int) string {
	return fmt.Sprintf("%v %d:%d", mode|os.ModeDir, uid, gid)
}
