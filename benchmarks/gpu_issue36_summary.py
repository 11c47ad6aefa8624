# SPDX-License-Identifier: GPL-3.0-or-later
"""The compact end of benchmarks/gpu_issue36_run2.sh: one line per finding from its result
folder (the device tool shows only the last 12,000 characters of a run).

    python3 benchmarks/gpu_issue36_summary.py RESULTS_DIR [CPU_REFERENCE.jsonl]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _rows(path: Path) -> list[dict]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def _cut(value, n=300) -> str:
    return json.dumps(value)[:n]


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    res = Path(argv[0])
    ref = {r["case"]: r for r in _rows(Path(argv[1])) if r.get("kind") == "graph"} if len(argv) > 1 else {}
    print("== fit sync audit (graph solver's refresh/step, eager, sync debug mode)")
    for r in _rows(res / "audit.jsonl"):
        if r["kind"] == "sync_audit":
            print(f"AUDIT verdict={r['verdict']} device={r.get('device')} first={_cut(r.get('first'), 1500)}")
        elif r.get("error") or r.get("syncs"):
            print(f"AUDIT {r['what']} {r['mode']}: {_cut({k: v for k, v in r.items() if k not in ('kind',)}, 1500)}")
    for name in ("fit.jsonl", "fit_compiled.jsonl"):
        print(f"== {name}")
        for r in _rows(res / name):
            k = r["kind"]
            if k == "graph":
                cpu = ref.get(r["case"])
                vs = f" | CPU graph {cpu['joints_mean_cm']}/{cpu['joints_max_cm']}" if cpu else ""
                print(f"FIT {r['case']:<22} people={r['people']} graphs={r['cuda_graphs']} first={r['first_s']}s "
                      f"warm={r['warm_s']}s/person joints={r['joints_mean_cm']}/{r['joints_max_cm']} cm{vs}")
            elif k in ("batched", "step_replay", "memory", "setup"):
                print(f"{k.upper()} {_cut({a: b for a, b in r.items() if a not in ('kind', 'stages')}, 200)}")
            else:
                print(f"{k.upper()} {_cut({a: b for a, b in r.items() if a != 'kind'}, 600)}")
    print("== sapiens2 (bench_sapiens.py)")
    sap = res / "sapiens.json"
    if sap.exists():
        data = json.loads(sap.read_text())
        print(f"SAP device={data.get('device')} failed={data.get('failed')}")
        for r in data.get("results", []):
            print(f"SAP {r['mode']:<18} {r['seconds_per_image']:.3f} s/img {r['images_per_s']:.2f} img/s "
                  f"x{r.get('vs_baseline', 0):.1f} peak={r.get('peak_gpu_gib', '-')} GiB")
    print("== sapiens2 stages (ms per image, device time)")
    for r in _rows(res / "stages.jsonl"):
        if r["kind"] == "stages_setup":
            print(f"STAGES {r['card']} build {r['build_s']}s")
        elif r["kind"] == "stages" and "error" in r:
            print(f"STAGES compile={r['compile']} b={r['batch']} heads={r['heads']} ERROR {r['error'][:300]}")
        elif r["kind"] == "stages":
            per = r["ms_per_image"]
            tasks = " ".join(f"{t}={per.get(t + '/backbone', 0):.1f}+{per.get(t + '/head', 0):.1f}"
                             f"+{per.get(t + '/post', 0):.1f}" for t in ("seg", "depth", "normal", "pose"))
            print(f"STAGES compile={r['compile']} b={r['batch']} heads={r['heads']} total={r['total_ms']} "
                  f"({r['images_per_s']} img/s) backbone={r['backbone_ms']} head={r['head_ms']} post={r['post_ms']} "
                  f"tflops={r.get('backbone_tflops')} first={r.get('first_s')}s {tasks}"
                  + (f" COMPILE_FAILED {r['compile_failed'][:200]}" if r.get("compile_failed") else ""))
        elif r["kind"] == "stages_profile":
            print("PROFILE " + "; ".join(f"{k} {ms}ms x{n}" for k, ms, n in r["top"][:10]))
    clip = res / "clip.json"
    if clip.exists():
        print("== clip " + clip.read_text()[:600].replace("\n", " "))
    return 0


if __name__ == "__main__":
    sys.exit(main())
