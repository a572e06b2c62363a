#!/bin/sh
# Runs Debian's docker-registry (the CNCF distribution server) on 127.0.0.1
# with filesystem storage in a temporary directory.
#
#   scripts/registry.sh start   starts it and prints COVE_TEST_REGISTRY=127.0.0.1:PORT
#   scripts/registry.sh env     prints that line again for the running one
#   scripts/registry.sh stop    stops it and deletes its storage
#
# State lives in $COVE_REGISTRY_STATE (default /tmp/cove-registry-$USER).
set -eu

state=${COVE_REGISTRY_STATE:-/tmp/cove-registry-$(id -u)}
bin=${DOCKER_REGISTRY:-/usr/bin/docker-registry}

free_port() {
	# Ask the kernel for a free port by binding port 0.
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start() {
	if [ -f "$state/pid" ] && kill -0 "$(cat "$state/pid")" 2>/dev/null; then
		cat "$state/env"
		return
	fi
	[ -x "$bin" ] || { echo "registry.sh: $bin not found: apt-get install docker-registry" >&2; exit 1; }
	rm -rf "$state"
	mkdir -p "$state/storage"
	port=${COVE_REGISTRY_PORT:-$(free_port)}
	cat >"$state/config.yml" <<CONF
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $state/storage
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$port
CONF
	"$bin" serve "$state/config.yml" >"$state/log" 2>&1 &
	echo $! >"$state/pid"
	i=0
	until curl -fsS "http://127.0.0.1:$port/v2/" >/dev/null 2>&1; do
		i=$((i + 1))
		if [ $i -gt 100 ] || ! kill -0 "$(cat "$state/pid")" 2>/dev/null; then
			echo "registry.sh: the registry did not start; its log:" >&2
			cat "$state/log" >&2
			exit 1
		fi
		sleep 0.1
	done
	echo "COVE_TEST_REGISTRY=127.0.0.1:$port" >"$state/env"
	cat "$state/env"
}

stop() {
	if [ -f "$state/pid" ]; then
		kill "$(cat "$state/pid")" 2>/dev/null || true
	fi
	rm -rf "$state"
}

case "${1:-}" in
start) start ;;
env) cat "$state/env" ;;
stop) stop ;;
*) echo "usage: $0 start|env|stop" >&2; exit 2 ;;
esac
