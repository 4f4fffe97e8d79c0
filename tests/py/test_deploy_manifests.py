#!/usr/bin/python3
"""docker/k8s/*.yaml and docker/compose.yaml: parse, and say what docs/deployment.md says.

- the startup probe asks /ready (200 only once the model is loaded; /health answers
  before the load) and its periodSeconds x failureThreshold is the load budget the docs
  give; readiness /ready, liveness /health;
- the Deployment runs under `podman kube play` as written: no fixed replica count (the
  HPA's minReplicas >= 2 keeps two in a cluster);
- a preStop sleep, and a grace period that covers it plus the queue timeout; the
  documented podman stop timeout equals the grace period.
- the probes are exec probes (`deepmt probe PATH`) of one-word arguments, which
  podman kube play runs as they are; translated files on a volume every replica
  shares (a ReadWriteMany claim; a named volume in compose); ports published on
  127.0.0.1; nginx re-resolves the replicas (a resolver, no upstream block).
Static checks (no cluster, no podman: `make docker-test` runs them for real). TAP
output; skips without python3-yaml.
"""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import tap  # noqa: E402

try:
    import yaml
except ImportError:
    tap.skip("python3-yaml not installed (apt-get install python3-yaml)")
    sys.exit(tap.done())

K8S = os.path.join(REPO, "docker", "k8s")
docs = open(os.path.join(REPO, "docs", "deployment.md"), encoding="utf-8").read()
objs = {}
for name in sorted(os.listdir(K8S)):
    if name.endswith(".yaml"):
        try:
            docs_in = list(yaml.safe_load_all(open(os.path.join(K8S, name), encoding="utf-8")))
            objs.update({d["kind"]: d for d in docs_in if d})
            tap.ok(all(d.get("apiVersion") and d.get("metadata", {}).get("name") for d in docs_in if d),
                   f"docker/k8s/{name} parses: {', '.join(d['kind'] for d in docs_in if d)}")
        except Exception as e:  # noqa: BLE001
            tap.ok(False, f"docker/k8s/{name} parses", detail=str(e))
try:
    compose = yaml.safe_load(open(os.path.join(REPO, "docker", "compose.yaml"), encoding="utf-8"))
    tap.ok(isinstance(compose.get("services"), dict), "docker/compose.yaml parses")
except Exception as e:  # noqa: BLE001
    tap.ok(False, "docker/compose.yaml parses", detail=str(e))

dep = objs.get("Deployment", {})
pod = dep.get("spec", {}).get("template", {}).get("spec", {})
c = (pod.get("containers") or [{}])[0]
sp, rp, lp = c.get("startupProbe", {}), c.get("readinessProbe", {}), c.get("livenessProbe", {})


def path(p):
    """The path a probe asks: httpGet's, or `deepmt probe PATH` as an exec probe."""
    cmd = p.get("exec", {}).get("command") or []
    if len(cmd) == 3 and cmd[0].endswith("/deepmt") and cmd[1] == "probe":
        return cmd[2]
    return p.get("httpGet", {}).get("path")


tap.ok(path(sp) == "/ready", "startupProbe asks /ready (loaded), not /health (answers before the load)",
       detail=f"startupProbe {sp}")
budget = sp.get("periodSeconds", 10) * sp.get("failureThreshold", 3)
m = re.search(r"load budget is\s+(\d+)\s*s", docs.replace("*", ""))
tap.ok(m is not None and int(m.group(1)) == budget,
       f"startupProbe periodSeconds x failureThreshold = {budget} s = the load budget docs/deployment.md gives",
       detail=f"docs say {m.group(0) if m else 'nothing'}")
tap.ok(path(rp) == "/ready" and path(lp) == "/health", "readiness /ready, liveness /health",
       detail=f"{rp}\n{lp}")

hpa = objs.get("HorizontalPodAutoscaler", {}).get("spec", {})
replicas = dep.get("spec", {}).get("replicas", 1)
tap.ok(replicas == 1 and hpa.get("minReplicas", 0) >= 2 and hpa.get("scaleTargetRef", {}).get("name") ==
       dep.get("metadata", {}).get("name"),
       "the Deployment runs as written under podman kube play (one replica); the HPA keeps >= 2 in a cluster",
       detail=f"replicas {replicas}, hpa {hpa}")

