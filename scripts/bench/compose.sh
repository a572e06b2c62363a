#!/bin/bash
# A Compose project brought up with cove (devcontainer.json over the
# Compose file, `cove up --detach`) and with Debian's podman-compose
# (`podman-compose up -d`, podman with --runtime runc and cgroupfs), side
# by side on one machine, from the same images in one local registry:
#
#   small   three busybox services: app (the workspace), db (nc answering
#           on 5432) and worker; ready when `nc db 5432` in app answers
#   webapp  (if the cached images of TestComposeDebianWebApp exist) the web
#           app with PostgreSQL 15 and Redis 7 built from Debian's
#           packages; ready when the app's own test (python3 test_app.py,
#           to db:5432 and redis:6379) passes in app
#
# Each round, per tool: cold up (an empty image store: the images are
# pulled), down, warm up (images cached, containers made anew), down.
# "ready" is from the start of up until the readiness check first passes
# (polled every 100 ms). podman-compose 1.0.3 sleeps 1 s after each podman
# command it runs (podman_compose.py, Podman.run's sleep=1); the row
# "podman-compose (no sleeps)" is the same podman-compose with time.sleep
# made a no-op, to show what is podman's and what is the sleeps'.
#
# Usage: sudo scripts/bench/compose.sh
#
# Environment:
#   RUNS=5          rounds of the small project
#   WEBAPP_RUNS=3   rounds of the web app (0: skip it)
#   COVE_TEST_COMPOSE_CACHE  where TestComposeDebianWebApp keeps its images
#                   (default /var/cache/cove-test/compose-images)
#   BENCH_OUT       results file (default scripts/bench/results/compose-latest.md)
#   COVE_COMPOSE_REGISTRY_STATE  state dir of scripts/registry.sh (default
#                   /tmp/cove-compose-bench-registry); stopped at the end
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
runs=${RUNS:-5}
webapp_runs=${WEBAPP_RUNS:-3}
cache=${COVE_TEST_COMPOSE_CACHE:-/var/cache/cove-test/compose-images}
out_md=${BENCH_OUT:-$here/results/compose-latest.md}
reg_state=${COVE_COMPOSE_REGISTRY_STATE:-/tmp/cove-compose-bench-registry}

log() { printf 'compose.sh: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

[ "$(id -u)" = 0 ] || die "must run as root (namespaces, cgroups, podman)"
case $runs$webapp_runs in *[!0-9]*) die "RUNS and WEBAPP_RUNS must be numbers" ;; esac

# shellcheck disable=SC1091 # scripts/bench/lib.sh, checked on its own
. "$here/lib.sh"
need podman podman
need podman-compose podman-compose
need runc runc
need pasta passt
need python3 python3
need htpasswd apache2-utils
[ -x /usr/bin/docker-registry ] || need docker-registry docker-registry
[ -x /bin/busybox ] || { apt-get install -y -q busybox-static >&2 || die "apt-get install busybox-static failed"; }
need go "golang (or a Go toolchain in PATH) to build cove"
crane=$(find_crane) || exit 1

tmp=$(mktemp -d /tmp/cove-bench-compose.XXXXXX)
cove=$tmp/cove
export COVE_ROOT=$tmp/coveroot
pod=$tmp/podman # its --root, --runroot and network config, made anew for a cold up
registry() { COVE_REGISTRY_STATE=$reg_state "$repo/scripts/registry.sh" "$@"; }

# podman as podman-compose runs it: a wrapper with the flags that work
# here (no systemd: cgroupfs, file events), its own storage, and the
# local registry as an insecure one; rlimits runc may set here (as
# latency.sh's --ulimit: the default nofile is above this machine's hard
# limit).
hard=$(ulimit -Hn)
printf '[containers]\ndefault_ulimits = ["nofile=%s:%s", "nproc=32768:32768"]\n' "$hard" "$hard" >"$tmp/containers.conf"
cat >"$tmp/podman-wrap" <<EOF
#!/bin/sh
export CONTAINERS_REGISTRIES_CONF=$tmp/registries.conf CONTAINERS_CONF=$tmp/containers.conf
exec podman --root $pod/root --runroot $pod/run --network-config-dir $pod/net --runtime runc --cgroup-manager cgroupfs --events-backend file "\$@"
EOF
chmod +x "$tmp/podman-wrap"
# podman-compose with time.sleep a no-op.
cat >"$tmp/podman-compose-nosleep" <<'EOF'
#!/usr/bin/python3
import runpy, sys, time
time.sleep = lambda s: None
sys.argv[0] = "podman-compose"
runpy.run_path("/usr/bin/podman-compose", run_name="__main__")
EOF
chmod +x "$tmp/podman-compose-nosleep"

