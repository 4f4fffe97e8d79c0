#!/bin/bash
# End-to-end test of deepmt's container deployment with podman (no Docker needed):
# the image (docker/Dockerfile) and the compose stack (docker/compose.yaml: replicas
# behind nginx). TAP output ("ok N - ..."), exits 1 when anything failed.
#
#   make docker-test          (or scripts/docker_test.sh; as root, Debian 12)
#
# Sets up podman when missing and builds the local base image when missing
# (docker/podman-setup.sh), then: builds the image, runs it, waits for /ready,
# translates, checks non-root / no compiler / shared libraries / HEALTHCHECK, measures
# memory and throughput under a small load, stops it with SIGTERM while requests are
# in flight (clean exit 0, nothing lost); runs the Kubernetes Deployment with
# `podman kube play`; brings up 2 replicas + nginx, checks both
# replicas answer, stops one while requests flow (none may fail), tears it all down.
# Takes minutes (the first run builds images) and is not part of `make test`.
#
# Env: DEEPMT_BASE       base image (default localhost/debian:bookworm-slim, built here)
#      DEEPMT_MODEL_DIR  model baked into the image (default models/default when it
#                        holds a model, else tests/fixtures/tiny-model)
#      DEEPMT_IMAGE      image name (default localhost/deepmt:latest, as compose.yaml)
#      BENCH_REQUESTS / BENCH_CONCURRENCY / BENCH_SENTENCES   the load for the
#                        measurements: 48 requests of 4 sentences, 8 at a time
#      BENCH_CPUS        CPU limit of the measured container (--cpus; DEEPMT_THREADS
#                        set to match; default 1, as one replica in compose.yaml)
# Images and their build cache are kept (a second run takes about a minute); the
# test's containers and network are always removed.
set -u
cd "$(dirname "$0")/.."
root=$PWD
export CONTAINERS_CONF=$root/docker/containers.conf BUILDAH_FORMAT=docker

BASE=${DEEPMT_BASE:-localhost/debian:bookworm-slim}
IMAGE=${DEEPMT_IMAGE:-localhost/deepmt:latest}
if [ -z "${DEEPMT_MODEL_DIR:-}" ]; then
  if [ -f models/default/model.safetensors ]; then DEEPMT_MODEL_DIR=models/default
  else DEEPMT_MODEL_DIR=tests/fixtures/tiny-model; fi
fi
MODEL_DIR=$DEEPMT_MODEL_DIR
BENCH_REQUESTS=${BENCH_REQUESTS:-48}
BENCH_CONCURRENCY=${BENCH_CONCURRENCY:-8}
BENCH_SENTENCES=${BENCH_SENTENCES:-4}
BENCH_CPUS=${BENCH_CPUS:-1}
PY=${PYTHON:-/usr/bin/python3}; [ -x "$PY" ] || PY=python3
PROJECT=deepmt-test
CNAME=deepmt-test-single
tmp=$(mktemp -d /tmp/deepmt-docker-test.XXXXXX)

