#!/usr/bin/env bash
# deploy/kubernetes on a real cluster: the public CI's kind job
# (.github/workflows/ci.yml) runs it on a fresh kind cluster whose network
# plugin, kindnet, enforces NetworkPolicy (kind 0.24 and later), with
# kubectl, helm and a Docker engine. It:
#
#   1. builds the image and loads it into the cluster's nodes;
#   2. installs Prometheus (scraping the pods by their prometheus.io
#      annotations) and prometheus-adapter with the rule of
#      hpa-custom-metrics.yaml's comment;
#   3. applies deploy/kubernetes as docs/DEPLOY.md says, with the image set
#      and hpa-custom-metrics.yaml listed in place of hpa.yaml, and the
#      Secret of tokens, into a namespace that enforces the Pod Security
#      Standard "restricted" (and the apply must draw no warning);
#   4. calls through the Service, from a pod of another namespace: with the
#      token, and without one (401);
#   5. rolls the Deployment while a client calls in a loop: no call lost;
#   6. loads the pods with calls that hold their workers: the autoscaler
#      adds a replica, and removes it once the load stops;
#   7. checks the NetworkPolicy: a pod without it reaches PyPI, a server pod
#      does not (its install error says the connection timed out, so DNS,
#      which the policy allows, answered).
#
# Every wait is bounded; the first failure ends the script with the state
# of the namespace. It leaves the cluster as it is (kind delete cluster).

# The client scripts are single-quoted: they expand in the client pods.
# shellcheck disable=SC2016
set -euo pipefail
cd "$(dirname "$0")/../.."

ns=mcp
# The client pods' namespace: curl's image is not "restricted".
clients=clients
image="mcp-run-python:kind"
cluster="${KIND_CLUSTER_NAME:-kind}"
# The image the client pods run, for curl.
curl_image=curlimages/curl:8.11.1
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

step() { echo "== $*"; }
fail() {
	echo "FAIL: $*" >&2
	kubectl -n "$ns" get all,hpa,networkpolicy -o wide >&2 || true
	kubectl -n "$ns" describe hpa mcp-run-python >&2 || true
	kubectl -n "$ns" logs -l app.kubernetes.io/name=mcp-run-python --tail=50 --prefix >&2 || true
	exit 1
}

step "build the image and load it into kind"
docker build -t "$image" .
kind load docker-image --name "$cluster" "$image"

step "Prometheus and prometheus-adapter"
helm repo add prometheus-community https://prometheus-community.github.io/helm-charts >/dev/null
helm repo update >/dev/null
helm install prometheus prometheus-community/prometheus -n monitoring --create-namespace --wait --timeout 5m \
	--set alertmanager.enabled=false --set kube-state-metrics.enabled=false \
	--set prometheus-node-exporter.enabled=false --set prometheus-pushgateway.enabled=false \
	--set server.persistentVolume.enabled=false --set server.global.scrape_interval=5s
# The rule is hpa-custom-metrics.yaml's, word for word.
sed -n '/^#   rules:/,/^#         metricsQuery/p' deploy/kubernetes/hpa-custom-metrics.yaml | sed 's/^#   //' >"$work/adapter.yaml"
grep -q metricsQuery "$work/adapter.yaml" || fail "no adapter rule in hpa-custom-metrics.yaml's comment"
cat >>"$work/adapter.yaml" <<'EOF'
  default: false
prometheus:
  url: http://prometheus-server.monitoring.svc
  port: 80
metricsRelistInterval: 15s
EOF
helm install prometheus-adapter prometheus-community/prometheus-adapter -n monitoring --wait --timeout 5m \
	-f "$work/adapter.yaml"

step "apply deploy/kubernetes"
kubectl create namespace "$ns"
kubectl label namespace "$ns" pod-security.kubernetes.io/enforce=restricted pod-security.kubernetes.io/warn=restricted
kubectl create namespace "$clients"
# Six tokens, six principals: the load below needs callers whose calls
# may hold both of a pod's workers (--max-calls-per-principal is 1 of 2).
for _ in 1 2 3 4 5 6; do
	head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n'
	echo
done >"$work/tokens"
token="$(head -1 "$work/tokens")"
kubectl -n "$ns" create secret generic mcp-run-python-tokens --from-file=tokens="$work/tokens"
# As docs/DEPLOY.md says: the image set in kustomization.yaml, and
# hpa-custom-metrics.yaml listed in place of hpa.yaml. For the runner's 4
# cores, a pod asks for a quarter of one (the shipped request is a core,
# and 4 pods would not fit), and the scale-down window is 30 s rather than
# 5 minutes, so that the job sees it.
cp -R deploy/kubernetes "$work/kubernetes"
(
	cd "$work/kubernetes"
	sed -i 's/^  - hpa.yaml$/  - hpa-custom-metrics.yaml/' kustomization.yaml
	grep -q '^  - hpa-custom-metrics.yaml$' kustomization.yaml || fail "kustomization.yaml lists no hpa.yaml"
	sed -i "s|^    newTag: latest$|    newName: ${image%:*}\n    newTag: ${image#*:}|" kustomization.yaml
	grep -q "^    newName: ${image%:*}$" kustomization.yaml || fail "kustomization.yaml has no image to set"
	cat >>kustomization.yaml <<'EOF'
patches:
  - target: {kind: Deployment, name: mcp-run-python}
    patch: |-
      - op: replace
        path: /spec/template/spec/containers/0/resources/requests/cpu
        value: 250m
  - target: {kind: HorizontalPodAutoscaler, name: mcp-run-python}
    patch: |-
      - op: replace
        path: /spec/behavior/scaleDown/stabilizationWindowSeconds
        value: 30
EOF
)
kubectl apply -n "$ns" -k "$work/kubernetes" 2>&1 | tee "$work/apply.log"
if grep -i warning "$work/apply.log"; then fail "applying deploy/kubernetes drew warnings"; fi
# The manifests' image pull policy is the default (Always for :latest, not
# for this tag): the loaded image is used.
kubectl -n "$ns" rollout status deploy/mcp-run-python --timeout 5m || fail "the Deployment did not become ready"

