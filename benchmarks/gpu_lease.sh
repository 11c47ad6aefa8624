# Sourced by the GPU lease scripts (gpu_issue36_run*.sh), from the repository root on the lent
# machine, with BUDGET set: the results folder and clock, the carried wheels and anny installed
# (benchmarks/gpu_prepare.sh made them), the card's name, and anny's cache built on the CPU in the
# background (its pid in AP; ~70-100 s).
set -u
R=/tmp/res; mkdir -p $R /tmp/site; OUT=${OUT:-$R/out}; mkdir -p $OUT
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/steps.log; }
# timeout for a part: its own limit, never past the whole run's budget (min 5 s)
lim() { local left=$(( BUDGET - ($(date +%s) - T0) )); [ $left -lt $1 ] && echo $(( left > 5 ? left : 5 )) || echo $1; }
PY=${PY:-python3}
if [ -f .whl/anny.tar.xz ] && ! $PY -c "import anny" 2>/dev/null; then
  tar -xJf .whl/anny.tar.xz -C /tmp/site && $PY -m pip install -q --no-index --no-deps --no-compile \
    --target /tmp/site .whl/*.whl > $R/pip.log 2>&1 || { el "install failed"; tail -5 $R/pip.log; }
  mkdir -p /tmp/site/anny-0.6.2.dist-info && printf "Metadata-Version: 2.1\nName: anny\nVersion: 0.6.2\n" > /tmp/site/anny-0.6.2.dist-info/METADATA
  export ANNY_CACHE_DIR=/tmp/anny_cache
fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
DEV=${DEV:-cuda}; SIZE=${SIZE:-0.4b}; INPUT=${INPUT:-1024x768}; CASES=${CASES:-clean,sitting,two_people,relative_depth,no_depth}
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader > $R/gpu.txt 2>&1
$PY -c "import torch,transformers,numpy,anny; print(torch.__version__, transformers.__version__, numpy.__version__)" >> $R/gpu.txt 2>&1
el "installed: $(tr '\n' ' ' < $R/gpu.txt)"
($PY -c "import time;t=time.time();from inference_server.fit.body_model import BodyModel;BodyModel.load('cpu');print('anny ready',round(time.time()-t,1))" > $R/anny.log 2>&1) &
AP=$!
