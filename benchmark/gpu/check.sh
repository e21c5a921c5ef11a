#!/usr/bin/env bash
# The GPU check for sglang-duet, in two stages sized to one 10-minute device call:
#   stage 1 (<= 240 s, torch only): the GPU tests (test/runtime/test_phases_gpu.py first, then
#     -m gpu over test/; they record the %smid sets of the granted splits), Fig 3a
#     (sm_scaling), concurrent_check, the kernel/partition tests against the real driver;
#   stage 2 (<= 300 s, real SGLang from the carry folder): python -m benchmark.gpu.serving_check
#     (spatial == aggregated greedy outputs, latency model vs plan log, bench_serving vs stock,
#     and the simulator's prediction of that same bench_serving slice next to it).
# Each step is folded into OUT_DIR/stage<N>.json as soon as it ends (benchmark.gpu.collect).
# OUT_DIR gets at most 6 files: check.log, summary.json, stage1.json, stage2.json,
# sm_scaling.png, logs.tar.gz (server and plan logs). Needs no internet.
#
#   bash benchmark/gpu/check.sh OUT_DIR [1|2|all]        # from anywhere; default all
# Env: PYTHON (default python3), CARRY (default <repo>/.gpu-carry), STAGE1_S, STAGE2_S,
# CPU_DRY_RUN=1 (stage 2 on the CPU with the tiny model: a rehearsal anywhere).
set -u -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT_DIR="${1:-${OUT:-$ROOT/benchmark/results/gpu}}"
STAGES="${2:-all}"
PY="${PYTHON:-python3}"
CARRY="${CARRY:-$ROOT/.gpu-carry}"
STAGE1_S="${STAGE1_S:-240}"
STAGE2_S="${STAGE2_S:-300}"
START_S=$(date +%s)

mkdir -p "$OUT_DIR"
OUT_DIR="$(cd "$OUT_DIR" && pwd)"
LOG="$OUT_DIR/check.log"
touch "$LOG"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/duet-check.XXXXXX")"
RAW="$WORK/raw"  # steps' own outputs; folded into the stage JSON, never returned one by one
KSITE="$WORK/kernel-site"
SITE="$WORK/site"
mkdir -p "$RAW"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export SGLANG_DUET_RESULTS_DIR="$RAW"
export PYTHONPATH="$ROOT/python:$ROOT:$KSITE:$SITE${PYTHONPATH:+:$PYTHONPATH}"
# CPU_DRY_RUN=1: stage 2's serving check on the CPU with the tiny model (rehearsal, no GPU).
DRY_RUN=$([[ "${CPU_DRY_RUN:-0}" == 1 ]] && echo --cpu-dry-run)
STAGE_DEADLINE=0

log() { printf '%s\n' "$*" | tee -a "$LOG"; }

# step STAGE_JSON NAME CAP_S CMD... : runs CMD under min(CAP_S, stage time left), logs it, then
# folds its rc, seconds and the files named in FILES (absolute paths) into STAGE_JSON.
FILES=()
step() {
  local stage_json="$1" name="$2" cap="$3"
  shift 3
  local left=$((STAGE_DEADLINE - $(date +%s)))
  local limit=$((cap < left ? cap : left)) t0 rc
  if ((limit < 10)); then
    log "=== $name: skipped, stage time spent"
    "$PY" -m benchmark.gpu.collect "$stage_json" "$name" null 0 >>"$LOG" 2>&1
    FILES=()
    return 1
  fi
  log "=== $name (limit ${limit}s): $*"
  t0=$(date +%s)
  timeout --kill-after=10 "$limit" "$@" 2>&1 | tee -a "$LOG"
  rc=${PIPESTATUS[0]}
  log "=== $name: rc=$rc in $(($(date +%s) - t0))s"
  "$PY" -m benchmark.gpu.collect "$stage_json" "$name" "$rc" "$(($(date +%s) - t0))" \
    "${FILES[@]}" >>"$LOG" 2>&1 || log "collect failed for $name"
  FILES=()
  return "$rc"
}

# The kernel library: the carried wheel when it loads with its %smid probe, else built here.
install_kernel() {
  local whl
  whl=$(ls "$CARRY"/wheels/sgl_duet_kernel-*.whl 2>/dev/null | head -1)
  if [[ -n "$whl" ]] && "$PY" -m pip install -q --no-index --no-deps --no-compile \
    --disable-pip-version-check --target "$KSITE" "$whl" &&
    "$PY" -c "import sgl_duet_kernel as k; assert k.smid_available()"; then
    echo "sgl_duet_kernel: carried wheel $(basename "$whl")"
    return 0
  fi
  echo "sgl_duet_kernel: building from source with CMake"
  rm -rf "$KSITE" && mkdir -p "$KSITE"
  cmake -S "$ROOT/sgl-duet-kernel" -B "$WORK/kbuild" -DCMAKE_BUILD_TYPE=Release &&
    cmake --build "$WORK/kbuild" -j &&
    cp -r "$ROOT/sgl-duet-kernel/python/sgl_duet_kernel" "$KSITE/" &&
    cp "$WORK/kbuild/libsgl_duet_kernel.so" "$KSITE/sgl_duet_kernel/" &&
    "$PY" -c "import sgl_duet_kernel as k; print(k.library_path(), k.smid_available())"
}

