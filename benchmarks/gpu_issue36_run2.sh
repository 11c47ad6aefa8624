#!/usr/bin/env bash
# Issue 36, second lease: one call on a lent GPU (copied to .gpu/run2.sh, which the lead runs
# with carry [".gpu", ".whl"]). Parts, each under its own timeout and all within ~330 s:
#   anny's cache (CPU, background from the start) | Sapiens2 0.4B baseline/ours/stream, then the
#   per-stage device times (fp32/bf16 heads, eager/compiled backbone) | the fit: sync audit, graph
#   solver on the saved cases (+ eager, batched), compiled | the clip if time is left.
# Results in $OUT (small files); a compact summary at the end (the tool shows the last 12,000 chars).
BUDGET=${BUDGET:-325}
source benchmarks/gpu_lease.sh
# (b) Sapiens2: the baseline and ours in the same run (this card), then where a batch's device time goes
timeout $(lim ${SAP_T:-70}) $PY benchmarks/bench_sapiens.py --size $SIZE --modes baseline,ours,stream --images 1 \
  --stream ${SAP_STREAM:-32} --stream-batch 16 --stream-overlap 2 ${SAP_ARGS:-} --json-out $R/sapiens.json > $R/sapiens.log 2>&1
el "sapiens rc=$?"
timeout $(lim ${STAGES_T:-95}) $PY benchmarks/bench_sapiens_stages.py --size $SIZE --input $INPUT --device $DEV \
  --batch ${STAGES_BATCH:-16} --heads fp32,bf16,mixed --compiled-heads mixed --compile ${STAGES_COMPILE:-none,default} --repeats 3 --profile \
  --json-out $R/stages.jsonl > $R/stages.log 2>&1
el "stages rc=$?"
wait $AP; el "anny: $(tail -1 $R/anny.log)"
# (a) the fit: host reads in the captured path first (says which op if the capture fails), then the solver
timeout $(lim ${AUDIT_T:-35}) $PY benchmarks/fit_sync_audit.py --cases-dir .gpu/cases --device $DEV \
  --json-out $R/audit.jsonl > $R/audit.log 2>&1
el "audit rc=$?"
timeout $(lim ${FIT_T:-90}) $PY benchmarks/bench_fit_gpu.py --cases-dir .gpu/cases --cases $CASES --device $DEV \
  --repeats ${FIT_REPEATS:-2} --batch ${FIT_BATCH:-1,4,16,32} --eager ${FIT_ARGS:-} --json-out $R/fit.jsonl > $R/fit.log 2>&1
el "fit rc=$?"
timeout $(lim ${FITC_T:-45}) $PY benchmarks/bench_fit_gpu.py --cases-dir .gpu/cases --cases clean --device $DEV \
  --repeats 0 --batch "" --reference "" --compile ${FIT_ARGS:-} --json-out $R/fit_compiled.jsonl > $R/fit_compiled.log 2>&1
el "fit compiled rc=$?"
# (c) the clip, only with time to spare
if [ $(( BUDGET - ($(date +%s) - T0) )) -gt 60 ]; then
  timeout $(lim 80) $PY benchmarks/bench_clip_gpu.py --size $SIZE --frames 32 --batch 16 --in-flight 2 ${CLIP_ARGS:-} \
    --json-out $R/clip.json > $R/clip.log 2>&1
  el "clip rc=$?"
fi
cd $R && tar czf $OUT/results.tgz --exclude=out . 2>/dev/null; cp steps.log *.jsonl sapiens.json $OUT/ 2>/dev/null; cd - > /dev/null
echo "== steps"; cat $R/steps.log
echo "== errors"; grep -h "Traceback\|Error\|could not be captured\|torch.compile failed" $R/*.log | sort | uniq -c | cut -c1-300 | tail -20
$PY benchmarks/gpu_issue36_summary.py $R benchmarks/gpu_issue36_cpu_reference.jsonl 2>&1 | cut -c1-1600
