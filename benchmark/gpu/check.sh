#!/usr/bin/env bash
# The GPU check for sglang-duet, sized to one 10-minute device call with room for one re-run of
# a stage inside a task's 15 minutes (the time plan, every step's cap and which steps are
# optional: benchmark/gpu/plan.py; `python -m benchmark.gpu.plan` prints it):
#   setup: environment, the kernel library, the carry's wheels (kept in $DUET_GPU_CACHE, so a
#     re-run on the same warm machine skips the installs);
#   stage 1 (torch only): partition report, the phase joins (green-ctx usable?), the gpu-marked
#     partition tests (a refused split), concurrent_check (GEMM + attention on the split's
#     remainder), then, with the time left, sm_scaling and the kernel/partition CPU tests;
#   stage 2 (real SGLang from the carry): imports, warmup (JIT and triton caches, by one spatial
#     server answering the equality prompts), serving (stock SGLang vs sglang-duet, the
#     simulator's prediction beside), latency_model, then, with the time left, equality
#     (an aggregated server, logit margin) and pdmux.
# Without a CUDA device (and without CPU_DRY_RUN=1) nothing runs: every step is recorded as
# skipped ("no CUDA device") with its cap, and summary.json holds the time plan (a dry run).
# Each step is folded into OUT_DIR/stage<N>.json as soon as it ends (benchmark.gpu.collect).
# OUT_DIR gets at most 7 files: check.log, summary.json, stage_setup.json, stage1.json,
# stage2.json, sm_scaling.png, logs.tar.gz (server and plan logs). Needs no internet.
#
#   bash benchmark/gpu/check.sh OUT_DIR [1|2|all]        # from anywhere; default all
# Env: PYTHON (default python3), CARRY (default <repo>/.gpu-carry), STAGE1_S, STAGE2_S,
# DUET_GPU_CACHE (default /tmp/sglang-duet-gpu), CPU_DRY_RUN=1 (run the steps without CUDA:
# stage 2 on the CPU with the tiny model, a rehearsal anywhere), CAP_SCALE=N (caps x N).
set -u -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT_DIR="${1:-${OUT:-$ROOT/benchmark/results/gpu}}"
STAGES="${2:-all}"
PY="${PYTHON:-python3}"
CARRY="${CARRY:-$ROOT/.gpu-carry}"
CACHE="${DUET_GPU_CACHE:-/tmp/sglang-duet-gpu}"
START_S=$(date +%s)

mkdir -p "$OUT_DIR" "$CACHE"
OUT_DIR="$(cd "$OUT_DIR" && pwd)"
LOG="$OUT_DIR/check.log"
touch "$LOG"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/duet-check.XXXXXX")"
RAW="$WORK/raw"  # steps' own outputs; folded into the stage JSON, never returned one by one
KSITE="$CACHE/kernel-site"
SITE="$CACHE/site"
mkdir -p "$RAW"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export SGLANG_DUET_RESULTS_DIR="$RAW"
export PYTHONPATH="$ROOT/python:$ROOT:$KSITE:$SITE${PYTHONPATH:+:$PYTHONPATH}"
cd "$ROOT" || exit 1
# CAP_<step>, BUDGET_<stage>: the plan's table (benchmark/gpu/plan.py)
eval "$("$PY" -m benchmark.gpu.plan --shell)" ||
  { echo "no plan: $PY -m benchmark.gpu.plan"; exit 2; }
# CAP_SCALE=N (a CPU rehearsal, where servers start slower): every cap and budget times N
if [[ "${CAP_SCALE:-1}" != 1 ]]; then
  for v in $(compgen -v CAP_) $(compgen -v BUDGET_); do
    [[ "$v" == CAP_SCALE ]] || printf -v "$v" '%s' $((${!v} * CAP_SCALE))
  done
fi
STAGE1_S="${STAGE1_S:-$BUDGET_1}"
STAGE2_S="${STAGE2_S:-$BUDGET_2}"
OPTIONAL=" sm_scaling kernel_partition_tests equality pdmux "
DRY_RUN=$([[ "${CPU_DRY_RUN:-0}" == 1 ]] && echo --cpu-dry-run)
if [[ -n "$DRY_RUN" ]] || "$PY" -c 'import sys, torch; sys.exit(not torch.cuda.is_available())' \
  2>/dev/null; then NO_CUDA=""; else NO_CUDA="no CUDA device"; fi
STAGE_DEADLINE=0

log() { printf '%s\n' "$*" | tee -a "$LOG"; }

