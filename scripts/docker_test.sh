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
# `podman kube play` and its health checks the way podman runs them; brings up 2
# replicas + nginx, checks both replicas answer, translates files through the
# balancer (every download 200 whichever replica it reaches), restarts every replica
# in turn under a client loop (docker/rolling-restart.sh: no request may fail), stops
# one while requests flow (none may fail), tears it all down.
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
  [ -n "${KUBE_VOLUME:-}" ] && podman volume rm -f "$KUBE_VOLUME" >/dev/null 2>&1
  [ -n "${kube_net:-}" ] && podman network rm -f "$kube_net" >/dev/null 2>&1
  if [ -n "${lb_port:-}" ] && command -v podman-compose >/dev/null 2>&1; then
    stack down -v -t 5 >/dev/null 2>&1
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
# with STOPFILE set, sends until that file exists (at most REQUESTS): a client loop;
# creates OUTFILE.first when the first answer arrives, writes one line per request
# "HTTP-status upstream[,upstream...] outcome seconds start-epoch" (outcome: ok, refused, or the
# error; status 000 when no HTTP answer) and prints "sentences/s p50 p95 wall" of the
# answered ones (p50/p95: request latency). Sentences: short Multi30k-style
# captions, English -> German.
cat > "$tmp/load.py" <<'PY'
import http.client, json, os, socket, sys, threading, time, urllib.parse
url, total, conc, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
stop = os.environ.get("STOPFILE")
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
        if stop and os.path.exists(stop):
            break
        results[i] = one(i)
t0 = time.monotonic()
ts = [threading.Thread(target=worker, args=(w,)) for w in range(conc)]
for t in ts: t.start()
for t in ts: t.join()
wall = time.monotonic() - t0
with open(out, "w") as f:
    for r in results:
        if r:
            f.write("%03d %s %s %.3f %.3f\n" % r)
lat = sorted(r[3] for r in results if r and r[0] == 200)
q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] if lat else 0
print("%.1f %.3f %.3f %.1f" % (len(lat) * per / wall, q(0.5), q(0.95), wall))
PY
load() { "$PY" "$tmp/load.py" "$@"; }

# File translation client: files URL COUNT OUTFILE uploads COUNT files (.txt and
# .docx in turn) to URL/translate_file, then fetches each translatedFileUrl exactly as
# given (host and port included) DOWNLOADS times; one line per download:
# "name upload-status upload-replica download-status download-replica translated"
# (translated: 1 when the file came back with the source's structure and other text).
cat > "$tmp/files.py" <<'PY'
import http.client, io, json, sys, urllib.parse, uuid, zipfile
url, count, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
downloads = int(sys.argv[4]) if len(sys.argv) > 4 else 2
u = urllib.parse.urlsplit(url)
TEXT = "A man is riding a bicycle. Two dogs are playing in the snow."
W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
DOC = ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document xmlns:w="%s"><w:body>'
       '<w:p><w:r><w:t>A woman is sitting on a bench in the park.</w:t></w:r></w:p>'
       '<w:p><w:r><w:t>Children are playing soccer on a field.</w:t></w:r></w:p></w:body></w:document>' % W)
def docx():
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>')
        z.writestr("word/document.xml", DOC)
    return b.getvalue()
def request(method, host, port, path, body=None, headers=None):
    c = http.client.HTTPConnection(host, port, timeout=120)
    try:
        c.request(method, path, body, headers or {})
        r = c.getresponse()
        return r.status, (r.getheader("X-Upstream") or "-").split(", ")[-1], r.read()
    except Exception as e:
        return 0, type(e).__name__, b""
    finally:
        c.close()
def translated(name, data):
    if name.endswith(".txt"):
        return data.strip() != b"" and data.decode("utf-8", "replace").strip() != TEXT
    try:
        xml = zipfile.ZipFile(io.BytesIO(data)).read("word/document.xml").decode()
    except Exception:
        return False
    return xml.count("<w:p>") == 2 and "bench in the park" not in xml
