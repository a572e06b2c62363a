#!/bin/sh
# Runs Debian's docker-registry (the CNCF distribution server) on 127.0.0.1
# with filesystem storage in a temporary directory.
#
#   scripts/registry.sh start   starts it and prints COVE_TEST_REGISTRY=127.0.0.1:PORT, and a
#                               second one that wants a login (user cove, password
#                               cove-secret) as COVE_TEST_REGISTRY_AUTH=127.0.0.1:PORT
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

# serve NAME [AUTHCONFIG]: one registry in $state/NAME; prints its address.
serve() {
	dir=$state/$1
	mkdir -p "$dir/storage"
	port=$(free_port)
	cat >"$dir/config.yml" <<CONF
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $dir/storage
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$port
${2:-}
CONF
	"$bin" serve "$dir/config.yml" >"$dir/log" 2>&1 &
	echo $! >"$dir/pid"
	i=0
	# /v2/ answers 401 on the one that wants a login: any HTTP answer will do.
	until [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/v2/")" != 000 ]; do
		i=$((i + 1))
		if [ $i -gt 100 ] || ! kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
			echo "registry.sh: the registry did not start; its log:" >&2
			cat "$dir/log" >&2
			exit 1
		fi
		sleep 0.1
	done
	echo "127.0.0.1:$port"
}

start() {
	if [ -f "$state/env" ] && kill -0 "$(cat "$state/plain/pid")" 2>/dev/null; then
		cat "$state/env"
		return
	fi
	[ -x "$bin" ] || { echo "registry.sh: $bin not found: apt-get install docker-registry" >&2; exit 1; }
	command -v htpasswd >/dev/null || { echo "registry.sh: htpasswd not found: apt-get install apache2-utils" >&2; exit 1; }
	stop
	mkdir -p "$state"
	plain=$(serve plain)
	htpasswd -Bbn cove cove-secret >"$state/htpasswd"
	authed=$(serve auth "auth:
  htpasswd:
    realm: cove-test
    path: $state/htpasswd")
	printf 'COVE_TEST_REGISTRY=%s\nCOVE_TEST_REGISTRY_AUTH=%s\n' "$plain" "$authed" >"$state/env"
	cat "$state/env"
}

stop() {
	for pid in "$state"/*/pid; do
		if [ -f "$pid" ]; then
			kill "$(cat "$pid")" 2>/dev/null || true # gone already: nothing to stop
		fi
	done
	rm -rf "$state"
}

case "${1:-}" in
start) start ;;
env) cat "$state/env" ;;
stop) stop ;;
*) echo "usage: $0 start|env|stop" >&2; exit 2 ;;
esac