# step STAGE_JSON NAME CMD... : runs CMD under min(CAP_<NAME>, stage time left), logs it (and
# into $RAW/NAME.log), then folds its verdict, seconds and the files in FILES (absolute paths)
# into STAGE_JSON. Without CUDA, with under 10 s left, or with SKIP_WHY set (the reason), the
# step is recorded as skipped.
FILES=()
SKIP_WHY=""
step() {
  local stage_json="$1" name="$2"
  shift 2
  local cap_var="CAP_$name" opt=() left limit t0 rc
  local cap="${!cap_var}"
  [[ "$OPTIONAL" == *" $name "* ]] && opt=(--optional)
  left=$((STAGE_DEADLINE - $(date +%s)))
  limit=$((cap < left ? cap : left))
  if [[ -n "$NO_CUDA$SKIP_WHY" ]] || ((limit < 10)); then
    local why="${NO_CUDA:-${SKIP_WHY:-stage time spent (${left}s left)}}"
    log "=== $name (cap ${cap}s${opt:+, optional}): skipped, $why"
    "$PY" -m benchmark.gpu.collect "$stage_json" "$name" null 0 --cap "$cap" "${opt[@]}" \
      --skip "$why" >>"$LOG" 2>&1 || log "collect failed for $name"
    FILES=() SKIP_WHY=""
    return 3
  fi
  log "=== $name (cap ${cap}s, limit ${limit}s${opt:+, optional}): $*"
  t0=$(date +%s)
  timeout --kill-after=10 "$limit" "$@" 2>&1 | tee -a "$LOG" "$RAW/$name.log"
  rc=${PIPESTATUS[0]}
  log "=== $name: rc=$rc in $(($(date +%s) - t0))s"
  "$PY" -m benchmark.gpu.collect "$stage_json" "$name" "$rc" "$(($(date +%s) - t0))" \
    --cap "$cap" "${opt[@]}" "${FILES[@]}" >>"$LOG" 2>&1 || log "collect failed for $name"
  FILES=()
  return "$rc"
}

# The kernel library: the carried wheel when it loads with its %smid probe, else built here.
install_kernel() {
  local whl
  whl=$(ls "$CARRY"/wheels/sgl_duet_kernel-*.whl 2>/dev/null | head -1)
  if [[ -f "$KSITE/.installed" ]] && "$PY" -c "import sgl_duet_kernel"; then
    echo "sgl_duet_kernel: installed by an earlier run on this machine ($(cat "$KSITE/.installed"))"
    return 0
  fi
  if [[ -n "$whl" ]] && "$PY" -m pip install -q --no-index --no-deps --no-compile \
    --disable-pip-version-check --target "$KSITE" "$whl" &&
    "$PY" -c "import sgl_duet_kernel as k; assert k.smid_available()"; then
    echo "sgl_duet_kernel: carried wheel $(basename "$whl")" | tee "$KSITE/.installed"
    return 0
  fi
  echo "sgl_duet_kernel: building from source with CMake"
  rm -rf "$KSITE" && mkdir -p "$KSITE"
  cmake -S "$ROOT/sgl-duet-kernel" -B "$WORK/kbuild" -DCMAKE_BUILD_TYPE=Release &&
    cmake --build "$WORK/kbuild" -j &&
    cp -r "$ROOT/sgl-duet-kernel/python/sgl_duet_kernel" "$KSITE/" &&
    cp "$WORK/kbuild/libsgl_duet_kernel.so" "$KSITE/sgl_duet_kernel/" &&
    "$PY" -c "import sgl_duet_kernel as k; print(k.library_path(), k.smid_available())" &&
    echo "built with CMake" >"$KSITE/.installed"
}

