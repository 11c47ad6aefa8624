#!/usr/bin/env bash
# Install sapiens_blender into .venv/ at the repository root. Safe to re-run.
#   bash scripts/install.sh app    # the add-on core, bpy, the server and its offline CPU backend
#   bash scripts/install.sh test   # everything above + torch (CPU), transformers, Ray, test tools
set -euo pipefail
mode="${1:-app}"
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
PY="${PYTHON:-python3.11}"

if [ ! -x .venv/bin/python ]; then
    echo "creating .venv with $PY" >&2
    "$PY" -m venv .venv
fi
pip=(.venv/bin/python -m pip --disable-pip-version-check -q)
"${pip[@]}" install --upgrade "pip>=24"

case "$mode" in
  app)
    # torch first and pinned (CPU build): the body fit needs it and anny would pull a CUDA build.
    "${pip[@]}" install "torch==2.13.0"
    "${pip[@]}" install -e ".[blender,server,fit]" "torch==2.13.0"
    ;;
  test)
    # torch first and pinned: an unpinned torch (asked for by transformers' extras or
    # anny) would pull a multi-GB CUDA build.
    "${pip[@]}" install "torch==2.13.0"
    "${pip[@]}" install -e ".[blender,server,sapiens,fit,cluster,dev]" "torch==2.13.0"
    # The linux-x64 wheels the extension zip bundles (pinned, ~110 MB, into .cache/wheels): the
    # packaging tests and the artist-machine test build that zip from this cache, offline.
    .venv/bin/python -m sapiens_blender.cli.extension_wheels linux-x64
    # Khronos glTF-Validator (npm), used by the export tests.
    if command -v npm >/dev/null 2>&1 && [ ! -d .cache/node/node_modules/gltf-validator ]; then
        npm install --silent --no-audit --no-fund --prefix .cache/node gltf-validator@2.0.0-dev.3.10
    fi
    ;;
  *)
    echo "usage: $0 app|test" >&2; exit 2 ;;
esac
echo "installed ($mode) into $root/.venv" >&2
