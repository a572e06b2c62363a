#!/usr/bin/env bash
# The one test command: installs what the tests need on a fresh Debian
# machine (as root), starts the services they use, and runs every test.
#
#   scripts/test.sh            everything
#   FUZZTIME=60s scripts/test.sh   a longer fuzz run (default 20s)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
PATH="$PATH:$(go env GOPATH)/bin"

log() { printf '\n== [%ds] %s\n' "$SECONDS" "$*" >&2; }

install_deps() {
	local pkgs=(docker-registry apache2-utils busybox-static curl python3 tar shellcheck dash chromium uidmap passt podman podman-compose runc debootstrap xfsprogs)
	local missing=()
	for p in "${pkgs[@]}"; do
		dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		log "apt-get install ${missing[*]}"
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
	fi
	# The registry package starts a system service on :5000; the tests run
	# their own on a free loopback port, so stop that one if it runs.
	if command -v systemctl >/dev/null && systemctl is-active -q docker-registry 2>/dev/null; then
		systemctl stop docker-registry || true
	fi
	if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
		echo "scripts/test.sh: node and npm are needed for the web UI (this machine kind ships them)" >&2
		exit 1
	fi
	install_mcp_servers
	install_gopls
	install_typescript_ls
	install_debian_tree
	install_debian_git_tree
	command -v crane >/dev/null || { log "go install crane"; go install github.com/google/go-containerregistry/cmd/crane@v0.22.1; }
	command -v staticcheck >/dev/null || { log "go install staticcheck"; go install honnef.co/go/tools/cmd/staticcheck@v0.8.2; }
	# An unprivileged user for the rootless tests.
	id covetest >/dev/null 2>&1 || useradd -m covetest
}

# The reference MCP servers the agent's tests drive (issue 17), from npm,
# pinned, cached across runs; the tests find them through
# COVE_TEST_MCP_SERVERS and, run without this script, skip saying so.
MCP_SERVERS_DIR=/var/cache/cove-test/mcp-servers
MCP_SERVERS="@modelcontextprotocol/server-everything@2026.8.31 @modelcontextprotocol/server-filesystem@2026.8.31"
install_mcp_servers() {
	if [ "$(cat "$MCP_SERVERS_DIR/.installed" 2>/dev/null)" != "$MCP_SERVERS" ]; then
		log "npm install $MCP_SERVERS"
		mkdir -p "$MCP_SERVERS_DIR"
		[ -f "$MCP_SERVERS_DIR/package.json" ] || echo '{"private": true}' >"$MCP_SERVERS_DIR/package.json"
		# shellcheck disable=SC2086 # one word per package
		(cd "$MCP_SERVERS_DIR" && npm install --no-audit --no-fund --loglevel=error --save-exact $MCP_SERVERS)
		echo "$MCP_SERVERS" >"$MCP_SERVERS_DIR/.installed"
	fi
}
export COVE_TEST_MCP_SERVERS="$MCP_SERVERS_DIR"

# gopls for the language server's browser test (TestBrowserLanguageServerGo),
# built static from the Go proxy, pinned, cached across runs; the test's
# image carries it with this machine's Go toolchain.
GOPLS_VERSION=v0.23.0
GOPLS_DIR=/var/cache/cove-test/gopls
install_gopls() {
	if [ "$(cat "$GOPLS_DIR/.installed" 2>/dev/null)" != "$GOPLS_VERSION" ]; then
		log "go install gopls@$GOPLS_VERSION"
		mkdir -p "$GOPLS_DIR"
		CGO_ENABLED=0 GOBIN="$GOPLS_DIR" go install "golang.org/x/tools/gopls@$GOPLS_VERSION"
		echo "$GOPLS_VERSION" >"$GOPLS_DIR/.installed"
	fi
}

# typescript-language-server and typescript for the language server's
# browser test (TestBrowserLanguageServerTypeScript), from npm, pinned,
# cached across runs; the test's image carries them with this machine's
# node. typescript-language-server 5.x runs on node 20 (6.x needs 22),
# typescript 7's package has no tsserver.
TYPESCRIPT_LS="typescript-language-server@5.3.0 typescript@6.0.3"
TYPESCRIPT_LS_DIR=/var/cache/cove-test/typescript-language-server
install_typescript_ls() {
	if [ "$(cat "$TYPESCRIPT_LS_DIR/.installed" 2>/dev/null)" != "$TYPESCRIPT_LS" ]; then
		log "npm install $TYPESCRIPT_LS"
		mkdir -p "$TYPESCRIPT_LS_DIR"
		[ -f "$TYPESCRIPT_LS_DIR/package.json" ] || echo '{"private": true}' >"$TYPESCRIPT_LS_DIR/package.json"
		# shellcheck disable=SC2086 # one word per package
		(cd "$TYPESCRIPT_LS_DIR" && npm install --no-audit --no-fund --loglevel=error --save-exact $TYPESCRIPT_LS)
		echo "$TYPESCRIPT_LS" >"$TYPESCRIPT_LS_DIR/.installed"
	fi
}

