#!/bin/bash
# The GPU checks of benchmarks/README.md ("To run next") as one budgeted run, for a GPU machine
# whose own python3 holds torch (minattn need not be installed):
#     OUT=results/folder BUDGET=560 [PY=python3] bash benchmarks/run_next.sh
# Each step gets what is left of BUDGET seconds (at most its own limit); their output goes to
# $OUT/steps.log, each benchmark's measurements to $OUT/<name>.json.
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 MPLBACKEND=Agg
: "${OUT:?set OUT to a folder for the results}"
PY=${PY:-python3}
mkdir -p "$OUT"
END=$((SECONDS + ${BUDGET:-560}))
step() {  # step NAME LIMIT COMMAND...
  local name=$1 limit=$2; shift 2
  local left=$((END - SECONDS - 5))
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -lt 20 ]; then echo "=== $name: skipped, $left s left" | tee -a "$OUT/steps.log"; return; fi
  echo "=== $name (limit ${limit}s): $*" | tee -a "$OUT/steps.log"
  local t0=$SECONDS
  timeout -k 5 "$limit" "$@" > "$OUT/$name.tmp" 2>&1
  local rc=$?
  grep -v "^DEBUG " "$OUT/$name.tmp" >> "$OUT/steps.log"; tail -25 "$OUT/$name.tmp"; rm "$OUT/$name.tmp"
  echo "=== $name: rc=$rc in $((SECONDS - t0))s" | tee -a "$OUT/steps.log"
}
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  $PY -c 'import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda)'
} | tee "$OUT/steps.log"
CUDA_FILES=$($PY -c 'from minattn.course.gpu_tier import cuda_test_files; print(*cuda_test_files())') && [ -n "$CUDA_FILES" ] || { echo "no test files with cuda tests (is torch there?)"; exit 1; }
step cuda_tests 200 $PY -m pytest -p no:cacheprovider -m cuda -rfEs $CUDA_FILES
step sparse_bf16 100 $PY benchmarks/sparse.py --device cuda --dtype bfloat16 --quick --json "$OUT/sparse_bf16.json"
step sparse_fp32 100 $PY benchmarks/sparse.py --device cuda --quick --json "$OUT/sparse_fp32.json"
step multiscale_fp32 90 $PY benchmarks/multiscale.py --device cuda --quick --json "$OUT/multiscale_fp32.json"
step multiscale_bf16 90 $PY benchmarks/multiscale.py --device cuda --dtype bfloat16 --quick --json "$OUT/multiscale_bf16.json"