# The carry folder's wheels into SITE (real SGLang; on the path of every later step, so the
# test collection imports too); skipped when this carry is already installed there.
install_carry() {
  local sum
  sum=$(sha256sum "$CARRY/manifest.json" 2>/dev/null | cut -c1-16)
  if [[ -n "$sum" && -f "$SITE/.installed" && "$(cat "$SITE/.installed")" == "$sum" ]]; then
    echo "carry $sum: installed by an earlier run on this machine" && return 0
  fi
  rm -rf "$SITE" && mkdir -p "$SITE"
  "$PY" -m pip install -q --no-index --no-deps --no-compile --disable-pip-version-check \
    --target "$SITE" "$CARRY"/wheels/*.whl && du -sh "$SITE" && echo "$sum" >"$SITE/.installed"
}

setup() {  # once per run, before the first stage
  local J="$OUT_DIR/stage_setup.json"
  STAGE_DEADLINE=$(($(date +%s) + BUDGET_setup))
  log "##### setup, ${BUDGET_setup}s"
  step "$J" environment bash -c "nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version \
--format=csv,noheader; nvcc --version | tail -2; $PY -c 'import sys, torch; print(sys.version); \
print(\"torch\", torch.__version__, \"cuda\", torch.version.cuda, torch.cuda.is_available())'"
  step "$J" kernel bash -c install_kernel
  step "$J" install_carry bash -c install_carry
}

stage1() {
  local J="$OUT_DIR/stage1.json"
  STAGE_DEADLINE=$(($(date +%s) + STAGE1_S))
  log "##### stage 1 (torch only), ${STAGE1_S}s"
  step "$J" partition_report "$PY" -m sglang_duet.partition --build
  # Do primary-context events work on green-context streams? The test prints "phases join:
  # device events|host sync"; answers.py turns that into green_ctx_usable (a host sync means
  # SGLang's own decode replay, which records such events, cannot run there: green-ctx is
  # unusable and the server must start with --duet-partition-backend none).
  FILES=("$RAW/phases_answer.json")
  step "$J" phases_gpu bash -c "$PY -m pytest -q -rA -s -p no:cacheprovider \
$ROOT/test/runtime/test_phases_gpu.py 2>&1 | tee $RAW/phases_pytest.log; rc=\${PIPESTATUS[0]}; \
$PY -m benchmark.gpu.answers phases $RAW/phases_pytest.log $RAW/phases_answer.json; \
a=\$?; exit \$((rc ? rc : a))"
  # The gpu-marked partition tests (the %smid sets of the granted splits, a refused split);
  # named files, so that collection does not import the whole suite.
  FILES=("$RAW/partition_smids.json")
  step "$J" gpu_tests "$PY" -m pytest -q -rA -s -p no:cacheprovider -m gpu \
    "$ROOT"/test/partition/test_*_gpu.py
  FILES=("$RAW/concurrent_check.json")
  step "$J" concurrent_check "$PY" -m benchmark.gpu.concurrent_check --out "$RAW" --strict
  FILES=("$RAW/sm_scaling.json")
  step "$J" sm_scaling "$PY" -m benchmark.partition.sm_scaling --out "$RAW" --repeats 3
  cp "$RAW/sm_scaling.png" "$OUT_DIR/" 2>/dev/null
  step "$J" kernel_partition_tests "$PY" -m pytest -q -rA -p no:cacheprovider -m "not gpu" \
    "$ROOT/test/kernel" "$ROOT/test/partition"
}

stage2() {
  local J="$OUT_DIR/stage2.json" s
  STAGE_DEADLINE=$(($(date +%s) + STAGE2_S))
  log "##### stage 2 (real SGLang from $CARRY), ${STAGE2_S}s"
  step "$J" imports "$PY" -m benchmark.gpu.carry.imports sgl_kernel sgl_kernel.spatial \
    sglang.srt.managers.scheduler sglang.srt.models.qwen3 sglang_duet.runtime.scheduler
  for s in warmup serving latency_model equality pdmux; do
    local cap_var="CAP_$s" left budget
    left=$((STAGE_DEADLINE - $(date +%s)))
    budget=$(( (${!cap_var} < left ? ${!cap_var} : left) - 5 ))  # its own steps end first
    FILES=("$RAW/s2_$s.json")
    [[ -n "$DRY_RUN" && "$s" == pdmux ]] && SKIP_WHY="SGLang's pdmux needs CUDA (CPU rehearsal)"
    step "$J" "$s" "$PY" -m benchmark.gpu.serving_check "$RAW/s2_$s.json" --only "$s" \
      --work "$WORK/stage2" --budget-s "$budget" $DRY_RUN
  done
}

export -f install_kernel install_carry
export PY CARRY KSITE SITE WORK ROOT
log "sglang-duet GPU check $(date -u +%FT%TZ): stages $STAGES, output in $OUT_DIR\
${NO_CUDA:+ (dry run: $NO_CUDA)}"
log "coverage: attention is SGLang's triton backend only (FA3's flash_ops is 1.12 GB, not \
carriable, and the image has no FA3); TP=2 cannot run on one GPU (the CPU gloo tests carry it)"
setup
[[ "$STAGES" == all || "$STAGES" == 1 ]] && stage1
[[ "$STAGES" == all || "$STAGES" == 2 ]] && stage2

(cd "$WORK" && find . -name '*.log' -o -name 'plan_*' | tar czf "$OUT_DIR/logs.tar.gz" -T - \
  2>/dev/null)
# summary.json (stamped, like the stage JSONs): exit 0 when every stage is ok, or on a dry run.
ok=False
line=$("$PY" -m benchmark.gpu.collect --summary "$OUT_DIR" "$STAGES" \
  $(($(date +%s) - START_S)) 2>>"$LOG") && ok=True
log "=== done in $(($(date +%s) - START_S))s: $line"
find "$OUT_DIR" -maxdepth 1 -type f -printf "%s\t%f\n" | sort -k2 | tee -a "$LOG"
rm -rf "$WORK"
[[ $ok == True ]]