# A Debian 12 minbase tree, cached across runs, for the rootless build
# tests' apt-get install (cmd/cove's debianRef); without it they skip apt,
# saying so. COVE_DEBIAN_MIRROR as for scripts/vmdebian.sh.
DEBIAN_TREE=/var/cache/cove-test/debian-bookworm
install_debian_tree() {
	[ -x "$DEBIAN_TREE/usr/bin/apt-get" ] && return
	log "debootstrap --variant=minbase bookworm $DEBIAN_TREE"
	rm -rf "$DEBIAN_TREE.tmp"
	debootstrap --variant=minbase bookworm "$DEBIAN_TREE.tmp" "${COVE_DEBIAN_MIRROR:-http://deb.debian.org/debian}" >/dev/null
	mv "$DEBIAN_TREE.tmp" "$DEBIAN_TREE"
}

# The same with git, for the tasks tests' image (cmd/cove's gitImage):
# made once here, cached, instead of `cove build` running apt-get install
# git through the network in every run (~160 s of a loaded CI's 2 cores).
DEBIAN_GIT_TREE=/var/cache/cove-test/debian-bookworm-git
install_debian_git_tree() {
	[ -x "$DEBIAN_GIT_TREE/usr/bin/git" ] && return
	log "debootstrap --variant=minbase --include=git bookworm $DEBIAN_GIT_TREE"
	rm -rf "$DEBIAN_GIT_TREE.tmp"
	debootstrap --variant=minbase --include=git bookworm "$DEBIAN_GIT_TREE.tmp" "${COVE_DEBIAN_MIRROR:-http://deb.debian.org/debian}" >/dev/null
	rm -rf "$DEBIAN_GIT_TREE.tmp/var/lib/apt/lists/"* "$DEBIAN_GIT_TREE.tmp/var/cache/apt/archives/"*.deb
	mv "$DEBIAN_GIT_TREE.tmp" "$DEBIAN_GIT_TREE"
}

# On a machine without them, the Kubernetes binaries build (CPU, for
# most of 15 minutes) while the installs below wait on the network.
kube_build_pid='' kube_build_log=''
if [ "$(id -u)" -eq 0 ] && ! scripts/kube/build.sh --check; then
	kube_build_log=$(mktemp "${TMPDIR:-/tmp}/cove-kube-build.XXXXXX")
	log "Kubernetes binaries: building meanwhile (log $kube_build_log)"
	set -m # its own process group, for an early exit to stop whole
	COVE_KUBE_BINARIES_ONLY=1 scripts/kube/build.sh >"$kube_build_log" 2>&1 &
	kube_build_pid=$!
	set +m
	trap 'kill -- "-$kube_build_pid" 2>/dev/null || true' EXIT
fi

if [ "$(id -u)" -eq 0 ]; then
	install_deps
else
	echo "scripts/test.sh: not root: not installing anything; tests that need root will be skipped" >&2
fi

log "gofmt, go vet, staticcheck"
unformatted=$(git ls-files -z '*.go' | xargs -0 gofmt -l)
if [ -n "$unformatted" ]; then
	echo "gofmt would change: $unformatted" >&2
	exit 1
