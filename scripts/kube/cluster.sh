#!/usr/bin/env bash
# A real single-node Kubernetes cluster for cove's --kube tests:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, containerd
# (CRI) and a kubelet, all on loopback, with every file under one state
# directory, images pulled from the local test registry.
#
#   scripts/kube/cluster.sh up     start it (builds the binaries once, see
#                                  build.sh); prints KUBECONFIG=… for eval
#   scripts/kube/cluster.sh down   stop it and put the host back as it was
#
# Needs root and COVE_TEST_REGISTRY (scripts/registry.sh start). The state
# directory is $COVE_KUBE_STATE (default /tmp/cove-kube).
#
# What the kubelet does to the host whatever its --root-dir says (sysctls,
# iptables chains, a few directories under /var and /run) is recorded at
# `up` and undone at `down`.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
state=${COVE_KUBE_STATE:-/tmp/cove-kube}
node=cove-node
# The node's address: the kubelet refuses a loopback one, and the host's
# own would put the kubelet on its network: the loopback interface holds
# it (this kernel has no dummy interfaces).
node_ip=10.254.254.1
api_port=${COVE_KUBE_API_PORT:-16443}
etcd_port=${COVE_KUBE_ETCD_PORT:-12379}

log() { printf 'kube: %s\n' "$*" >&2; }
die() {
	log "$*"
	exit 1
}

# start NAME CMD…: runs CMD in its own session (a test's process-group
# kill must not take the cluster down), logging to NAME.log.
start() {
	local name=$1
	shift
	setsid "$@" >"$state/log/$name.log" 2>&1 </dev/null &
	echo $! >"$state/pid/$name"
}

# wait_for WHAT SECONDS CMD…: polls CMD until it succeeds.
wait_for() {
	local what=$1 secs=$2
	shift 2
	local i
	for ((i = 0; i < secs * 10; i++)); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	log "$what did not come up in ${secs}s; the end of its log:"
	tail -n 20 "$state/log/"*.log >&2 || true
	return 1
}

# api is a request to the API server as the cluster's admin (no kubectl:
# building it would add minutes to a cold run for these few calls):
# api PATH [curl options]; fails on an HTTP error.
api() {
	local path=$1
	shift
	curl -sf --cacert "$state/pki/ca.crt" --cert "$state/pki/admin.crt" --key "$state/pki/admin.key" \
		"$@" "https://127.0.0.1:$api_port$path"
}

# node_ready succeeds once the node says it is Ready.
node_ready() {
	# The API server indents its JSON for curl.
	api "/api/v1/nodes/$node" | tr -d ' \n' | grep -q '"type":"Ready","status":"True"'
}

kubeconfig() { # NAME CN ORG
	local name=$1 cn=$2 org=$3
	cert "$name" "$cn" "$org" client
	cat >"$state/$name.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: cove-test
  cluster:
    server: https://127.0.0.1:$api_port
    certificate-authority: $state/pki/ca.crt
users:
- name: $name
  user:
    client-certificate: $state/pki/$name.crt
    client-key: $state/pki/$name.key
contexts:
- name: cove-test
  context: {cluster: cove-test, user: $name, namespace: default}
current-context: cove-test
EOF
}

cert() { # NAME CN ORG client|server [SANS]
	local name=$1 cn=$2 org=$3 kind=$4 sans=${5:-}
	local subj="/CN=$cn"
	[ -n "$org" ] && subj="/O=$org$subj"
	local ext="$state/pki/$name.ext"
	{
		echo "basicConstraints=CA:FALSE"
		echo "keyUsage=critical,digitalSignature,keyEncipherment"
		if [ "$kind" = server ]; then
			echo "extendedKeyUsage=serverAuth"
			echo "subjectAltName=$sans"
		else
			echo "extendedKeyUsage=clientAuth"
		fi
	} >"$ext"
	openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$state/pki/$name.key" -subj "$subj" -out "$state/pki/$name.csr" 2>/dev/null
	openssl x509 -req -in "$state/pki/$name.csr" -CA "$state/pki/ca.crt" -CAkey "$state/pki/ca.key" \
		-CAcreateserial -days 30 -extfile "$ext" -out "$state/pki/$name.crt" 2>/dev/null
}

