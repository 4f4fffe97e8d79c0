#!/bin/sh
# Prepare a Debian 12 machine to build and run deepmt's images without Docker:
#   1. apt-get install podman (+ runc, netavark/aardvark-dns, podman-compose, iptables)
#      when `podman` or `podman-compose` is missing;
#   2. for machines that reach no registry: build the base image
#      localhost/debian:bookworm-slim with debootstrap from the Debian mirror apt
#      already uses, unless that image already exists.
# Usage: docker/podman-setup.sh            (as root; idempotent; ~2 min the first time)
# Env:   BASE_IMAGE   name to give the local base (default localhost/debian:bookworm-slim)
#        MIRROR       Debian mirror (default: the first deb.debian.org-style URI in apt's sources)
#        FORCE_BASE=1 rebuild the base image even if it exists
#        PACKAGES_ONLY=1  only step 1 (a registry provides debian:bookworm-slim)
# Later podman commands need CONTAINERS_CONF=docker/containers.conf (docs/deployment.md).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
export CONTAINERS_CONF="$here/containers.conf"
BASE_IMAGE=${BASE_IMAGE:-localhost/debian:bookworm-slim}

say() { echo "# podman-setup: $*"; }

# ---- 1. packages -------------------------------------------------------------
need=""
command -v podman >/dev/null 2>&1 || need=1
command -v podman-compose >/dev/null 2>&1 || need=1
command -v runc >/dev/null 2>&1 || need=1
command -v iptables >/dev/null 2>&1 || need=1
if [ -n "$need" ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "podman-setup: podman is missing; as root run: apt-get install podman buildah" \
         "debootstrap uidmap fuse-overlayfs slirp4netns netavark aardvark-dns" \
         "podman-compose iptables runc" >&2
    exit 1
  fi
  say "installing podman and friends (apt)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq podman buildah debootstrap uidmap fuse-overlayfs slirp4netns \
      netavark aardvark-dns podman-compose iptables runc >/dev/null
fi

# ---- 2. base image -----------------------------------------------------------
[ -n "${PACKAGES_ONLY:-}" ] && exit 0
if [ -z "${FORCE_BASE:-}" ] && podman image exists "$BASE_IMAGE"; then
  exit 0
fi
command -v debootstrap >/dev/null 2>&1 || {
  apt-get install -y -qq debootstrap >/dev/null; }

if [ -z "${MIRROR:-}" ]; then
  # deb822 (.sources: "URIs: http://deb.debian.org/debian") or one-line ("deb URI bookworm main")
  MIRROR=$(cat /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null \
    | awk '/^URIs:/ {print $2} /^deb / {for (i=2;i<=NF;i++) if ($i ~ /^https?:/) {print $i; break}}' \
    | grep -E '/debian/?$' | head -n1)
  MIRROR=${MIRROR:-http://deb.debian.org/debian}
fi
MIRROR=${MIRROR%/}
SECURITY=${SECURITY_MIRROR:-$(echo "$MIRROR" | sed 's#/debian$#/debian-security#')}
say "building $BASE_IMAGE with debootstrap from $MIRROR (about 1-2 min)"
rootfs=$(mktemp -d /var/tmp/deepmt-rootfs.XXXXXX)
trap 'rm -rf "$rootfs"' EXIT
nice debootstrap --variant=minbase bookworm "$rootfs" "$MIRROR" >"$rootfs.log" 2>&1 || {
  tail -n 20 "$rootfs.log" >&2; rm -f "$rootfs.log"; exit 1; }
rm -f "$rootfs.log"

# Make it look like the official debian:bookworm-slim: deb822 sources with updates
# and security, no docs/man/locales from later installs, apt lists/caches cleaned.
rm -f "$rootfs/etc/apt/sources.list"
cat >"$rootfs/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $MIRROR
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $SECURITY
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
cat >"$rootfs/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
cat >"$rootfs/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
echo 'Acquire::GzipIndexes "true";' >"$rootfs/etc/apt/apt.conf.d/docker-gzip-indexes"
echo 'APT::AutoRemove::SuggestsImportant "false";' >"$rootfs/etc/apt/apt.conf.d/docker-autoremove-suggests"
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/* "$rootfs"/var/log/*.log \
       "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/tmp/* 2>/dev/null || true
find "$rootfs/usr/share/doc" ! -type d ! -name copyright -delete 2>/dev/null || true
find "$rootfs/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} + 2>/dev/null || true
tar -C "$rootfs" --numeric-owner -c . \
  | podman import -q --change 'CMD ["bash"]' - "$BASE_IMAGE" >/dev/null
say "$BASE_IMAGE: $(podman image inspect --format '{{.Size}}' "$BASE_IMAGE") bytes"
