#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Issue #36 items 1 and 3 on one lent GPU (H100/H200), from the repository root:
#   OUT=/some/folder bash benchmarks/gpu_sapiens_issue36.sh        (~2.5 min, at most 4.2 min by its timeouts; SAPIENS_1B=1: +~2 min)
# Random-weight full-size Sapiens2, 1024x768, four tasks; nothing is downloaded.
# Writes $OUT/sapiens_0.4b.json + .log (baseline fp32 eager batch 1 / ours bf16 batch 1 / stream:
# batch 16 with 1, 2, 3 batches in flight) and $OUT/clip_0.4b.json + .log (a 48-frame 1024 px clip:
# analysis, motion, body motion when anny is installed, end to end). Every result is also one
# "RESULT {json}" line in the logs.
set -u
OUT=${OUT:-./gpu_out}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
export PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH}
export TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1  # a run cut by its timeout keeps what it printed
$PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')" 2>&1 | tee "$OUT/env.log"
timeout 150 $PY benchmarks/bench_sapiens.py --size 0.4b --modes baseline,ours,stream --images 3 \
    --stream 64 --stream-batch 16 --stream-overlap 1,2,3 --json-out "$OUT/sapiens_0.4b.json" 2>&1 \
    | grep -v "without finding the associated sub-model" | tee "$OUT/sapiens_0.4b.log"
timeout 100 $PY benchmarks/bench_clip_gpu.py --size 0.4b --frames 48 --batch 16 --in-flight 2 \
    --json-out "$OUT/clip_0.4b.json" 2>&1 \
    | grep -v "without finding the associated sub-model" | tee "$OUT/clip_0.4b.log"
if [ "${SAPIENS_1B:-0}" = 1 ]; then
    timeout 150 $PY benchmarks/bench_sapiens.py --size 1b --modes baseline,ours,stream --images 2 \
        --stream 48 --stream-batch 16 --stream-overlap 1,2 --json-out "$OUT/sapiens_1b.json" 2>&1 \
        | grep -v "without finding the associated sub-model" | tee "$OUT/sapiens_1b.log"
fi
if [ "${SAPIENS_COMPILE:-0}" = 1 ]; then  # torch.compile of the backbone (first batch includes the compile)
    timeout 240 $PY benchmarks/bench_sapiens.py --size 0.4b --modes stream --images 1 \
        --stream 64 --stream-batch 16 --stream-overlap 1,2 --compile default \
        --json-out "$OUT/sapiens_0.4b_compiled.json" 2>&1 \
        | grep -v "without finding the associated sub-model" | tee "$OUT/sapiens_0.4b_compiled.log"
fi
