#!/bin/sh
# Restarts the deepmt replicas of a compose project one at a time, each only once
# the one before is ready again, so that the balancer always has a replica to send
# work to and no request is lost (docs/deployment.md). `compose restart` does not
# wait: it restarts the next replica while the previous one may still be loading
# its model.
#
#   docker/rolling-restart.sh [PROJECT]        (default: deepmt, compose.yaml's name)
#
# Env: ENGINE         podman or docker (default: podman when installed)
#      STOP_TIMEOUT   seconds a replica may drain after SIGTERM (default 30, as
#                     containers.conf and compose.yaml's stop_grace_period)
#      READY_TIMEOUT  seconds to wait for a restarted replica's /ready (default 180)
#      SERVICE        the compose service (default deepmt)
# Each replica drains (SIGTERM: requests in flight finish, new ones are refused and
# nginx retries them on the others), starts again, and is asked `deepmt probe
# /ready` until it answers 200. Exits 1 when a replica does not get ready.
set -eu
project=${1:-deepmt}
ENGINE=${ENGINE:-$(command -v podman >/dev/null 2>&1 && echo podman || echo docker)}
STOP_TIMEOUT=${STOP_TIMEOUT:-30}
READY_TIMEOUT=${READY_TIMEOUT:-180}
SERVICE=${SERVICE:-deepmt}

replicas=$($ENGINE ps --filter "label=com.docker.compose.project=$project" \
  --filter "label=com.docker.compose.service=$SERVICE" --format '{{.Names}}' | sort)
if [ -z "$replicas" ]; then
  echo "rolling-restart: no running $SERVICE replica in compose project $project" >&2
  exit 1
fi
for c in $replicas; do
  start=$(date +%s)
  echo "rolling-restart: $c: restarting (drain up to $STOP_TIMEOUT s)"
  $ENGINE restart -t "$STOP_TIMEOUT" "$c" >/dev/null
  until $ENGINE exec "$c" /usr/local/bin/deepmt probe /ready 2>/dev/null; do
    if [ $(( $(date +%s) - start )) -ge "$READY_TIMEOUT" ]; then
      echo "rolling-restart: $c is not ready after $READY_TIMEOUT s; stopping here" >&2
      exit 1
    fi
    sleep 1
  done
  # a moment for the balancer's DNS cache (1 s) to learn the new address
  sleep 2
  echo "rolling-restart: $c: ready again after $(( $(date +%s) - start )) s"
done
