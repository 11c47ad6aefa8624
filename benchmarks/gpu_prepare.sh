#!/usr/bin/env bash
# Prepares what a lent GPU needs for benchmarks/gpu_issue36_run3.sh, here on the CPU (~3 min; the
# GPU machine reaches no registry). Run from the repository root with .venv installed:
#   .gpu/cases  the ground-truth fit cases (bench_fit.py --save-cases)
#   .whl        the wheels the GPU image lacks or has too old: roma, trimesh (anny imports both),
#               transformers (the image's 5.17 predates the Sapiens2 code this project runs), and
#               anny's package as anny.tar.xz (its wheel alone would pass the 64 MiB carry limit)
# Then: device run `OUT=$OUT bash benchmarks/gpu_issue36_run3.sh` with carry [".gpu", ".whl"].
set -euo pipefail
grep -qx "/.gpu/" .git/info/exclude || printf "/.gpu/\n/.whl/\n" >> .git/info/exclude
mkdir -p .gpu .whl
PY=.venv/bin/python
SITE=$($PY -c "import anny, pathlib; print(pathlib.Path(anny.__file__).parents[1])")
v() { $PY -c "import importlib.metadata as m; print(m.version('$1'))"; }
$PY -m pip download -q --no-deps -d .whl "roma==$(v roma)" "trimesh==$(v trimesh)" "transformers==$(v transformers)"
[ -f .whl/anny.tar.xz ] || tar -C "$SITE" --exclude=__pycache__ --exclude=examples -cf - anny | xz -T2 -6 > .whl/anny.tar.xz
[ -d .gpu/cases ] || PYTHONPATH=. $PY benchmarks/bench_fit.py --save-cases .gpu/cases \
  --cases clean,sitting,two_people,relative_depth,no_depth
du -sh .gpu .whl