n=0; failed=0
ok()      { n=$((n + 1)); echo "ok $n - $*"; }
not_ok()  { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $*"; }
check()   { local d=$1; shift; if "$@"; then ok "$d"; else not_ok "$d"; fi; }
note()    { echo "# $*"; }
show()    { sed 's/^/#   /' "$@" | tail -n 25; }
now()     { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
bail()    { not_ok "$*"; note "bailing out"; finish; }

stack() {  # podman-compose for the test stack, with the test's settings
  DEEPMT_BASE=$BASE DEEPMT_MODEL_DIR=$MODEL_DIR DEEPMT_LB_PORT=$lb_port DEEPMT_REPLICAS=2 \
    nice podman-compose -p "$PROJECT" -f docker/compose.yaml "$@"
}
cleanup() {
  podman rm -f -t 0 "$CNAME" >/dev/null 2>&1
  [ -f "$tmp/k8s.yaml" ] && podman kube down "$tmp/k8s.yaml" >/dev/null 2>&1
  [ -n "${kube_net:-}" ] && podman network rm -f "$kube_net" >/dev/null 2>&1
  if [ -n "${lb_port:-}" ] && command -v podman-compose >/dev/null 2>&1; then
    stack down -t 5 >/dev/null 2>&1
  fi
  podman network rm -f "${PROJECT}_default" >/dev/null 2>&1
  rm -rf "$tmp"
}
finish() {
  cleanup
  echo "1..$n"
  [ "$failed" = 0 ] && { note "all $n passed"; exit 0; }
  note "$failed of $n failed"; exit 1
}
trap 'cleanup' EXIT
trap 'note interrupted; exit 1' INT TERM

free_port() {  # a local TCP port nothing listens on
  local p
  for p in $(shuf -i 20000-40000 -n 50); do
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
  echo 28080
}
http_code() { curl -s -o /dev/null -w '%{http_code}' --max-time "${2:-10}" "$1"; }
wait_for() {  # URL seconds: until it answers 200
  local t=0
  while [ "$t" -lt "$2" ]; do
    [ "$(http_code "$1" 5)" = 200 ] && return 0
    sleep 1; t=$((t + 1))
  done
  return 1
}
in_probe() {  # CONTAINER PATH: HTTP status of a GET inside the container (bash /dev/tcp)
  podman exec "$1" bash -c 'exec 3<>/dev/tcp/127.0.0.1/5000 || exit 1
    printf "GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n" "$0" >&3; head -n1 <&3' "$2" 2>/dev/null \
    | awk '{print $2}'
}

# Load generator (python3 standard library; threads, one connection per request):
#   load URL REQUESTS CONCURRENCY OUTFILE [SENTENCES-PER-REQUEST]
# creates OUTFILE.first when the first answer arrives, writes one line per request
# "HTTP-status upstream[,upstream...] outcome seconds start-epoch" (outcome: ok, refused, or the
# error; status 000 when no HTTP answer) and prints "sentences/s p50 p95 wall" of the
# answered ones (p50/p95: request latency). Sentences: short Multi30k-style
# captions, English -> German.
cat > "$tmp/load.py" <<'PY'
import http.client, json, socket, sys, threading, time, urllib.parse
url, total, conc, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
per = int(sys.argv[5]) if len(sys.argv) > 5 else 1
SENTENCES = [
    "A man in a red shirt is riding a bike.", "Two dogs are playing in the snow.",
    "A woman is sitting on a bench in the park.", "Children are playing soccer on a field.",
    "A group of people are standing in front of a building.",
    "A little girl is eating an ice cream cone.", "A man is playing the guitar on the street.",
    "Two young men are climbing a rock wall.",
    "A black dog runs through the grass with a ball in its mouth.",
    "An old woman is selling vegetables at a market.", "A boy jumps into a swimming pool.",
    "People are walking along a busy city street at night.",
]
u = urllib.parse.urlsplit(url)
results = [None] * total
first = []
def one(i):
    q = " ".join(SENTENCES[(i + k) % len(SENTENCES)] for k in range(per))
    body = json.dumps({"q": q, "source": "en", "target": "de"})
    t, started = time.monotonic(), time.time()
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
    try:
        c.request("POST", "/translate", body, {"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        if not first:
            first.append(i)
            open(out + ".first", "w").close()
        up = (r.getheader("X-Upstream") or "-").replace(", ", ",")
        ok = r.status != 200 or isinstance(json.loads(data)["translatedText"], str)
        return (r.status, up, "ok" if ok else "bad-json", time.monotonic() - t, started)
    except ConnectionRefusedError:
        return (0, "-", "refused", time.monotonic() - t, started)
    except Exception as e:
        return (0, "-", type(e).__name__, time.monotonic() - t, started)
    finally:
        c.close()
def worker(w):
    for i in range(w, total, conc):
        results[i] = one(i)
t0 = time.monotonic()
ts = [threading.Thread(target=worker, args=(w,)) for w in range(conc)]
for t in ts: t.start()
for t in ts: t.join()
wall = time.monotonic() - t0
with open(out, "w") as f:
    for r in results:
        f.write("%03d %s %s %.3f %.3f\n" % r)
lat = sorted(r[3] for r in results if r[0] == 200)
q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] if lat else 0
print("%.1f %.3f %.3f %.1f" % (len(lat) * per / wall, q(0.5), q(0.95), wall))
PY
load() { "$PY" "$tmp/load.py" "$@"; }
answered() { awk '$1 == 200 && $3 == "ok"' "$1" | grep -c .; }

# ---------------------------------------------------------------- setup
t0=$(now)
if ! command -v curl >/dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq curl >/dev/null 2>&1
fi
if [ "$BASE" = localhost/debian:bookworm-slim ]; then
  BASE_IMAGE=$BASE docker/podman-setup.sh > "$tmp/setup.log" 2>&1
else
  PACKAGES_ONLY=1 docker/podman-setup.sh > "$tmp/setup.log" 2>&1
  podman image exists "$BASE" || podman pull -q "$BASE" >> "$tmp/setup.log" 2>&1
fi
if command -v podman >/dev/null && podman image exists "$BASE"; then
  ok "podman $(podman --version | awk '{print $3}') and base image $BASE ready ($(elapsed "$t0") s)"
else
  show "$tmp/setup.log"; bail "podman and base image $BASE"
fi
note "model: $MODEL_DIR ($(du -sh "$MODEL_DIR" | cut -f1)); image: $IMAGE"

# ---------------------------------------------------------------- image
t0=$(now)
if nice podman build --format docker --build-arg BASE="$BASE" --build-arg MODEL_DIR="$MODEL_DIR" \
     -f docker/Dockerfile -t "$IMAGE" . > "$tmp/build.log" 2>&1; then
  ok "image builds ($(elapsed "$t0") s)"
else
  show "$tmp/build.log"; bail "image builds"
fi

size=$(podman image inspect --format '{{.Size}}' "$IMAGE")
base_size=$(podman image inspect --format '{{.Size}}' "$BASE")
model_bytes=$(du -sb "$MODEL_DIR" | cut -f1)
note "image size: $((size / 1000000)) MB (base $((base_size / 1000000)) MB, model $((model_bytes / 1000000)) MB)"
check "image size $((size / 1000000)) MB is under base + model + 150 MB" \
  test "$size" -lt $((base_size + model_bytes + 150000000))
check "no compiler, make or curl in the image" \
  podman run --rm --entrypoint /bin/sh "$IMAGE" 2>>"$tmp/podman.err" -c \
    'for c in gcc cc c++ g++ cpp clang make ld as curl wget; do command -v $c && exit 1; done
     ! ls /usr/bin/*-gcc* /usr/lib/gcc/*/*/cc1 2>/dev/null | grep -q .'
check "every shared library of deepmt resolves" \
  podman run --rm --entrypoint /bin/sh "$IMAGE" 2>>"$tmp/podman.err" -c \
    '/usr/lib64/ld-linux-x86-64.so.2 --list /usr/local/bin/deepmt >/tmp/l && ! grep -q "not found" /tmp/l'
hc=$(podman image inspect --format '{{json .Config.Healthcheck}}' "$IMAGE")
check "image keeps its HEALTHCHECK on /health" grep -q '/health' <<<"$hc"
check "image user is non-root" test "$(podman image inspect --format '{{.Config.User}}' "$IMAGE" | cut -d: -f1)" != 0

# ---------------------------------------------------------------- one container
port=$(free_port)
podman rm -f -t 0 "$CNAME" >/dev/null 2>&1
t0=$(now)
if podman run -d --name "$CNAME" -p "127.0.0.1:$port:5000" --read-only --cpus "$BENCH_CPUS" \
     -e DEEPMT_THREADS="$(awk -v c="$BENCH_CPUS" 'BEGIN { n = int(c); print (n < c ? n + 1 : n) }')" \
     "$IMAGE" > "$tmp/run.log" 2>&1; then
  ok "container starts (port $port, --read-only, --cpus $BENCH_CPUS)"
else
  show "$tmp/run.log"; bail "container starts"
fi
if wait_for "http://127.0.0.1:$port/ready" 180; then
  ok "/ready answers 200 ($(elapsed "$t0") s after start)"
else
  podman logs "$CNAME" > "$tmp/logs" 2>&1; show "$tmp/logs"; bail "/ready answers 200"
fi
check "/health answers 200" test "$(http_code "http://127.0.0.1:$port/health")" = 200
curl -s --max-time 60 -H 'Content-Type: application/json' \
  -d '{"q": "A man is riding a bicycle.", "source": "en", "target": "de"}' \
  "http://127.0.0.1:$port/translate" > "$tmp/tr.json"
note "POST /translate en->de: $(head -c 300 "$tmp/tr.json")"
check "POST /translate answers with translatedText" \
  "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); assert isinstance(d["translatedText"], str)' "$tmp/tr.json"
uid=$(podman exec "$CNAME" id -u 2>/dev/null)
check "server runs as non-root (uid $uid)" test -n "$uid" -a "$uid" != 0
pid1=$(podman exec "$CNAME" cat /proc/1/comm 2>/dev/null)
check "deepmt is PID 1 (exec-form entrypoint, gets SIGTERM): $pid1" test "$pid1" = deepmt
check "podman healthcheck run: healthy" podman healthcheck run "$CNAME"

# memory and throughput under a small load (reported, not asserted)
rss0=$(podman exec "$CNAME" awk '/VmRSS/ {print $2}' /proc/1/status)
read -r sps p50 p95 wall < <(load "http://127.0.0.1:$port" "$BENCH_REQUESTS" "$BENCH_CONCURRENCY" \
                               "$tmp/bench" "$BENCH_SENTENCES")
good=$(answered "$tmp/bench")
hwm=$(podman exec "$CNAME" awk '/VmHWM/ {print $2}' /proc/1/status)
rss=$(podman exec "$CNAME" awk '/VmRSS/ {print $2}' /proc/1/status)
cg=$(podman stats --no-stream --format '{{.MemUsage}}' "$CNAME" 2>/dev/null | cut -d/ -f1)
note "load: $BENCH_REQUESTS requests of $BENCH_SENTENCES sentences, $BENCH_CONCURRENCY at a time:" \
     "$good x 200 in $wall s = $sps sentences/s, latency p50 $p50 s, p95 $p95 s" \
     "(--cpus $BENCH_CPUS; host: $(nproc) cores, load average $(cut -d' ' -f1 /proc/loadavg))"
note "memory: RSS before the load $((rss0 / 1024)) MiB, peak (VmHWM) $((hwm / 1024)) MiB," \
     "after $((rss / 1024)) MiB; container cgroup usage ${cg:-?}"
check "all $BENCH_REQUESTS load requests answered 200" test "$good" = "$BENCH_REQUESTS"

# SIGTERM while requests are in flight: they finish, the process exits 0; requests
# sent after the listener closed are refused, none may break mid-way. Requests of 6
# sentences each, so that some are being translated when SIGTERM comes.
load "http://127.0.0.1:$port" 40 4 "$tmp/drain" 6 >/dev/null &
loadpid=$!
for _ in $(seq 100); do [ -e "$tmp/drain.first" ] && break; sleep 0.1; done
t0=$(now)
podman stop -t 30 "$CNAME" >/dev/null 2>&1
stop_s=$(elapsed "$t0")
wait "$loadpid"
code=$(podman inspect --format '{{.State.ExitCode}}' "$CNAME")
check "podman stop (SIGTERM): exit code $code after $stop_s s" test "$code" = 0
check "stop took less than the 30 s grace period (no SIGKILL)" \
  awk -v s="$stop_s" 'BEGIN { exit !(s < 29) }'
answered=$(answered "$tmp/drain")
refused=$(awk '$3 == "refused"' "$tmp/drain" | grep -c .)
broken=$(awk '!($1 == 200 && $3 == "ok") && $3 != "refused"' "$tmp/drain" | grep -c .)
podman logs "$CNAME" > "$tmp/single.log" 2>&1
note "40 requests around the stop: $answered answered 200, $refused refused (after the listener closed)," \
     "$broken broken; server: $(grep -o 'draining [0-9]* requests in flight' "$tmp/single.log")"
[ "$broken" = 0 ] || show "$tmp/drain"
check "no request broken or answered with an error during the drain" test "$broken" = 0
note "last server log lines:"; tail -n 3 "$tmp/single.log" | sed 's/^/#   /'
podman rm -f "$CNAME" >/dev/null 2>&1

# another model without rebuilding: mounted read-only, chosen with DEEPMT_MODEL
port=$(free_port)
podman run -d --name "$CNAME" -p "127.0.0.1:$port:5000" \
  -v "$root/tests/fixtures/tiny-model:/models/tiny:ro" -e DEEPMT_MODEL=/models/tiny \
  "$IMAGE" > "$tmp/run.log" 2>&1
if wait_for "http://127.0.0.1:$port/ready" 60 &&
   podman logs "$CNAME" 2>&1 | grep -q 'model /models/tiny'; then
  ok "a mounted model (-v DIR:/models/tiny:ro -e DEEPMT_MODEL=/models/tiny) serves"
else
  podman logs "$CNAME" > "$tmp/logs" 2>&1; show "$tmp/logs"; not_ok "a mounted model serves"
fi
podman rm -f -t 0 "$CNAME" >/dev/null 2>&1

# ---------------------------------------------------------------- Kubernetes manifest
# podman kube play runs docker/k8s/deployment.yaml (1 replica: podman would publish
# each replica's containerPort on the same host port): probes' paths, the security
# context and DEEPMT_THREADS taken from the CPU limit must work as written.
sed -e 's/^  replicas: .*/  replicas: 1/' -e "s#image: .*#image: $IMAGE#" \
  docker/k8s/deployment.yaml > "$tmp/k8s.yaml"
podman kube down "$tmp/k8s.yaml" >/dev/null 2>&1
kube_net=podman-default-kube-network   # created by the first `kube play`; removed if so
podman network exists "$kube_net" && kube_net=
t0=$(now)
if podman kube play "$tmp/k8s.yaml" > "$tmp/kube.log" 2>&1; then
  kc=$(podman ps --filter label=app.kubernetes.io/name=deepmt --format '{{.Names}}' | grep -v infra | head -n1)
  [ -z "$kc" ] && kc=$(podman ps --format '{{.Names}}' | grep '^deepmt-pod-0-' | head -n1)
  for _ in $(seq 60); do [ "$(in_probe "$kc" /ready)" = 200 ] && break; sleep 1; done
  kinfo=$(podman exec "$kc" sh -c 'echo "$(id -u) $DEEPMT_THREADS"' 2>/dev/null)
  kro=$(podman inspect --format '{{.HostConfig.ReadonlyRootfs}} {{.HostConfig.Memory}}' "$kc" 2>/dev/null)
  note "kube play: $kc uid/DEEPMT_THREADS: $kinfo; read-only/memory limit: $kro"
  check "k8s Deployment runs under podman kube play: ready, uid 10001, DEEPMT_THREADS=1, read-only root ($(elapsed "$t0") s)" \
    test "$(in_probe "$kc" /ready)" = 200 -a "$kinfo" = "10001 1" -a "${kro%% *}" = true
else
  show "$tmp/kube.log"; not_ok "k8s Deployment runs under podman kube play"
fi
podman kube down "$tmp/k8s.yaml" >/dev/null 2>&1
[ -n "$kube_net" ] && podman network rm -f "$kube_net" >/dev/null 2>&1

# ---------------------------------------------------------------- compose: 2 replicas + nginx
lb_port=$(free_port)
stack down -t 5 >/dev/null 2>&1; podman network rm -f "${PROJECT}_default" >/dev/null 2>&1
t0=$(now)
if stack up -d --build > "$tmp/up.log" 2>&1; then
  ok "compose up -d --build: 2 replicas + nginx ($(elapsed "$t0") s, balancer port $lb_port)"
else
  show "$tmp/up.log"; bail "compose up"
fi
replicas=$(podman ps --filter "label=io.podman.compose.project=$PROJECT" \
  --filter "label=com.docker.compose.service=deepmt" --format '{{.Names}}' | sort)
check "two deepmt replicas running: $(echo $replicas)" test "$(echo "$replicas" | grep -c .)" = 2
t0=$(now)
all_ready() {
  local c
  for c in $replicas; do [ "$(in_probe "$c" /ready)" = 200 ] || return 1; done
}
for _ in $(seq 180); do all_ready && break; sleep 1; done
check "every replica's /ready is 200 ($(elapsed "$t0") s)" all_ready
check "nginx answers on port $lb_port" wait_for "http://127.0.0.1:$lb_port/lb-health" 30

load "http://127.0.0.1:$lb_port" 40 4 "$tmp/rr" >/dev/null
ups=$(awk '$1 == 200 {sub(/.*,/, "", $2); print $2}' "$tmp/rr" | sort | uniq -c)
note "40 requests through nginx, answered by (count address):"; echo "$ups" | sed 's/^/#   /'
check "all 40 requests through nginx answered 200" test "$(answered "$tmp/rr")" = 40
check "both replicas answered (round-robin)" test "$(echo "$ups" | grep -c .)" = 2

# stop one replica while requests flow: nginx retries on the other, nothing fails
victim=$(echo "$replicas" | head -n1)
load "http://127.0.0.1:$lb_port" 80 4 "$tmp/failover" 6 >/dev/null &
loadpid=$!
for _ in $(seq 100); do [ -e "$tmp/failover.first" ] && break; sleep 0.1; done
t0=$(now)
podman stop -t 30 "$victim" >/dev/null 2>&1
stopped_at=$(now)
note "stopped $victim in $(elapsed "$t0") s while 80 requests of 6 sentences were flowing"
wait "$loadpid"
code=$(podman inspect --format '{{.State.ExitCode}}' "$victim")
check "stopped replica exited 0" test "$code" = 0
bad=$((80 - $(answered "$tmp/failover")))
retried=$(awk '$2 ~ /,/' "$tmp/failover" | grep -c .)
after=$(awk -v t="$stopped_at" '$5 > t' "$tmp/failover" | grep -c .)
note "80 requests: $((80 - bad)) x 200, $bad failed, $retried retried on the other replica by nginx," \
     "$after sent after the stop"
[ "$bad" = 0 ] || show "$tmp/failover"
check "no request failed while a replica stopped" test "$bad" = 0
last=$(awk -v t="$stopped_at" '$5 > t {sub(/.*,/, "", $2); print $2}' "$tmp/failover" | sort -u | grep -c .)
check "the $after requests sent after the stop all went to the remaining replica" \
  test "$after" -gt 0 -a "$last" = 1

# ---------------------------------------------------------------- teardown
t0=$(now)
stack down -t 30 > "$tmp/down.log" 2>&1
podman network rm -f "${PROJECT}_default" >/dev/null 2>&1
left=$(podman ps -a --filter "label=io.podman.compose.project=$PROJECT" --format '{{.Names}}' | grep -c .)
check "compose down: no containers left ($(elapsed "$t0") s)" test "$left" = 0
check "compose network removed" bash -c "! podman network exists ${PROJECT}_default"
finish