pki() {
	mkdir -p "$state/pki"
	openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 \
		-subj "/CN=cove-test-ca" -keyout "$state/pki/ca.key" -out "$state/pki/ca.crt" 2>/dev/null
	cert apiserver kube-apiserver "" server \
		"IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc"
	cert apiserver-kubelet kube-apiserver-kubelet-client system:masters client
	openssl genrsa -out "$state/pki/sa.key" 2048 2>/dev/null
	openssl rsa -in "$state/pki/sa.key" -pubout -out "$state/pki/sa.pub" 2>/dev/null
	kubeconfig admin admin system:masters
	kubeconfig controller-manager system:kube-controller-manager ""
	kubeconfig scheduler system:kube-scheduler ""
	kubeconfig kubelet "system:node:$node" system:nodes
}

# pause_image builds the sandbox image from pause/main.go and pushes it to
# the test registry.
pause_image() {
	local ref=$COVE_TEST_REGISTRY/kube/pause:cove
	local dir="$state/pause"
	mkdir -p "$dir/root"
	(cd "$here/pause" && CGO_ENABLED=0 go build -trimpath -ldflags=-s -o "$dir/root/pause" .)
	tar --owner=0 --group=0 -C "$dir/root" -cf "$dir/layer.tar" pause
	crane append --insecure -f "$dir/layer.tar" -t "$ref.tmp" >/dev/null 2>"$state/log/crane.log"
	crane mutate --insecure "$ref.tmp" --entrypoint /pause -t "$ref" >/dev/null 2>>"$state/log/crane.log"
	echo "$ref"
}

containerd_config() { # SANDBOX_IMAGE
	mkdir -p "$state/cni" "$state/certs.d/$COVE_TEST_REGISTRY" "$state/containerd"
	cat >"$state/certs.d/$COVE_TEST_REGISTRY/hosts.toml" <<EOF
server = "http://$COVE_TEST_REGISTRY"
[host."http://$COVE_TEST_REGISTRY"]
  capabilities = ["pull", "resolve"]
EOF
	cat >"$state/cni/10-cove.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "cove-test", "plugins": [
  {"type": "bridge", "bridge": "cove-kube0", "isGateway": true, "ipMasq": false,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.0.0/24"}]], "dataDir": "$state/cni-ipam"}},
  {"type": "portmap", "capabilities": {"portMappings": true}},
  {"type": "loopback"}]}
EOF
	cat >"$state/containerd/config.toml" <<EOF
version = 2
root = "$state/containerd/root"
state = "$state/containerd/state"
[grpc]
  address = "$state/containerd.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "$state/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$1"
  # These machines drop CAP_SYS_RESOURCE: runc cannot lower the pause
  # container's oom_score_adj otherwise.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$state/cni"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$state/certs.d"
EOF
}