cleanup() {
	local d
	for d in "$tmp"/p-*; do
		[ -d "$d/.devcontainer" ] || continue
		[ ! -x "$cove" ] || "$cove" rm -f "$(cove_name "$d")" >/dev/null 2>&1 || true
	done
	"$tmp/podman-wrap" rm -a -f --time 0 >/dev/null 2>&1 || true
	"$tmp/podman-wrap" pod rm -a -f >/dev/null 2>&1 || true
	registry stop >/dev/null 2>&1 || true
	for _ in 1 2 3; do
		unmount_under "$tmp"
		rm -rf "$tmp" 2>/dev/null && break
		sleep 1
	done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cove_rev=$(build_cove "$repo" "$cove") || exit 1
busybox_layer "$tmp/rootfs" "$tmp/layer.tar.gz" compose-bench
reg_env=$(registry start) || die "scripts/registry.sh start failed"
reg=$(printf '%s\n' "$reg_env" | sed -n 's/^COVE_TEST_REGISTRY=//p')
[ -n "$reg" ] || die "scripts/registry.sh start printed no COVE_TEST_REGISTRY= line"
printf '[[registry]]\nlocation = "%s"\ninsecure = true\n' "$reg" >"$tmp/registries.conf"
busybox=$reg/bench/compose-busybox:1
push_layer "$crane" "$tmp/layer.tar.gz" "$busybox"

# ------------------------------------------------------------ the projects

# small_project DIR: the three busybox services.
small_project() {
	mkdir -p "$1/.devcontainer"
	cat >"$1/.devcontainer/devcontainer.json" <<-'EOF'
		{"dockerComposeFile": "docker-compose.yml", "service": "app", "workspaceFolder": "/workspaces/small"}
	EOF
	cat >"$1/.devcontainer/docker-compose.yml" <<-EOF
		services:
		  app:
		    image: $busybox
		    command: ["sleep", "100000"]
		    volumes: ["..:/workspaces/small"]
		    depends_on: [db, worker]
		  db:
		    image: $busybox
		    command: ["sh", "-c", "while true; do echo pong | nc -l -p 5432; done"]
		    volumes: ["dbdata:/data"]
		  worker:
		    image: $busybox
		    command: ["sleep", "100000"]
		volumes:
		  dbdata:
	EOF
	printf 'services:\n  worker:\n    command: ["sleep", "100000"]\n' >"$1/.devcontainer/podman.yml" # the same: nothing to change
}

# webapp_project DIR: TestComposeDebianWebApp's project (cmd/cove/
# compose_debian_test.go) on its cached images. Under podman-compose each
# service has a network namespace of its own (cove's share one, as a
# pod's do), so podman.yml makes PostgreSQL and Redis listen on every
# address and PostgreSQL trust the network, as an image meant for Compose
# would.
webapp_project() {
	mkdir -p "$1/.devcontainer"
	cat >"$1/.devcontainer/devcontainer.json" <<-'EOF'
		{"dockerComposeFile": "docker-compose.yml", "service": "app", "workspaceFolder": "/workspaces/webapp", "shutdownAction": "stopCompose"}
	EOF
	cat >"$1/.devcontainer/docker-compose.yml" <<-EOF
		services:
		  app:
		    image: $reg/bench/webapp-app:1
		    command: sleep infinity
		    volumes: ["..:/workspaces/webapp"]
		    environment:
		      DATABASE_URL: postgresql://postgres@db:5432/postgres
		      REDIS_URL: redis://redis:6379/0
		    depends_on:
		      db: {condition: service_healthy}
		      redis: {condition: service_started}
		  db:
		    image: $reg/bench/webapp-db:1
		    healthcheck:
		      test: ["CMD", "pg_isready", "-h", "127.0.0.1", "-p", "5432"]
		      interval: 2s
		      retries: 30
		    volumes: ["pgdata:/srv/pgdata"]
		  redis:
		    image: $reg/bench/webapp-redis:1
		volumes:
		  pgdata:
	EOF
	cat >"$1/.devcontainer/podman.yml" <<-'EOF'
		services:
		  db:
		    command: ["/usr/lib/postgresql/15/bin/postgres", "-D", "/var/lib/postgresql/15/main", "-c", "config_file=/etc/postgresql/15/main/postgresql.conf", "-c", "listen_addresses=*", "-c", "hba_file=/srv/pg_hba.conf"]
		    volumes: ["./pg_hba.conf:/srv/pg_hba.conf:ro"]
		    healthcheck: {disable: true}
		  redis:
		    command: ["redis-server", "--bind", "0.0.0.0", "--port", "6379", "--protected-mode", "no"]
	EOF
	printf 'local all all trust\nhost all all 0.0.0.0/0 trust\n' >"$1/.devcontainer/pg_hba.conf"
	cat >"$1/test_app.py" <<-'EOF'
		import os, unittest
		import psycopg2, redis

		class AppTest(unittest.TestCase):
		    def test_database(self):
		        with psycopg2.connect(os.environ["DATABASE_URL"]) as c, c.cursor() as cur:
		            cur.execute("CREATE TABLE IF NOT EXISTS visits (n int)")
		            cur.execute("INSERT INTO visits VALUES (1)")
		            cur.execute("SELECT count(*) FROM visits")
		            self.assertGreaterEqual(cur.fetchone()[0], 1)

		    def test_cache(self):
		        r = redis.Redis.from_url(os.environ["REDIS_URL"])
		        r.set("k", "v")
		        self.assertEqual(r.get("k"), b"v")

		if __name__ == "__main__":
		    unittest.main()
	EOF
}

# ------------------------------------------------------------ the tools

# Each tool: up DIR, ready DIR (the check, once), down DIR. The project's
# directory name is its podman-compose project name; its cove workspace
# is that and a hash of its path (workspace.Name).
now() { echo "${EPOCHREALTIME/./}"; } # µs

cove_up() { "$cove" up --detach "$1" >/dev/null 2>"$tmp/err" || die "cove up $1: $(cat "$tmp/err")"; }
cove_name() { echo "$(basename "$1")-$(printf %s "$1" | sha256sum | cut -c1-6)"; }
cove_exec() {
	local dir=$1
	shift
	"$cove" exec -w "/workspaces/$kind" "$(cove_name "$dir")" "$@"
}
cove_down() { "$cove" rm -f "$(cove_name "$1")" >/dev/null 2>"$tmp/err" || die "cove rm -f: $(cat "$tmp/err")"; }
cove_fresh() { rm -rf "$COVE_ROOT"; }

pc() { # pc TOOL DIR ARGS...
	local tool=$1 dir=$2
	shift 2
	(cd "$dir/.devcontainer" && "$tool" --podman-path "$tmp/podman-wrap" -p "$(basename "$dir")" \
		-f docker-compose.yml -f podman.yml "$@") >"$tmp/pc.out" 2>&1 || die "podman-compose $*: $(tail -n 20 "$tmp/pc.out")"
	# It goes on (exit 0) when a container fails to start.
	! grep -Eq '^Error: (runc|unable to start)' "$tmp/pc.out" || die "podman-compose $*: $(grep '^Error' "$tmp/pc.out" | head -n 5)"
}
podman_exec() {
	local dir=$1
	shift
	"$tmp/podman-wrap" exec -w "/workspaces/$kind" "$(basename "$dir")_app_1" "$@"
}
podman_fresh() {
	"$tmp/podman-wrap" rm -a -f --time 0 >/dev/null 2>&1 || true
	unmount_under "$pod"
	rm -rf "$pod"
	mkdir -p "$pod/net"
}

ready_check() { # ready_check EXEC DIR
	case $kind in
	small) [ "$("$1" "$2" sh -c 'nc db 5432 </dev/null' 2>/dev/null)" = pong ] ;;
	webapp) "$1" "$2" python3 test_app.py >/dev/null 2>&1 ;;
	esac
}

