#!/usr/bin/env bash
# GPU check for sglang-duet: build sgl-duet-kernel, run the GPU tests, the SM-scaling benchmark,
# the concurrent decode/prefill check against the latency model and (when present) the latency
# model's GPU profiler. Needs only a CUDA GPU, PyTorch, pytest, scikit-build-core, CMake and
# nvcc -- no internet. Writes at most 8 files into one folder:
#   ${OUT:-benchmark/results/gpu}/{check.log, summary.json, partition_smids.json,
#     sm_scaling.json, sm_scaling.png, concurrent_check.json, latency_samples.csv,
#     latency_samples.json}
# Total wall time stays under CHECK_BUDGET_S (default 540 s, so one 10-minute device call fits).
#
#   bash benchmark/gpu/check.sh                 # from the repository root (or anywhere)
set -u -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT_DIR="${OUT:-$ROOT/benchmark/results/gpu}"
PY="${PYTHON:-python3}"
BUDGET_S="${CHECK_BUDGET_S:-540}"
START_S=$(date +%s)
DEADLINE_S=$((START_S + BUDGET_S))

mkdir -p "$OUT_DIR"
OUT_DIR="$(cd "$OUT_DIR" && pwd)"
LOG="$OUT_DIR/check.log"
: >"$LOG"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/duet-check.XXXXXX")"
SITE="$WORK/site"
export PYTHONPATH="$SITE:$ROOT/python:$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
export SGLANG_DUET_RESULTS_DIR="$OUT_DIR"

STEPS_JSON=""
FAILED=0

log() { printf '%s\n' "$*" | tee -a "$LOG"; }

left_s() { echo $((DEADLINE_S - $(date +%s))); }

# run_step NAME CAP_S REQUIRED CMD...: runs CMD under a timeout of min(CAP_S, time left),
# appends its output to the log and its status to summary.json.
run_step() {
  local name="$1" cap="$2" required="$3"
  shift 3
  local left limit t0 rc
  left=$(left_s)
  limit=$((cap < left ? cap : left))
  if ((limit < 10)); then
    log "=== $name: skipped, time budget spent"
    STEPS_JSON+="{\"step\":\"$name\",\"rc\":null,\"seconds\":0,\"note\":\"no time left\"},"
    ((required)) && FAILED=1
    return 0
  fi
  log "=== $name (limit ${limit}s): $*"
  t0=$(date +%s)
  timeout --kill-after=10 "$limit" "$@" 2>&1 | tee -a "$LOG"
  rc=${PIPESTATUS[0]}
  log "=== $name: rc=$rc in $(($(date +%s) - t0))s"
  STEPS_JSON+="{\"step\":\"$name\",\"rc\":$rc,\"seconds\":$(($(date +%s) - t0))},"
  if ((rc != 0 && required)); then FAILED=1; fi
  return 0
}

cd "$ROOT" || exit 1
log "sglang-duet GPU check: $(date -u +%FT%TZ), output in $OUT_DIR"
run_step environment 60 0 bash -c "nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version \
--format=csv,noheader; $PY -c 'import sys, torch; print(sys.version); \
print(\"torch\", torch.__version__, \"cuda\", torch.version.cuda, torch.cuda.is_available())'; \
command -v nvcc && nvcc --version | tail -2; cmake --version | head -1"

run_step build 240 0 "$PY" -m pip install --no-index --no-build-isolation --no-deps \
  --disable-pip-version-check --target "$SITE" ./sgl-duet-kernel
if ! "$PY" -c "import sgl_duet_kernel" >>"$LOG" 2>&1; then
  # Fallback without scikit-build-core: plain CMake, then copy the package next to the library.
  run_step build_cmake 240 1 bash -c "cmake -S sgl-duet-kernel -B '$WORK/build' \
-DCMAKE_BUILD_TYPE=Release && cmake --build '$WORK/build' -j && mkdir -p '$SITE' && \
cp -r sgl-duet-kernel/python/sgl_duet_kernel '$SITE/' && \
cp '$WORK/build/libsgl_duet_kernel.so' '$SITE/sgl_duet_kernel/' && \
$PY -c 'import sgl_duet_kernel as k; print(k.library_path(), k.smid_available())'"
fi

run_step partition_report 90 1 "$PY" -m sglang_duet.partition --build

# The phase joins first (cross-context events: does the driver take them, or do the joins fall
# back to host syncs?), then every gpu-marked test beside its package's tests, and the CPU
# tests of the kernel and partition packages against the real driver.
run_step phases_gpu 60 1 "$PY" -m pytest -q -rA -s -p no:cacheprovider \
  test/runtime/test_phases_gpu.py
run_step gpu_tests 240 1 "$PY" -m pytest -q -rA -p no:cacheprovider test/kernel test/partition

run_step sm_scaling 240 1 "$PY" -m benchmark.partition.sm_scaling --out "$OUT_DIR"

# Decode and prefill on two partition streams at once vs. LatencyModel.predict_concurrent
# (about a minute on an H200; sequential on the whole device when no partition backend works).
run_step concurrent_check 150 1 "$PY" benchmark/gpu/concurrent_check.py --out "$OUT_DIR"

PROFILER="benchmark/latency_model/profile_gpu.py"
if [[ -f "$PROFILER" ]]; then
  # Leave 60 s for the profiler's own start-up and writing beyond its measuring budget.
  prof_budget=$(($(left_s) - 90))
  if ((prof_budget >= 60)); then
    args=(--out "$OUT_DIR/latency_samples.csv")
    if "$PY" "$PROFILER" --help 2>/dev/null | grep -q -- '--budget-s'; then
      args+=(--budget-s "$((prof_budget < 420 ? prof_budget : 420))")
    fi
    run_step latency_profile $((prof_budget + 60)) 1 "$PY" "$PROFILER" "${args[@]}"
  else
    log "=== latency_profile: skipped, only $(left_s)s left"
    STEPS_JSON+="{\"step\":\"latency_profile\",\"rc\":null,\"seconds\":0,\"note\":\"no time\"},"
  fi
else
  log "=== latency_profile: $PROFILER not present, skipped"
  STEPS_JSON+="{\"step\":\"latency_profile\",\"rc\":null,\"seconds\":0,\"note\":\"absent\"},"
fi

gpu="$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
cat >"$OUT_DIR/summary.json" <<JSON
{
 "date": "$(date -u +%FT%TZ)",
 "gpu": "${gpu//\"/}",
 "wall_s": $(($(date +%s) - START_S)),
 "budget_s": $BUDGET_S,
 "ok": $([[ $FAILED == 0 ]] && echo true || echo false),
 "steps": [${STEPS_JSON%,}]
}
JSON
rm -rf "$WORK"
log "=== done in $(($(date +%s) - START_S))s, ok=$([[ $FAILED == 0 ]] && echo yes || echo no)"
find "$OUT_DIR" -maxdepth 1 -type f -printf "%s\t%f\n" | sort -k2 | tee -a "$LOG"
exit "$FAILED"