lines = []
for i in range(count):
    name, data = ("doc%d.txt" % i, TEXT.encode()) if i % 2 == 0 else ("doc%d.docx" % i, docx())
    b = uuid.uuid4().hex
    body = ("--%s\r\nContent-Disposition: form-data; name=\"source\"\r\n\r\nen\r\n"
            "--%s\r\nContent-Disposition: form-data; name=\"target\"\r\n\r\nde\r\n"
            "--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"%s\"\r\n"
            "Content-Type: application/octet-stream\r\n\r\n" % (b, b, b, name)).encode() + data + \
           ("\r\n--%s--\r\n" % b).encode()
    st, up, raw = request("POST", u.hostname, u.port, "/translate_file", body,
                          {"Content-Type": "multipart/form-data; boundary=" + b, "Host": u.netloc})
    try:
        link = urllib.parse.urlsplit(json.loads(raw)["translatedFileUrl"])
    except Exception:
        link = None
    for _ in range(downloads):
        if link is None:
            lines.append("%s %03d %s 000 - 0" % (name, st, up))
            continue
        st2, up2, got = request("GET", link.hostname, link.port or 80, link.path)
        lines.append("%s %03d %s %03d %s %d" % (name, st, up, st2, up2, st2 == 200 and translated(name, got)))
open(out, "w").write("\n".join(lines) + "\n")
PY
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
note "model: $MODEL_DIR ($(du -sh --exclude=data "$MODEL_DIR" | cut -f1)); image: $IMAGE"

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
# the model as baked in (int8 by default: docker/Dockerfile, MODEL_INT8)
model_bytes=$(podman run --rm --entrypoint /bin/sh "$IMAGE" -c 'du -sb /opt/deepmt/model' 2>/dev/null | cut -f1)
model_bytes=${model_bytes:-0}
note "image size: $((size / 1000000)) MB (base $((base_size / 1000000)) MB, model $((model_bytes / 1000000)) MB)"
# the documented limit (docs/deployment.md, "The image"), whatever the model
check "image size $((size / 1000000)) MB <= 150 MB" test "$size" -le 150000000
check "no compiler, make or curl in the image" \
  podman run --rm --entrypoint /bin/sh "$IMAGE" 2>>"$tmp/podman.err" -c \
    'for c in gcc cc c++ g++ cpp clang make ld as curl wget; do command -v $c && exit 1; done
     ! ls /usr/bin/*-gcc* /usr/lib/gcc/*/*/cc1 2>/dev/null | grep -q .'
check "every shared library of deepmt resolves" \
  podman run --rm --entrypoint /bin/sh "$IMAGE" 2>>"$tmp/podman.err" -c \
    '/usr/lib64/ld-linux-x86-64.so.2 --list /usr/local/bin/deepmt >/tmp/l && ! grep -q "not found" /tmp/l'
hc=$(podman image inspect --format '{{json .Config.Healthcheck}}' "$IMAGE")
check "image keeps its HEALTHCHECK: deepmt probe /health" grep -q '"/usr/local/bin/deepmt","probe","/health"' <<<"$hc"
check "image user is non-root" test "$(podman image inspect --format '{{.Config.User}}' "$IMAGE" | cut -d: -f1)" != 0