# timed_up LABEL UPCMD EXEC DIR: appends "LABEL up", "LABEL ready" times (ms).
timed_up() {
	local label=$1 up=$2 ex=$3 dir=$4 t0 t1 deadline
	t0=$(now)
	$up "$dir"
	t1=$(now)
	deadline=$((t0 + 180000000))
	until ready_check "$ex" "$dir"; do
		[ "$(now)" -lt "$deadline" ] || die "$label: not ready 180 s after up"
		sleep 0.1
	done
	printf '%s up\t%s\n%s ready\t%s\n' "$label" $(((t1 - t0) / 1000)) "$label" $((($(now) - t0) / 1000)) >>"$tmp/times"
}
timed_down() {
	local t0
	t0=$(now)
	$2 "$3"
	printf '%s down\t%s\n' "$1" $((($(now) - t0) / 1000)) >>"$tmp/times"
}

pc_up() { pc podman-compose "$1" up -d; }
pc_down() { pc podman-compose "$1" down; }
pcn_up() { pc "$tmp/podman-compose-nosleep" "$1" up -d; }
pcn_down() { pc "$tmp/podman-compose-nosleep" "$1" down; }

# round KIND N: one round of every tool on the KIND project.
round() {
	local kind=$1 n=$2 dir t
	for t in cove podman-compose podman-compose-nosleep; do
		dir=$tmp/p-$kind-$n-${t//-/}
		"${kind}_project" "$dir"
		case $t in
		cove)
			cove_fresh
			timed_up "$kind cove cold" cove_up cove_exec "$dir"
			timed_down "$kind cove" cove_down "$dir"
			timed_up "$kind cove warm" cove_up cove_exec "$dir"
			timed_down "$kind cove" cove_down "$dir"
			;;
		podman-compose)
			podman_fresh
			timed_up "$kind podman-compose cold" pc_up podman_exec "$dir"
			timed_down "$kind podman-compose" pc_down "$dir"
			timed_up "$kind podman-compose warm" pc_up podman_exec "$dir"
			timed_down "$kind podman-compose" pc_down "$dir"
			;;
		podman-compose-nosleep)
			podman_fresh
			timed_up "$kind podman-compose (no sleeps) cold" pcn_up podman_exec "$dir"
			timed_down "$kind podman-compose (no sleeps)" pcn_down "$dir"
			timed_up "$kind podman-compose (no sleeps) warm" pcn_up podman_exec "$dir"
			timed_down "$kind podman-compose (no sleeps)" pcn_down "$dir"
			;;
		esac
		# down removed the containers; the project's volumes go with it
		"$tmp/podman-wrap" volume prune -f >/dev/null 2>&1 || true
	done
}