pre = c.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
sleep = int(pre[-1]) if pre and pre[-1].isdigit() else None
grace = pod.get("terminationGracePeriodSeconds", 30)
env = {e["name"]: e.get("value") for e in c.get("env", [])}
queue = int(env.get("DEEPMT_REQUEST_TIMEOUT") or 60)
tap.ok(sleep is not None and grace >= sleep + queue,
       f"preStop sleeps {sleep} s; terminationGracePeriodSeconds {grace} >= preStop + queue timeout {queue} s")
tap.ok(f"podman stop -t {grace}" in docs and "podman kube down" in docs and "network" in docs,
       "docs/deployment.md: stop the deepmt container first (podman stop -t <grace>), then kube down")
nginx = open(os.path.join(REPO, "docker", "nginx.conf"), encoding="utf-8").read()
hosts = re.findall(r"proxy_set_header\s+Host\s+(\S+);", nginx)
tap.ok(hosts == ["$http_host"], "docker/nginx.conf passes the Host header as sent, port included ($http_host): "
       "translatedFileUrl must point back at the balancer's port", detail=str(hosts))

# podman kube play runs the probes as one shell command made of the exec arguments
# joined by spaces, and an httpGet probe as curl (not in the image) on the port's
# number (0 for a named port)
probes = [sp, rp, lp]
tap.ok(all(p.get("exec") and not p.get("httpGet") and all(" " not in a and "'" not in a and '"' not in a
                                                          for a in p["exec"]["command"]) for p in probes),
       "every probe is an exec probe of one-word arguments (survives podman's joining; no curl needed)",
       detail=str(probes))
env_all = {e["name"]: e for e in c.get("env", [])}
mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
vols = {v["name"]: v for v in pod.get("volumes", [])}
fdir = env_all.get("DEEPMT_FILES_DIR", {}).get("value")
claim = vols.get(mounts.get(fdir, ""), {}).get("persistentVolumeClaim", {}).get("claimName")
pvc = objs.get("PersistentVolumeClaim", {})
tap.ok(fdir and claim and pvc.get("metadata", {}).get("name") == claim and
       "ReadWriteMany" in pvc.get("spec", {}).get("accessModes", []),
       "the Deployment keeps translated files on a ReadWriteMany claim every replica mounts (DEEPMT_FILES_DIR)",
       detail=f"{fdir} {mounts} {vols} {pvc}")
ports = c.get("ports", [])
tap.ok(ports and all(p.get("hostIP") == "127.0.0.1" for p in ports),
       "kube play publishes the port on 127.0.0.1 only (hostIP)", detail=str(ports))
svc = compose.get("services", {})
dm = svc.get("deepmt", {})
cdir = dm.get("environment", {}).get("DEEPMT_FILES_DIR")
tap.ok(cdir and any(str(v).split(":")[1:2] == [cdir] and str(v).split(":")[0] in (compose.get("volumes") or {})
                    for v in dm.get("volumes", [])),
       "compose: the replicas share a named volume for translated files (DEEPMT_FILES_DIR)",
       detail=f"{cdir} {dm.get('volumes')}")
lbports = svc.get("lb", {}).get("ports", [])
tap.ok(lbports and all(str(p).startswith("${DEEPMT_LB_ADDR:-127.0.0.1}:") for p in lbports),
       "compose publishes the balancer on 127.0.0.1 unless DEEPMT_LB_ADDR says otherwise", detail=str(lbports))
tap.ok(re.search(r"\bresolver\b", nginx) or "nginx-resolver.conf" in nginx,
       "nginx re-resolves the replicas (a resolver)", detail="no resolver")
tap.ok(re.search(r"proxy_pass\s+http://\$\w+", nginx) and not re.search(r"^\s*upstream\s", nginx, re.M),
       "nginx resolves the replicas' name at run time (proxy_pass with a variable, no upstream block "
       "resolved once at start)", detail=str(re.findall(r"proxy_pass\s+\S+", nginx)))
m = re.search(r"valid=(\d+)s", open(os.path.join(REPO, "docker", "nginx-entrypoint.sh"), encoding="utf-8").read())
tap.ok(m and int(m.group(1)) <= 5, "nginx caches DNS answers for at most 5 s", detail=str(m))
sys.exit(tap.done())