# ---------------------------------------------------------------- one container
port=$(free_port)
podman rm -f -t 0 "$CNAME" >/dev/null 2>&1
t0=$(now)
if podman run -d --name "$CNAME" -p "127.0.0.1:$port:5000" --read-only --tmpfs /tmp --cpus "$BENCH_CPUS" \
     -e DEEPMT_THREADS="$(awk -v c="$BENCH_CPUS" 'BEGIN { n = int(c); print (n < c ? n + 1 : n) }')" \
     "$IMAGE" > "$tmp/run.log" 2>&1; then
  ok "container starts (port $port, --read-only --tmpfs /tmp, --cpus $BENCH_CPUS)"
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
"$PY" "$tmp/files.py" "http://127.0.0.1:$port" 2 "$tmp/files1" 1
note "file translation (read-only root, /tmp a tmpfs): $(tr '\n' ';' < "$tmp/files1")"
check "read-only root with --tmpfs /tmp: .txt and .docx translated and downloaded" \
  test "$(awk '$4 == 200 && $6 == 1' "$tmp/files1" | grep -c .)" = 2
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
# each replica's containerPort on the same host port): probes, the security
# context, DEEPMT_THREADS taken from the CPU limit and the files volume (a named
# volume here, deepmt-test-files) must work as written. podman turns the liveness
# probe into the container's health check ("ARGS || kill 1", run by /bin/sh -c);
# without systemd nothing schedules it, so the test runs it as podman would, more
# times than failureThreshold: the pod must stay up.
KUBE_VOLUME=deepmt-test-files
sed -e 's/^  replicas: .*/  replicas: 1/' -e "s#image: .*#image: $IMAGE#" \
    -e "s#claimName: deepmt-files#claimName: $KUBE_VOLUME#" \
  docker/k8s/deployment.yaml > "$tmp/k8s.yaml"
podman kube down "$tmp/k8s.yaml" >/dev/null 2>&1
podman volume rm -f "$KUBE_VOLUME" >/dev/null 2>&1
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
  khc=$(podman inspect --format '{{json .Config.Healthcheck}}' "$kc" 2>/dev/null)
  note "kube play: the liveness probe as podman runs it: $khc"
  healthy=0
  for i in 1 2 3 4 5 6; do
    podman healthcheck run "$kc" >/dev/null 2>>"$tmp/podman.err" && healthy=$((healthy + 1))
    sleep 1
  done
  running=$(podman inspect --format '{{.State.Running}}' "$kc" 2>/dev/null)
  check "kube play: the liveness probe (deepmt probe /health), run 6 times as podman runs it: $healthy healthy, pod still running" \
    test "$healthy" = 6 -a "$running" = true -a "$(in_probe "$kc" /ready)" = 200 \
      -a "$(grep -c '"/usr/local/bin/deepmt","probe","/health"' <<<"$khc")" = 1
  kports=$(podman ps --filter "name=$kc" --format '{{.Ports}}')
  check "kube play publishes the port on 127.0.0.1 only: $kports" \
    bash -c "grep -q '127.0.0.1:5000->5000' <<<'$kports' && ! grep -q '0.0.0.0' <<<'$kports'"
  "$PY" "$tmp/files.py" "http://127.0.0.1:5000" 2 "$tmp/files-kube" 1
  check "kube play: a file translated and downloaded (results on the files volume)" \
    test "$(awk '$4 == 200 && $6 == 1' "$tmp/files-kube" | grep -c .)" = 2 \
      -a "$(podman exec "$kc" sh -c 'ls /var/lib/deepmt/files | wc -l' 2>/dev/null)" = 2
  # as docs/deployment.md says: stop deepmt first (drain with the network up), then the pod
  podman stop -t 75 "$kc" >/dev/null 2>&1
else
  show "$tmp/kube.log"; not_ok "k8s Deployment runs under podman kube play"
fi
podman kube down "$tmp/k8s.yaml" >/dev/null 2>&1
podman volume rm -f "$KUBE_VOLUME" >/dev/null 2>&1
[ -n "$kube_net" ] && podman network rm -f "$kube_net" >/dev/null 2>&1
check "kube down, volume and network removed: nothing left" \
  bash -c "! podman volume exists $KUBE_VOLUME && ! podman pod exists deepmt-pod-0 && { [ -z '$kube_net' ] || ! podman network exists '$kube_net'; }"

# ---------------------------------------------------------------- compose: 2 replicas + nginx
lb_port=$(free_port)
stack down -v -t 5 >/dev/null 2>&1; podman network rm -f "${PROJECT}_default" >/dev/null 2>&1
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