kinds=()
[ "$runs" -eq 0 ] || kinds+=(small)
webapp_dir=
if [ "$webapp_runs" -gt 0 ] && [ -d "$cache" ]; then
	webapp_dir=$(find "$cache" -mindepth 2 -maxdepth 2 -name 'done' -printf '%h\n' | head -n1)
fi
if [ -n "$webapp_dir" ]; then
	for s in app db redis; do
		log "pushing the cached $s image ($webapp_dir/$s)"
		"$crane" --insecure push "$webapp_dir/$s" "$reg/bench/webapp-$s:1" >/dev/null 2>"$tmp/err" ||
			die "crane push $webapp_dir/$s: $(cat "$tmp/err")"
	done
	kinds+=(webapp)
else
	log "no cached web app images under $cache (run TestComposeDebianWebApp with COVE_TEST_COMPOSE_DEBIAN=1 once) or WEBAPP_RUNS=0: the small project only"
fi

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
: >"$tmp/times"
for kind in "${kinds[@]}"; do
	n=$runs
	[ "$kind" = small ] || n=$webapp_runs
	for i in $(seq 1 "$n"); do
		log "$kind: round $i of $n"
		round "$kind" "$i"
	done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# ------------------------------------------------------------ the report

med() { awk -F'\t' -v l="$1" '$1 == l { print $2 }' "$tmp/times" | sort -n | awk '{ a[NR] = $1 } END { if (NR == 0) print ""; else if (NR % 2) print a[(NR + 1) / 2]; else print int((a[NR / 2] + a[NR / 2 + 1]) / 2) }'; }
ratio() { awk -v a="$(med "$1")" -v b="$(med "$2")" 'BEGIN { if (a != "" && b > 0) printf "%.2f×", a / b; else printf "—" }'; }

report() {
	echo "# A Compose project: cove up against podman-compose"
	echo
	echo "- Date: $(date -u '+%Y-%m-%d %H:%M UTC'); small project $runs rounds${webapp_dir:+, web app $webapp_runs rounds}; medians in ms"
	echo "- Host: $(nproc) CPUs, Linux $(uname -r); load average $load_before before, $load_after after (other jobs were running)"
	echo "- cove $cove_rev (static); podman-compose $(dpkg-query -W -f '${Version}' podman-compose); $(podman --version) with runc, cgroupfs; $(runc --version | head -n1)"
	echo "- cold: an empty image store (images pulled from a local registry); warm: images cached, containers made anew; ready: from the start of up until the readiness check passes; down: cove rm -f / podman-compose down"
	echo
	local k t
	for k in "${kinds[@]}"; do
		echo "## $k"
		echo
		echo "| tool | cold up | cold ready | warm up | warm ready | down |"
		echo "|---|---:|---:|---:|---:|---:|"
		for t in cove podman-compose "podman-compose (no sleeps)"; do
			echo "| $t | $(med "$k $t cold up") | $(med "$k $t cold ready") | $(med "$k $t warm up") | $(med "$k $t warm ready") | $(med "$k $t down") |"
		done
		echo
		echo "cove / podman-compose: cold ready $(ratio "$k cove cold ready" "$k podman-compose cold ready"), warm ready $(ratio "$k cove warm ready" "$k podman-compose warm ready"), down $(ratio "$k cove down" "$k podman-compose down");"
		echo "cove / podman-compose (no sleeps): cold ready $(ratio "$k cove cold ready" "$k podman-compose (no sleeps) cold ready"), warm ready $(ratio "$k cove warm ready" "$k podman-compose (no sleeps) warm ready"), down $(ratio "$k cove down" "$k podman-compose (no sleeps) down")"
		echo
	done
}
mkdir -p "$(dirname "$out_md")"
report | tee "$out_md"
log "report written to $out_md"