# The carry folder's wheels into SITE (stage 2's SGLang; on the path of every later step, so
# the test collection imports too).
install_carry() {
  "$PY" -m pip install -q --no-index --no-deps --no-compile --disable-pip-version-check \
    --target "$SITE" "$CARRY"/wheels/*.whl && du -sh "$SITE"
}

setup() {  # STAGE_JSON: the kernel and the carry, once per run
  [[ -d "$KSITE/sgl_duet_kernel" ]] || step "$1" kernel 90 bash -c install_kernel
  [[ -d "$SITE/sglang" ]] || step "$1" install_carry 60 bash -c install_carry
}

stage1() {
  local J="$OUT_DIR/stage1.json"
  STAGE_DEADLINE=$(($(date +%s) + STAGE1_S))
  log "##### stage 1 (torch only), ${STAGE1_S}s"
  step "$J" environment 30 bash -c "nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version \
--format=csv,noheader; $PY -c 'import sys, torch; print(sys.version); \
print(\"torch\", torch.__version__, \"cuda\", torch.version.cuda, torch.cuda.is_available())'"
  setup "$J"
  step "$J" partition_report 40 "$PY" -m sglang_duet.partition --build
  # The phase joins first (do primary-context events work on green-context streams, or do the
  # joins fall back to host syncs? -s prints which), then every gpu-marked test wherever it
  # sits (beside its package's tests); they record the %smid sets of the granted splits.
  step "$J" phases_gpu 40 "$PY" -m pytest -q -rA -s -p no:cacheprovider \
    "$ROOT/test/runtime/test_phases_gpu.py"
  FILES=("$RAW/partition_smids.json")
  step "$J" gpu_tests 100 "$PY" -m pytest -q -rA -p no:cacheprovider -m gpu \
    --continue-on-collection-errors --ignore="$ROOT/test/runtime/test_phases_gpu.py" "$ROOT/test"
  FILES=("$RAW/sm_scaling.json")
  step "$J" sm_scaling 60 "$PY" -m benchmark.partition.sm_scaling --out "$RAW" --repeats 3
  cp "$RAW/sm_scaling.png" "$OUT_DIR/" 2>/dev/null
  FILES=("$RAW/concurrent_check.json")
  step "$J" concurrent_check 80 "$PY" -m benchmark.gpu.concurrent_check --out "$RAW"
  # With what is left: the kernel's and partition's CPU tests against the real driver.
  step "$J" kernel_partition_tests 60 "$PY" -m pytest -q -rA -p no:cacheprovider -m "not gpu" \
    "$ROOT/test/kernel" "$ROOT/test/partition"
}

stage2() {
  local J="$OUT_DIR/stage2.json"
  STAGE_DEADLINE=$(($(date +%s) + STAGE2_S))
  log "##### stage 2 (real SGLang from $CARRY), ${STAGE2_S}s"
  setup "$J"
  [[ -d "$SITE/sglang" ]] || return 1
  step "$J" imports 60 "$PY" -m benchmark.gpu.carry.imports sgl_kernel sgl_kernel.spatial \
    sglang.srt.managers.scheduler sglang.srt.models.qwen3 sglang_duet.runtime.scheduler
  FILES=("$RAW/stage2_serving.json")
  local budget=$((STAGE_DEADLINE - $(date +%s) - 20))  # its own steps stop before the kill
  step "$J" serving_check "$STAGE2_S" "$PY" -m benchmark.gpu.serving_check \
    "$RAW/stage2_serving.json" --work "$WORK/stage2" --budget-s "$budget" $DRY_RUN
}

export -f install_kernel install_carry
export PY CARRY KSITE SITE WORK ROOT
cd "$ROOT" || exit 1
log "sglang-duet GPU check $(date -u +%FT%TZ): stages $STAGES, output in $OUT_DIR"
[[ "$STAGES" == all || "$STAGES" == 1 ]] && stage1
[[ "$STAGES" == all || "$STAGES" == 2 ]] && stage2

(cd "$WORK" && find . -name '*.log' -o -name 'plan_*' | tar czf "$OUT_DIR/logs.tar.gz" -T - \
  2>/dev/null)
# summary.json (stamped, like the stage JSONs): exit 0 only when every stage JSON is ok.
ok=False
"$PY" -m benchmark.gpu.collect --summary "$OUT_DIR" "$STAGES" $(($(date +%s) - START_S)) \
  >>"$LOG" 2>&1 && ok=True
log "=== done in $(($(date +%s) - START_S))s, ok=$ok"
find "$OUT_DIR" -maxdepth 1 -type f -printf "%s\t%f\n" | sort -k2 | tee -a "$LOG"
rm -rf "$WORK"
[[ $ok == True ]]