# mcp is the MCP endpoint through the Service; call_script is a shell
# function for the client pods: call CODE prints the result's text.
mcp="http://mcp-run-python.$ns.svc:3001/mcp"
call_script='call() {
	body=$(printf "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"run_python_code\",\"arguments\":{\"python_code\":\"%s\"}}}" "$1")
	curl -sS --max-time 120 -H "Authorization: Bearer $TOKEN" -H "Content-Type: application/json" \
		-H "Accept: application/json, text/event-stream" -H "MCP-Protocol-Version: 2025-06-18" -d "$body" "$MCP"
}'

# client NAME SCRIPT runs SCRIPT (after call_script) in a pod that ends with
# it; its log is the script's output.
client() {
	kubectl -n "$clients" run "$1" --image "$curl_image" --restart Never --env "TOKEN=$token" --env "MCP=$mcp" \
		--env "TOKENS=$(tr '\n' ' ' <"$work/tokens")" \
		--command -- sh -c "$call_script
$2"
}

# finished NAME waits for client NAME to end and prints its log.
finished() {
	kubectl -n "$clients" wait --for=jsonpath='{.status.phase}'=Succeeded "pod/$1" --timeout "${2:-5m}" >/dev/null ||
		{ kubectl -n "$clients" logs "$1" >&2; fail "client $1 did not succeed"; }
	kubectl -n "$clients" logs "$1"
}

step "calls through the Service"
client calls 'call "1+1"; echo
curl -sS -o /dev/null -w "%{http_code}\n" -H "Content-Type: application/json" -H "Accept: application/json, text/event-stream" -d "{}" "$MCP"'
out="$(finished calls)"
echo "$out"
grep -q '<status>success</status>' <<<"$out" || fail "no successful call: $out"
[ "$(tail -1 <<<"$out")" = 401 ] || fail "a request without the token was not refused with 401: $out"

step "roll the Deployment while calls run"
client roll 'ok=0 lost=0
while [ ! -e /tmp/stop ] && [ $((ok + lost)) -lt 600 ]; do
	if call "import time\\ntime.sleep(0.5)\\n1+1" | grep -q "<status>success</status>"; then ok=$((ok + 1)); else lost=$((lost + 1)); echo "lost a call at $(date)"; fi
	[ -e /tmp/rolled ] && touch /tmp/stop
done
echo "calls: $ok ok, $lost lost"'
kubectl -n "$clients" wait --for=condition=Ready pod/roll --timeout 2m >/dev/null
sleep 5
kubectl -n "$ns" rollout restart deploy/mcp-run-python
kubectl -n "$ns" rollout status deploy/mcp-run-python --timeout 5m || fail "the rollout did not finish"
# A few more calls on the new pods, then the client stops.
sleep 5
kubectl -n "$clients" exec roll -- touch /tmp/rolled
out="$(finished roll)"
echo "$out"
grep -q '^calls: [1-9][0-9]* ok, 0 lost$' <<<"$out" || fail "calls were lost during the rollout"

step "scale on the custom metric"
replicas() { kubectl -n "$ns" get deploy/mcp-run-python -o jsonpath='{.status.replicas}'; }
# wait_replicas OP N SECONDS waits until the replicas compare so with N.
wait_replicas() {
	local deadline=$((SECONDS + $3))
	until test "$(replicas)" "$1" "$2"; do
		[ "$SECONDS" -lt "$deadline" ] || fail "replicas $(replicas), not $1 $2 after $3 s"
		sleep 5
	done
}
wait_replicas -eq 2 60
# Six callers, each with a token of its own and a call at a time that
# holds a worker for 10 s, against 2 pods of 2 workers: 2 busy workers per
# pod and calls waiting, past the targets of 1.5 and 1.
client load 'for TOKEN in $TOKENS; do
	( while [ ! -e /tmp/stop ]; do call "import time\\ntime.sleep(10)" >/dev/null; done ) &
done
wait'
wait_replicas -ge 3 600
echo "scaled up to $(replicas) replicas"
kubectl -n "$clients" exec load -- touch /tmp/stop
finished load 2m >/dev/null
wait_replicas -eq 2 600
echo "scaled down to $(replicas) replicas"

step "the NetworkPolicy"
# Without the policy (the clients' namespace has none) a pod reaches PyPI:
# the network is there to block.
kubectl -n "$clients" run egress --image "$curl_image" --restart Never --command -- \
	curl -sS -o /dev/null --max-time 30 -w '%{http_code}\n' https://pypi.org/simple/
out="$(finished egress 2m)"
[ "$out" = 200 ] || fail "a pod without the policy cannot reach PyPI ($out): nothing to check"
# A server pod cannot: its package download times out on connecting, after
# DNS, which the policy allows, answered.
client blocked 'call "# /// script\\n# dependencies = [\\u0027cowsay\\u0027]\\n# ///\\nimport cowsay"'
out="$(finished blocked)"
echo "$out"
grep -q 'install-error' <<<"$out" || fail "a server pod installed from PyPI: $out"
grep -q 'the connection timed out' <<<"$out" || fail "the install did not fail on connecting: $out"

step "all checks passed"