kubelet_config() {
	mkdir -p "$state/kubelet"
	cat >"$state/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $state/pki/ca.crt}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$state/containerd.sock
address: $node_ip
healthzBindAddress: 127.0.0.1
resolvConf: /etc/resolv.conf
# A test machine's disk is shared: evict only when it is really full.
evictionHard: {"nodefs.available": "1%", "imagefs.available": "1%", "memory.available": "100Mi"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
EOF
}

# record_host notes what the kubelet changes on the host, for down.
record_host() {
	{
		for k in kernel.panic kernel.panic_on_oops vm.overcommit_memory; do
			echo "sysctl $k=$(sysctl -n "$k")"
		done
		for d in /tmp/hostpath_pv /var/lib/kubelet /var/log/containers /var/log/pods /var/lib/cni /run/containerd /etc/cni /opt/cni; do
			[ -e "$d" ] || echo "created $d"
		done
		for t in filter nat mangle; do
			iptables-save -t "$t" 2>/dev/null | grep -o '^:[A-Z0-9-]*' | sed "s/^:/chain $t /"
		done
	} >"$state/host-before"
}

up() {
	[ "$(id -u)" = 0 ] || die "the test cluster needs root"
	[ -n "${COVE_TEST_REGISTRY:-}" ] || die "COVE_TEST_REGISTRY is not set: export \$(scripts/registry.sh start)"
	local bin t0
	t0=$(date +%s.%N)
	bin=$("$here/build.sh")
	export PATH=$bin:$PATH
	if [ -f "$state/pid/kubelet" ] && [ "$(cat "/proc/$(cat "$state/pid/kubelet")/comm" 2>/dev/null)" = kubelet ] &&
		api /readyz >/dev/null 2>&1; then
		echo "KUBECONFIG=$state/admin.kubeconfig"
		return
	fi
	down >/dev/null 2>&1 || true
	rm -rf "$state"
	mkdir -p "$state/log" "$state/pid"
	record_host
	pki
	local sandbox
	sandbox=$(pause_image)
	containerd_config "$sandbox"
	kubelet_config

	ip addr add "$node_ip/32" dev lo
	start etcd etcd --name cove-test --data-dir "$state/etcd" \
		--listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
		--listen-peer-urls "http://127.0.0.1:$((etcd_port + 1))" --initial-advertise-peer-urls "http://127.0.0.1:$((etcd_port + 1))" \
		--initial-cluster "cove-test=http://127.0.0.1:$((etcd_port + 1))"
	start containerd containerd --config "$state/containerd/config.toml"
	start kube-apiserver kube-apiserver --etcd-servers "http://127.0.0.1:$etcd_port" \
		--bind-address 127.0.0.1 --secure-port "$api_port" \
		--service-cluster-ip-range 10.96.0.0/24 \
		--client-ca-file "$state/pki/ca.crt" \
		--tls-cert-file "$state/pki/apiserver.crt" --tls-private-key-file "$state/pki/apiserver.key" \
		--kubelet-client-certificate "$state/pki/apiserver-kubelet.crt" --kubelet-client-key "$state/pki/apiserver-kubelet.key" \
		--kubelet-preferred-address-types InternalIP \
		--service-account-issuer https://kubernetes.default.svc \
		--service-account-key-file "$state/pki/sa.pub" --service-account-signing-key-file "$state/pki/sa.key" \
		--authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction
	wait_for kube-apiserver 60 api /readyz
	start kube-controller-manager kube-controller-manager --kubeconfig "$state/controller-manager.kubeconfig" \
		--authentication-kubeconfig "$state/controller-manager.kubeconfig" --authorization-kubeconfig "$state/controller-manager.kubeconfig" \
		--service-account-private-key-file "$state/pki/sa.key" --root-ca-file "$state/pki/ca.crt" \
		--cluster-signing-cert-file "$state/pki/ca.crt" --cluster-signing-key-file "$state/pki/ca.key" \
		--use-service-account-credentials --leader-elect=false --bind-address 127.0.0.1 --secure-port 0 \
		--enable-hostpath-provisioner
	start kube-scheduler kube-scheduler --kubeconfig "$state/scheduler.kubeconfig" \
		--authentication-kubeconfig "$state/scheduler.kubeconfig" --authorization-kubeconfig "$state/scheduler.kubeconfig" \
		--leader-elect=false --bind-address 127.0.0.1 --secure-port 0
	wait_for containerd 30 ctr --address "$state/containerd.sock" version
	start kubelet kubelet --config "$state/kubelet.yaml" --kubeconfig "$state/kubelet.kubeconfig" \
		--root-dir "$state/kubelet" --hostname-override "$node" --node-ip "$node_ip"
	wait_for "the node" 90 node_ready
	# Pods need the namespace's default ServiceAccount (even with its token
	# off) and the kube-root-ca.crt ConfigMap the controllers make.
	wait_for "the default ServiceAccount" 60 api /api/v1/namespaces/default/serviceaccounts/default
	wait_for "kube-root-ca.crt" 60 api /api/v1/namespaces/default/configmaps/kube-root-ca.crt
	# Volume claims get hostPath volumes from the controller-manager's
	# provisioner (under /tmp/hostpath_pv), deleted with their claims.
	api /apis/storage.k8s.io/v1/storageclasses -X POST -H 'Content-Type: application/json' -o /dev/null -d @- <<EOF
{"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
 "metadata": {"name": "cove-test", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
 "provisioner": "kubernetes.io/host-path", "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"}
EOF
	log "up in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')s (state $state)"
	echo "KUBECONFIG=$state/admin.kubeconfig"
}

down() {
	[ -d "$state" ] || return 0
	local t0
	t0=$(date +%s.%N)
	local p
	# The kubelet first, so it does not restart what is being stopped.
	for p in kubelet kube-scheduler kube-controller-manager kube-apiserver; do
		if [ -f "$state/pid/$p" ]; then kill "$(cat "$state/pid/$p")" 2>/dev/null || true; fi
	done
	# Every Pod's processes (containerd's shims hold them).
	if [ -S "$state/containerd.sock" ]; then
		local c
		for c in $(ctr --address "$state/containerd.sock" -n k8s.io tasks ls -q 2>/dev/null); do
			ctr --address "$state/containerd.sock" -n k8s.io tasks kill -s KILL "$c" >/dev/null 2>&1 || true
		done
	fi
	for p in containerd etcd; do
		if [ -f "$state/pid/$p" ]; then kill "$(cat "$state/pid/$p")" 2>/dev/null || true; fi
	done
	pkill -KILL -f "containerd-shim-runc-v2 .*-address $state/containerd.sock" 2>/dev/null || true
	sleep 0.5
	for p in "$state"/pid/*; do
		if [ -f "$p" ]; then kill -KILL "$(cat "$p")" 2>/dev/null || true; fi
	done
	# Mounts under the state dir, deepest first.
	local m
	while read -r m; do
		umount -l "$m" 2>/dev/null || true
	done < <(awk -v s="$state" 'index($5, s) == 1 { print $5 }' /proc/self/mountinfo | sort -r)
	# Pod network namespaces containerd made.
	while read -r m; do
		umount "$m" 2>/dev/null || true
		rm -f "$m"
	done < <(awk '$5 ~ "^/run/netns/cni-" { print $5 }' /proc/self/mountinfo)
	ip link del cove-kube0 2>/dev/null || true
	ip addr del "$node_ip/32" dev lo 2>/dev/null || true
	if [ -f "$state/host-before" ]; then
		local kind a
		while read -r kind a _; do
			case $kind in
			sysctl) sysctl -qw "$a" 2>/dev/null || true ;;
			created) rm -rf "$a" ;;
			esac
		done <"$state/host-before"
		local t chain
		for t in filter nat mangle; do
			for chain in $(iptables-save -t "$t" 2>/dev/null | grep -o '^:KUBE-[A-Z0-9-]*' | tr -d : || true); do
				grep -qx "chain $t $chain" "$state/host-before" && continue
				local rule
				while read -r rule; do
					# shellcheck disable=SC2086 # a rule is words
					iptables -t "$t" $rule 2>/dev/null || true
				done < <(iptables -t "$t" -S 2>/dev/null | grep -E -- "-j $chain( |\$)" | sed 's/^-A/-D/' || true)
				iptables -t "$t" -F "$chain" 2>/dev/null || true
				iptables -t "$t" -X "$chain" 2>/dev/null || true
			done
		done
	fi
	rm -rf "$state"
	log "down in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')s"
}

case ${1:-} in
up) up ;;
down) down ;;
*) die "usage: $0 up|down" ;;
esac