# file translation through the balancer: the download may reach either replica
"$PY" "$tmp/files.py" "http://127.0.0.1:$lb_port" 6 "$tmp/files-lb" 2
note "6 files through nginx, each downloaded twice (name, upload status and replica, download status and replica, translated):"
show "$tmp/files-lb"
downloads_ok=$(awk '$4 == 200 && $6 == 1' "$tmp/files-lb" | grep -c .)
cross=$(awk '$4 == 200 && $3 != $5' "$tmp/files-lb" | grep -c .)
check "file translation through nginx: 12 of 12 downloads 200 and translated ($downloads_ok)" test "$downloads_ok" = 12
check "$cross downloads answered by the replica that did not make the file (shared files volume)" test "$cross" -gt 0

# rolling restart of every replica under a client loop: each drains, restarts
# (under podman with a new address) and gets ready before the next; nginx
# re-resolves the name, so no request fails and the restarted replicas get traffic
addrs_before=$(for c in $replicas; do podman inspect --format '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$c"; done | sort | tr '\n' ' ')
STOPFILE="$tmp/rolling.stop" load "http://127.0.0.1:$lb_port" 100000 4 "$tmp/rolling" 2 >/dev/null &
loadpid=$!
for _ in $(seq 100); do [ -e "$tmp/rolling.first" ] && break; sleep 0.1; done
t0=$(now)
if ENGINE=podman STOP_TIMEOUT=30 nice docker/rolling-restart.sh "$PROJECT" > "$tmp/rolling.log" 2>&1; then
  ok "docker/rolling-restart.sh: every replica restarted and ready again ($(elapsed "$t0") s)"
else
  show "$tmp/rolling.log"; not_ok "docker/rolling-restart.sh"
fi
sleep 2
touch "$tmp/rolling.stop"
wait "$loadpid"
addrs_after=$(for c in $replicas; do podman inspect --format '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$c"; done | sort | tr '\n' ' ')
total=$(grep -c . "$tmp/rolling")
bad=$((total - $(answered "$tmp/rolling")))
retried=$(awk '$2 ~ /,/' "$tmp/rolling" | grep -c .)
note "rolling restart: replica addresses $addrs_before-> $addrs_after; $total requests during it, $bad failed, $retried retried by nginx"
[ "$bad" = 0 ] || show "$tmp/rolling"
check "rolling restart through nginx under a client loop: $total requests, 0 failed" test "$total" -gt 0 -a "$bad" = 0
load "http://127.0.0.1:$lb_port" 30 3 "$tmp/after" >/dev/null
ups=$(awk '$1 == 200 {sub(/.*,/, "", $2); sub(/:.*/, "", $2); print $2}' "$tmp/after" | sort -u | tr '\n' ' ')
check "after the restart both replicas get traffic again through nginx (no nginx restart): $ups" \
  test "$(answered "$tmp/after")" = 30 -a "$(wc -w <<<"$ups")" = 2
lb_addr=$(podman port "$(podman ps --filter "label=com.docker.compose.project=$PROJECT" \
  --filter label=com.docker.compose.service=lb --format '{{.Names}}' | head -n1)" 2>/dev/null)
check "the balancer is published on 127.0.0.1 only: $lb_addr" \
  bash -c "grep -q '127.0.0.1:$lb_port' <<<'$lb_addr' && ! grep -q '0.0.0.0' <<<'$lb_addr'"

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
stack down -v -t 30 > "$tmp/down.log" 2>&1
podman network rm -f "${PROJECT}_default" >/dev/null 2>&1
left=$(podman ps -a --filter "label=io.podman.compose.project=$PROJECT" --format '{{.Names}}' | grep -c .)
check "compose down: no containers left ($(elapsed "$t0") s)" test "$left" = 0
check "compose network removed" bash -c "! podman network exists ${PROJECT}_default"
check "compose down -v: files volume removed" bash -c "! podman volume exists ${PROJECT}_files"
finish
