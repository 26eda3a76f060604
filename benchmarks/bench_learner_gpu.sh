#!/usr/bin/env bash
# bench_learner on one CUDA GPU: our trainer vs TRL's GRPOTrainer vs the floors (a bare update loop on the
# batches our update saw; a bare KV-cache sampling loop beside HFEngine.generate) on a Qwen2-0.5B-shaped
# random-init model in bf16 (hidden 896, 24 layers, 14 heads, 2 kv heads, intermediate 4864, vocab 151,936;
# built from a config, nothing downloaded), then our side again with the in-process vLLM engine, then in server
# mode (--engine vllm-server: the engine starts `vllm serve` on the same GPU with 30 % of its memory, pushes the
# weights after every optimizer step and verifies each push by fingerprint; --weight-sync auto: vLLM's NCCL
# weight transfer when the server has a GPU of its own, else the safetensors file path, as on this one-GPU
# machine, since NCCL cannot join two ranks on one GPU; the JSON records which ran and every push's latency).
# Prints tokens/s and MFU (6N FLOPs per update token, 2N per generated token, over the GPU's bf16 peak).
# G=16, 8 prompts per step (128 responses of <= 512 tokens), micro-batch 32, 1 warm-up + 3 measured steps.
#
# Usage (repository root):
#   bash benchmarks/bench_learner_gpu.sh             # on the GPU machine (~10-13 minutes on one H100/H200)
#   bash benchmarks/bench_learner_gpu.sh --dry-run   # anywhere (CPU): checks arguments, paths, packages
# Writes benchmarks/results/bench_learner_gpu.json, bench_learner_gpu_vllm.json and bench_learner_gpu_server.json,
# and copies plus the log to $OUT when OUT is set.
#
# The GPU machine has no network. Packages it lacks travel as wheels in .whl/ (git-ignored); prepare them
# on a machine with PyPI access, from the repository root (the GPU image runs Python 3.12):
#   bash benchmarks/bench_learner_gpu.sh --download-wheels
# then carry .whl with the run. Without CUDA the script prints why and exits 0 (nothing to measure).
set -euo pipefail
cd "$(dirname "$0")/.."

# Packages bench_learner needs that the CUDA image (torch, transformers, accelerate, ... present) lacks.
WHEELS=(trl==1.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 gymnasium==1.4.0 farama-notifications==0.0.6
        math-verify==0.9.0 latex2sympy2_extended==1.11.0 antlr4-python3-runtime==4.13.2)
PY=${PYTHON:-python3}
RESULT=benchmarks/results/bench_learner_gpu.json
RESULT_VLLM=benchmarks/results/bench_learner_gpu_vllm.json
RESULT_SERVER=benchmarks/results/bench_learner_gpu_server.json
SERVER_ARGS=(--engine vllm-server --weight-sync "${WEIGHT_SYNC:-auto}" --sides ours)
# One workload for every run (and for the dry run's checks).
ARGS=(--device cuda --model-shape qwen2-0.5b --dtype bfloat16 --group-size 16 --prompts 8 --micro-batch 32
      --length 512 --warmup 1 --steps 3 --threads 2)

case "${1:-}" in
  --download-wheels)
    mkdir -p .whl
    grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
    $PY -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
      --platform any -d .whl "${WHEELS[@]}"
    exit 0 ;;
  --dry-run)
    echo "bench_learner_gpu: dry run (nothing is measured)"
    for f in benchmarks/bench_learner.py benchmarks/_paths.py learners/engines/server.py learners/engines/weight_sync.py \
             learners/engines/nccl_sync.py learners/engines/server_sync.py; do
      [[ -f "$f" ]] || { echo "bench_learner_gpu: missing $f" >&2; exit 1; }
    done
    if [[ -d .whl ]]; then echo "wheels: $(ls .whl/*.whl 2>/dev/null | wc -l) in .whl/"; else
      echo "wheels: no .whl/ (the GPU image lacks trl, datasets, gymnasium, math-verify: run --download-wheels)"; fi
    $PY benchmarks/bench_learner.py --dry-run "${ARGS[@]}" --out "$RESULT"
    $PY benchmarks/bench_learner.py --dry-run "${ARGS[@]}" --engine vllm --sides ours --out "$RESULT_VLLM"
    $PY benchmarks/bench_learner.py --dry-run "${ARGS[@]}" "${SERVER_ARGS[@]}" --out "$RESULT_SERVER"
    exit 0 ;;
  "") ;;
  *) echo "usage: bash benchmarks/bench_learner_gpu.sh [--dry-run | --download-wheels]" >&2; exit 2 ;;
esac

if ! $PY -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "bench_learner_gpu: no CUDA device visible to torch; nothing to measure"
  exit 0
fi
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
SITE=/tmp/bench_learner_site
if [[ -d .whl ]] && ls .whl/*.whl >/dev/null 2>&1; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl
fi
# The project itself, without touching the image's packages (no dependencies, no network).
if ! $PY -c 'import dapo_env.learners.trainer' 2>/dev/null; then
  $PY -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --target "$SITE" . \
    || echo "bench_learner_gpu: could not install the project into $SITE"
fi
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
$PY -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__, torch.cuda.get_device_name())'
$PY -c 'import trl; print("trl", trl.__version__)' || echo "trl missing: the TRL side will be skipped (carry .whl)"
LOG="${OUT:-/tmp}/bench_learner_gpu.log"

set -o pipefail
timeout 480 $PY benchmarks/bench_learner.py "${ARGS[@]}" --out "$RESULT" 2>&1 | tee "$LOG"
if $PY -c 'import vllm' 2>/dev/null; then
  timeout 300 $PY benchmarks/bench_learner.py "${ARGS[@]}" --engine vllm --sides ours --out "$RESULT_VLLM" 2>&1 \
    | tee -a "$LOG"
  timeout 420 $PY benchmarks/bench_learner.py "${ARGS[@]}" "${SERVER_ARGS[@]}" --out "$RESULT_SERVER" 2>&1 \
    | tee -a "$LOG" || echo "bench_learner_gpu: the server-mode run failed (see $LOG)" | tee -a "$LOG"
else
  echo "vllm missing: the in-process vLLM and server-mode runs are skipped" | tee -a "$LOG"
fi
if [[ -n "${OUT:-}" ]]; then
  for f in "$RESULT" "$RESULT_VLLM" "$RESULT_SERVER"; do [[ -f "$f" ]] && cp "$f" "$OUT/"; done
fi
