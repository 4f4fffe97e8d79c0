#!/bin/sh
# Install the Debian packages deepmt needs, skipping those already present.
# Usage: scripts/deps.sh [build|test|train]   (default: build)
#   build  compiler, BLAS, HTTP, JSON, SentencePiece, CLD2 (language detection),
#         gumbo (HTML), libzip and libxml2 (.docx, .odt) libraries
#   test   build + curl, python3, numpy, torch and sentencepiece (HTTP integration, converter and training tests),
#          libtcmalloc-minimal4 (the training tests run train.py under it, as a run does),
#          clang and its libFuzzer/sanitizer runtimes (the fuzz targets; ~45 MB download, ~300 MB installed),
#          node and npm (the OpenAPI validator and LibreTranslate client, installed from npm into build/node),
#          chromium, chromium-driver and python3-selenium (the web page's headless browser test),
#          libsimde-dev (headers: the tests run the AVX-512 kernels emulated on CPUs without AVX-512)
#   train  build + Debian's PyTorch, numpy and sentencepiece for tools/ (golden files, training), and tcmalloc (the run's malloc)
set -eu
profile=${1:-build}
pkgs="gcc g++ make pkg-config libopenblas-dev libjansson-dev libmicrohttpd-dev libsentencepiece-dev libcld2-dev libgumbo-dev libzip-dev libxml2-dev"
case "$profile" in
  build) ;;
  test)  pkgs="$pkgs curl python3 python3-numpy python3-torch python3-sentencepiece libtcmalloc-minimal4 clang libclang-rt-14-dev python3-yaml python3-protobuf nodejs npm chromium chromium-driver python3-selenium libsimde-dev" ;;
  train) pkgs="$pkgs curl python3 python3-torch python3-numpy python3-sentencepiece python3-protobuf libtcmalloc-minimal4" ;;
  *) echo "deps.sh: unknown profile '$profile' (build, test or train)" >&2; exit 2 ;;
esac
missing=""
for p in $pkgs; do
  # a Node.js from elsewhere (NodeSource) brings its own npm, which Debian's conflicts with
  [ "$p" = npm ] && command -v npm >/dev/null 2>&1 && continue
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "deps.sh: missing packages:$missing" >&2
  echo "deps.sh: run as root, or install them with: sudo apt-get install$missing" >&2
  exit 1
fi
echo "deps.sh: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends $missing >/dev/null