fi
go vet ./...
staticcheck ./...
shellcheck install.sh scripts/*.sh scripts/bench/*.sh scripts/vmtest/*.sh scripts/vmdebian/*.sh scripts/kube/*.sh .ci/run

log "web UI: build it and check the committed bundle is what the sources make"
scripts/build-web.sh
# --porcelain: a chunk added or gone counts, not only a changed file.
if [ -n "$(git status --porcelain -- ide/web/dist)" ]; then
	echo "ide/web/dist is not what scripts/build-web.sh makes from ide/web/src: run it and commit the result" >&2
	git status --short -- ide/web/dist >&2
	exit 1
fi

log "registry"
eval "$(scripts/registry.sh start | sed 's/^/export /')"
# What the run started goes when it ends, however it ends.
kube_up='' vm_pid=''
cleanup() {
	# The VM checks and the Kubernetes build are process groups of their
	# own (set -m).
	[ -z "$vm_pid" ] || kill -- "-$vm_pid" 2>/dev/null || true
	[ -z "$kube_build_pid" ] || kill -- "-$kube_build_pid" 2>/dev/null || true
	[ -z "$kube_up" ] || scripts/kube/cluster.sh down
	scripts/registry.sh stop
}
trap cleanup EXIT

if [ "$(id -u)" -eq 0 ]; then
	# A real single-node cluster for the --kube tests; its binaries are
	# built once (about 20 minutes cold on 2 cores) and cached.
	if [ -n "$kube_build_pid" ]; then
		log "Kubernetes binaries: waiting for their build"
		if ! wait "$kube_build_pid"; then
			cat "$kube_build_log" >&2
			echo "scripts/test.sh: building the Kubernetes binaries failed (log above)" >&2
			exit 1
		fi
		rm -f "$kube_build_log"
		kube_build_pid=''
	fi
	log "Kubernetes test cluster (scripts/kube/cluster.sh)"
	kube_up=1
	COVE_TEST_KUBECONFIG=$(scripts/kube/cluster.sh up | sed -n 's/^KUBECONFIG=//p')
	export COVE_TEST_KUBECONFIG
fi

# The busybox VM checks: qemu, in the background while the Go tests run
# (most of cmd/cove's time is waiting on containers, registries and
# browsers, and the VMs would otherwise follow it on the same cores for
# several minutes); their output is printed whole after the Go tests',
# and a failure fails the run. COVE_TEST_VM_OVERLAP=0 runs them after
# instead. The Debian+systemd VM always runs after: its user checks have
# a time budget that software emulation on cores the Go tests also use
# went past (175 s for 170).
vm_checks() {
	log "cgroup v2 checks in a qemu VM (scripts/vmtest.sh)"
	scripts/vmtest.sh
	log "the released arm64 binary in an aarch64 VM (COVE_VM_ARCH=arm64 scripts/vmtest.sh)"
	COVE_VM_ARCH=arm64 scripts/vmtest.sh
}
vm_debian() {
	log "Debian 12 with systemd, as a user and as root, in a qemu VM (scripts/vmdebian.sh)"
	scripts/vmdebian.sh
}
if [ "${COVE_TEST_VM_OVERLAP:-1}" = 1 ]; then
	vm_log=$(mktemp "${TMPDIR:-/tmp}/cove-vm-log.XXXXXX")
	set -m # its own process group, for cleanup to stop whole
	vm_checks >"$vm_log" 2>&1 &
	vm_pid=$!
	set +m
	log "the VM checks run meanwhile (pid $vm_pid, log $vm_log)"
fi

log "go test"
# -json through scripts/testreport: each package's line, the output of
# what failed, every skip with its reason and a closing count. In CI a
# skip not on scripts/expected-skips fails the run: a test that quietly
# stopped running (a missing tool, an image that did not build) is seen.
go build -o "${TMPDIR:-/tmp}/cove-testreport" ./scripts/testreport
# The Compose web app's end-to-end test (PostgreSQL, Redis, an app, all
# built with cove build from Debian's packages) keeps its three images in
# a cache across runs: built once (most of 10 minutes), pushed each run.
export COVE_TEST_COMPOSE_DEBIAN=${COVE_TEST_COMPOSE_DEBIAN:-1}
export COVE_TEST_COMPOSE_CACHE=${COVE_TEST_COMPOSE_CACHE:-/var/cache/cove-test/compose-images}
mkdir -p "$COVE_TEST_COMPOSE_CACHE"
strict=()
[ -n "${CI:-}" ] && strict=(-strict)
# Most end-to-end tests wait (on containers, a browser, a cluster) more
# than they compute: four at a time per package instead of go test's
# default of one per core keep the two cores of the CI machine busy.
# COVE_TEST_JSON=FILE keeps go test's events for a closer look.
go test -json -count=1 -timeout 45m -parallel "${COVE_TEST_PARALLEL:-4}" ./... |
	tee "${COVE_TEST_JSON:-/dev/null}" |
	"${TMPDIR:-/tmp}/cove-testreport" -expect scripts/expected-skips "${strict[@]}"

if [ -n "${COVE_TEST_KUBECONFIG:-}" ]; then
	# Done with it: its cores go to the VM checks.
	scripts/kube/cluster.sh down
	kube_up=''
fi

if [ "$(id -u)" -eq 0 ] && id covetest >/dev/null 2>&1; then
	# The pulls that keep layer snapshots, too: with subordinate ids they
	# extract in the user namespace helper (the test binary re-executed).
	# And the store's use records as a user's are (/dev/shm its memory).
	log "extractor, snapshot and use-record tests as the unprivileged user covetest"
	tmp=$(mktemp -d)
	chmod 755 "$tmp"
	go test -c -o "$tmp/image.test" ./image
	(cd "$tmp" && runuser -u covetest -- ./image.test -test.run 'TestExtract|TestClone|FuzzExtract|TestPullSibling|TestPullFailedAfterASnapshot|TestPlanSnapshots|TestUseInMemoryAndTornRecords' -test.count=1)
	rm -rf "$tmp"
fi

if [ -n "$vm_pid" ]; then
	vm_status=0
	wait "$vm_pid" || vm_status=$?
	vm_pid=''
	cat "$vm_log"
	rm -f "$vm_log"
	if [ "$vm_status" -ne 0 ]; then
		echo "scripts/test.sh: the VM checks failed (exit $vm_status)" >&2
		exit "$vm_status"
	fi
else
	vm_checks
fi
vm_debian

log "fuzz the extractor for ${FUZZTIME:-20s}"
go test -run '^$' -fuzz FuzzExtract -fuzztime "${FUZZTIME:-20s}" -fuzzminimizetime 50x ./image
