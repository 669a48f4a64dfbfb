#!/usr/bin/env bash
# Idempotent set-up for `npm run demo` and `npm test` on a fresh clone: Debian packages
# (as root), npm dependencies, the Python venv at .venv with the worker installed, and the
# native builds. Each step is skipped when the stamp of its inputs has not changed, so a
# second run costs a few hundred milliseconds.
set -euo pipefail
cd "$(dirname "$0")/.."
STAMPS=.bootstrap
mkdir -p "$STAMPS"
log() { printf '[bootstrap] %s\n' "$*" >&2; }
TORCHVISION_VERSION=0.28.0  # the release that pairs with torch 2.13.0 (python/pyproject.toml)

# stamp NAME FILES... -> succeeds (0) when the stamp matches the hash of the files.
stamp_ok() { local name=$1; shift; [ -f "$STAMPS/$name" ] && [ "$(cat "$STAMPS/$name")" = "$(hash_files "$@")" ]; }
stamp_write() { local name=$1; shift; hash_files "$@" > "$STAMPS/$name"; }
hash_files() { cat "$@" 2>/dev/null | sha256sum | cut -d' ' -f1; }

# 1. Debian packages: libzmq/cppzmq/msgpack-cxx/OpenBLAS for memlane-rt, chromium for the
#    browser test. Only root can install; others are told what is missing.
APT_PKGS=(libzmq3-dev cppzmq-dev libmsgpack-cxx-dev libopenblas-dev pkg-config cmake g++ chromium)
missing=()
for p in "${APT_PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    log "apt-get install ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    log "missing Debian packages (run as root to install): ${missing[*]}"
  fi
fi

# 2. npm dependencies. npm 11 runs no install scripts unless allowed; every package we use
#    ships its binary (zeromq, onnxruntime-node), and onnxruntime-node's CUDA download is
#    skipped explicitly.
if ! stamp_ok npm package.json package-lock.json || [ ! -d node_modules ]; then
  log "npm install"
  npm install --no-audit --no-fund --onnxruntime-node-install=skip >/dev/null 2>&1 || npm install --no-audit --no-fund --onnxruntime-node-install=skip
  stamp_write npm package.json package-lock.json
fi

# 3. Python venv with the worker (editable, so python/ edits apply without reinstall).
if ! stamp_ok venv python/pyproject.toml || [ ! -x .venv/bin/python ]; then
  log "python venv at .venv (torch 2.13.0 CPU, onnx, onnxruntime, pyzmq, ...)"
  [ -x .venv/bin/python ] || python3 -m venv .venv
  .venv/bin/pip install -q --disable-pip-version-check -e "python[dev]"
  # torchvision 0.28.0 pairs with torch 2.13.0, but its wheel is CUDA-linked: --no-deps keeps
  # the resolver away from torch (pillow, its one other dependency, is in pyproject.toml).
  # Only its pure-Python model definitions are used (python/memlane_worker/realzoo).
  .venv/bin/pip install -q --disable-pip-version-check --no-deps "torchvision==$TORCHVISION_VERSION"
  stamp_write venv python/pyproject.toml
fi

# 4. Native builds (memlane-rt and the N-API addon), when their sources exist.
if [ -f native/CMakeLists.txt ]; then
  bash scripts/build-native.sh
fi
