#!/usr/bin/env bash
# Issue 36, third lease: one call on a lent GPU, run with carry [".gpu", ".whl"] made by
# benchmarks/gpu_prepare.sh (.gpu/cases from
# `bench_fit.py --save-cases .gpu/cases --cases clean,sitting,two_people,relative_depth,no_depth`;
# .whl: roma, trimesh and transformers wheels and anny's package as anny.tar.xz). What the earlier leases
# left open, each part under its own timeout, all within $BUDGET s:
#   anny's cache (CPU, background) | Sapiens2 0.4B as the server runs it (compiled backbone,
#   mixed heads: --compile auto) against the demo baseline | the fit: per case, batched up to 64
#   (FIT_GRID: another line-search grid too), and a profile of a warm fit of 1 and of 8 people |
#   the stage times with the heads eager and compiled, batches 16 and 32 | the clip if time is left.
# Results in $OUT; a compact summary at the end.
BUDGET=${BUDGET:-440}
source benchmarks/gpu_lease.sh
# Sapiens2 as the server runs it on this card (SAPIENS_COMPILE/SAPIENS_HEADS auto), the baseline in the same run
timeout $(lim ${SAP_T:-110}) $PY benchmarks/bench_sapiens.py --size $SIZE --modes baseline,ours,stream --images 1 \
  --stream ${SAP_STREAM:-32} --stream-batch 16 --stream-overlap 2 --compile auto ${SAP_ARGS:-} --json-out $R/sapiens.json > $R/sapiens.log 2>&1
el "sapiens rc=$?"
wait $AP; el "anny: $(tail -1 $R/anny.log)"
# (the third lease also ran FIT_GRID=2,1,0.25,0.03; its profile of 32 people outran the part's limit)
timeout $(lim ${FIT_T:-150}) $PY benchmarks/bench_fit_gpu.py --cases-dir .gpu/cases --cases $CASES --device $DEV \
  --repeats ${FIT_REPEATS:-2} --batch ${FIT_BATCH:-1,8,32,64} --reference "" ${FIT_GRID:+--grid $FIT_GRID} \
  --profile ${FIT_PROFILE:-1,8} ${FIT_ARGS:-} --json-out $R/fit.jsonl > $R/fit.log 2>&1
el "fit rc=$?"
timeout $(lim ${STAGES_T:-120}) $PY benchmarks/bench_sapiens_stages.py --size $SIZE --input $INPUT --device $DEV \
  --batch ${STAGES_BATCH:-16,32} --heads mixed,mixed_compiled --compile default --repeats 3 \
  --json-out $R/stages.jsonl > $R/stages.log 2>&1
el "stages rc=$?"
if [ $(( BUDGET - ($(date +%s) - T0) )) -gt 50 ]; then
  timeout $(lim 80) $PY benchmarks/bench_clip_gpu.py --size $SIZE --frames 32 --batch 16 --in-flight 2 --compile auto \
    ${CLIP_ARGS:-} --json-out $R/clip.json > $R/clip.log 2>&1
  el "clip rc=$?"
fi
cd $R && tar czf $OUT/results.tgz --exclude=out . 2>/dev/null; cp steps.log *.jsonl sapiens.json clip.json $OUT/ 2>/dev/null; cd - > /dev/null
echo "== steps"; cat $R/steps.log
echo "== errors"; grep -h "Traceback\|Error\|could not be captured\|torch.compile failed\|FAILED" $R/*.log | sort | uniq -c | cut -c1-300 | tail -20
echo "== sapiens"; grep -h "^RESULT\|^| " $R/sapiens.log | cut -c1-400 | tail -12
echo "== fit"; grep -v '"profile"' $R/fit.jsonl | cut -c1-330
grep '"profile"' $R/fit.jsonl | cut -c1-1500
echo "== stages"; cut -c1-700 $R/stages.jsonl 2>/dev/null | grep -v ms_per_image_x
echo "== clip"; tail -c 1200 $R/clip.json 2>/dev/null
