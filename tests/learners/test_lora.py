"""LoRA adapters on the tiny model: settings, what trains, generation with the adapter in place, the
adapter's files (peft's format, both ways), merging for export."""

from __future__ import annotations

import json
import sys

import pytest
import torch
from optional_extras import require

from dapo_env.learners.engines import HFEngine, SamplingParams
from dapo_env.learners.models.tiny import build_tiny_model, build_tokenizer

require("peft", "LoRA tests")

from dapo_env.learners.models import lora  # noqa: E402
from dapo_env.learners.models.lora import LoraSettings  # noqa: E402

LLAMA_TARGETS = ("down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj")


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


def tiny(tok, seed: int = 0) -> torch.nn.Module:
    return build_tiny_model(tok, hidden_size=64, layers=2, heads=2, seed=seed)


def perturb_adapter(model: torch.nn.Module, seed: int = 1, scale: float = 0.3) -> None:
    """Give B (zero at init) random values, so the adapter changes the model's outputs."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, tensor in lora.adapter_state_dict(model).items():
            if ".lora_B." in name:
                tensor.copy_(torch.randn(tensor.shape, generator=gen) * scale)


def logits(model: torch.nn.Module, tok, text: str = "12+34=46\n") -> torch.Tensor:
    ids = torch.tensor([tok(text)["input_ids"]])
    model.eval()
    with torch.no_grad():
        return model(input_ids=ids).logits[0]  # (T, V)


# --- settings ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, match", [
    (dict(rank=0), "rank 0 means full fine-tuning"),
    (dict(rank=-2), "rank must be an integer >= 1"),
    (dict(rank=2.0), "rank must be an integer"),
    (dict(rank=True), "rank must be an integer"),
    (dict(rank=4, alpha=0), "alpha must be a number > 0"),
    (dict(rank=4, alpha="16"), "alpha must be a number"),
    (dict(rank=4, dropout=1.0), r"dropout must be in \[0, 1\)"),
    (dict(rank=4, target_modules=()), "target_modules must be module names"),
    (dict(rank=4, target_modules=("q_proj", "")), "target_modules must be module names"),
])
def test_settings_reject_bad_values_naming_the_fix(kwargs, match) -> None:
    with pytest.raises(ValueError, match=match):
        LoraSettings(**kwargs)


def test_settings_normalise_targets_and_scale() -> None:
    assert LoraSettings(rank=4, target_modules="q_proj").target_modules == ("q_proj",)
    assert LoraSettings(rank=4, target_modules=["q_proj", "v_proj"]).target_modules == ("q_proj", "v_proj")
    assert LoraSettings(rank=16, alpha=8).scaling == 0.5


# --- adding an adapter -------------------------------------------------------------------------------
def test_default_targets_are_the_attention_and_mlp_projections(tok) -> None:
    model = lora.add_lora(tiny(tok), LoraSettings(rank=4))
    assert lora.lora_settings(model).target_modules == LLAMA_TARGETS
    adapted = {name.rpartition(".")[0] for name in lora.adapter_state_dict(model)}
    # 2 layers x 7 projections x (lora_A, lora_B)
    assert len(adapted) == 2 * 7 * 2
    assert not any("embed" in n or "lm_head" in n or "norm" in n for n in adapted)


def test_default_targets_of_other_architectures() -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=50, n_positions=32, n_embd=32, n_layer=1, n_head=2))
    assert lora.default_target_modules(gpt2) == ("c_attn", "c_proj", "c_fc")
    gpt2 = lora.add_lora(gpt2, LoraSettings(rank=2))  # Conv1D layers (weights stored transposed)
    assert {n.split(".lora_")[0].rpartition(".")[2] for n in lora.adapter_state_dict(gpt2)} == {"c_attn", "c_proj", "c_fc"}
    perturb_adapter(gpt2)
    ids = torch.tensor([[1, 2, 3]])
    torch.testing.assert_close(lora.merged_model(gpt2).eval()(input_ids=ids).logits, gpt2.eval()(input_ids=ids).logits)

    class Unknown(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.config = type("Config", (), {"model_type": "my-new-arch"})()
            self.proj = torch.nn.Linear(4, 4)

    assert lora.default_target_modules(Unknown()) == ("all-linear",)


def test_only_adapter_parameters_train_and_outputs_start_unchanged(tok) -> None:
    base = tiny(tok)
    before = {k: v.clone() for k, v in base.state_dict().items()}
    reference = logits(base, tok)
    model = lora.add_lora(base, LoraSettings(rank=4, alpha=8))
    assert model is base  # injected in place: same object, same class
    assert torch.equal(logits(model, tok), reference)  # B = 0 at init
    trainable = dict(lora.trainable_parameters(model))
    assert trainable and all(".lora_A." in n or ".lora_B." in n for n in trainable)
    n_trainable, n_total = lora.count_parameters(model)
    assert n_trainable == sum(p.numel() for p in trainable.values())
    # r * (in + out) per adapted linear layer; per decoder layer: 4 x (64 + 64) + 3 x (64 + 256) = 1472
    assert n_trainable == 4 * 2 * 1472 and n_total > 10 * n_trainable

    optimizer = torch.optim.AdamW(trainable.values(), lr=1e-2)
    ids = torch.tensor([tok("3+4=7\n")["input_ids"]])
    model.train()
    for _ in range(3):
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    for name, param in model.named_parameters():
        if name not in trainable:
            assert param.grad is None, name
    base_now = lora.base_state_dict(model)
    assert set(base_now) == set(before)  # the plain model's names
    for name, tensor in before.items():
        assert torch.equal(base_now[name], tensor), f"frozen base weight {name} changed"
    assert not torch.allclose(logits(model, tok), reference)  # and the adapter did learn something


def test_bad_targets_and_double_adapters_are_refused(tok) -> None:
    with pytest.raises(ValueError, match=r"\['qkv'\] are not linear layers.*choose from.*q_proj"):
        lora.add_lora(tiny(tok), LoraSettings(rank=4, target_modules=("q_proj", "qkv")))
    model = lora.add_lora(tiny(tok), LoraSettings(rank=4))
    with pytest.raises(ValueError, match="already carries a LoRA adapter"):
        lora.add_lora(model, LoraSettings(rank=4))
    with pytest.raises(ValueError, match="carries no LoRA adapter"):
        lora.adapter_state_dict(tiny(tok))


def test_all_linear_targets_every_linear_layer_but_the_head(tok) -> None:
    model = lora.add_lora(build_tiny_model(tok, hidden_size=64, layers=1, heads=2, tie_embeddings=False),
                          LoraSettings(rank=2, target_modules=("all-linear",)))
    assert set(lora.lora_settings(model).target_modules) == set(LLAMA_TARGETS)


def test_without_peft_a_plain_model_has_no_adapter_and_adding_one_names_the_install(tok, monkeypatch) -> None:
    model = tiny(tok)
    monkeypatch.setitem(sys.modules, "peft", None)  # import peft now fails
    assert not lora.has_lora(model)
    with pytest.raises(ImportError, match=r"pip install 'dapo-env\[lora\]'"):
        lora.add_lora(model, LoraSettings(rank=4))


# --- generation with the adapter in place --------------------------------------------------------------
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_hf_engine_generates_with_the_adapter_like_the_merged_model(tok, temperature) -> None:
    model = lora.add_lora(tiny(tok), LoraSettings(rank=4))
    perturb_adapter(model)
    merged = lora.merged_model(model)
    base = tiny(tok)  # the same base without the adapter
    prompts = ["12+34=", "7*8=", "Largest of 3 9 1 ?"]
    sampling = SamplingParams(temperature=temperature, max_response_tokens=12, seed=5)
    with_adapter = HFEngine(model, tok).generate(prompts, n=4, sampling=sampling)
    from_merged = HFEngine(merged, tok).generate(prompts, n=4, sampling=sampling)
    from_base = HFEngine(base, tok).generate(prompts, n=4, sampling=sampling)
    ids = lambda groups: [c.token_ids for g in groups for c in g]  # noqa: E731
    assert ids(with_adapter) == ids(from_merged)
    assert ids(with_adapter) != ids(from_base)  # the adapter matters
    for a, b in zip((c for g in with_adapter for c in g), (c for g in from_merged for c in g)):
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)
    assert all(p.requires_grad for _, p in lora.trainable_parameters(model))  # generation left training state alone


def test_dropout_is_off_while_generating(tok) -> None:
    model = lora.add_lora(tiny(tok), LoraSettings(rank=4, dropout=0.5))
    perturb_adapter(model)
    model.train()
    sampling = SamplingParams(temperature=0.0, max_response_tokens=10, seed=0)
    engine = HFEngine(model, tok)
    first = engine.generate(["1+2="], n=1, sampling=sampling)[0][0]
    second = engine.generate(["1+2="], n=1, sampling=sampling)[0][0]
    assert first.token_ids == second.token_ids and first.logprobs == second.logprobs
    assert model.training  # restored


# --- files ---------------------------------------------------------------------------------------------
def test_adapter_files_are_peft_format_both_ways(tok, tmp_path) -> None:
    from peft import PeftModel, get_peft_model
    from peft import LoraConfig as PeftLoraConfig
    from safetensors.torch import load_file

    ours = lora.add_lora(tiny(tok), LoraSettings(rank=4, alpha=16, target_modules=("q_proj", "v_proj")))
    perturb_adapter(ours)
    lora.save_adapter(ours, tmp_path / "ours")
    # The same adapter through peft's own wrapper writes the same tensors under the same keys.
    theirs = get_peft_model(tiny(tok), PeftLoraConfig(r=4, lora_alpha=16, target_modules=["q_proj", "v_proj"]))
    theirs.get_base_model().load_state_dict(ours.state_dict())
    theirs.save_pretrained(tmp_path / "theirs")
    a = load_file(tmp_path / "ours" / lora.WEIGHTS_FILE)
    b = load_file(tmp_path / "theirs" / lora.WEIGHTS_FILE)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    config = json.loads((tmp_path / "ours" / lora.CONFIG_FILE).read_text())
    assert (config["r"], config["lora_alpha"], sorted(config["target_modules"])) == (4, 16, ["q_proj", "v_proj"])

    # peft loads our folder and computes what our model computes...
    loaded = PeftModel.from_pretrained(tiny(tok), tmp_path / "ours")
    torch.testing.assert_close(logits(loaded, tok), logits(ours, tok))
    # ...and we load peft's folder.
    back = lora.load_lora_model(tmp_path / "theirs", base_model=tiny(tok))
    torch.testing.assert_close(logits(back, tok), logits(ours, tok))


def test_adapter_round_trips_exactly_and_rebuilds_base_plus_adapter(tok, tmp_path) -> None:
    from dapo_env.learners.models.tiny import save_tiny

    model = lora.add_lora(tiny(tok, seed=3), LoraSettings(rank=8, alpha=4, dropout=0.1))
    perturb_adapter(model, seed=2)
    save_tiny(tiny(tok, seed=3), tok, tmp_path / "run" / "base_model")
    adapter_dir = tmp_path / "run" / "checkpoints" / "step_000010" / "model"
    lora.save_adapter(model, adapter_dir, base_model="../../../base_model")  # relative to the adapter folder

    settings, _, tensors = lora.read_adapter(adapter_dir)
    assert settings == lora.lora_settings(model)
    state = lora.adapter_state_dict(model)
    assert tensors.keys() == state.keys() and all(torch.equal(tensors[k], state[k]) for k in state)

    fresh = lora.add_lora(tiny(tok, seed=3), settings)
    lora.load_adapter(fresh, adapter_dir)
    assert all(torch.equal(lora.adapter_state_dict(fresh)[k], state[k]) for k in state)

    rebuilt = lora.load_lora_model(adapter_dir)  # base from the relative path, then the adapter
    assert lora.resolve_base(adapter_dir) == (tmp_path / "run" / "base_model").resolve()
    assert torch.equal(logits(rebuilt, tok), logits(model, tok))
    assert {n for n, _ in lora.trainable_parameters(rebuilt)} == set(state)  # trainable (resume)
    frozen = lora.load_lora_model(adapter_dir, trainable=False)
    assert not list(lora.trainable_parameters(frozen))


def test_loading_a_mismatched_adapter_names_the_problem(tok, tmp_path) -> None:
    model = lora.add_lora(tiny(tok), LoraSettings(rank=4, target_modules=("q_proj",)))
    lora.save_adapter(model, tmp_path / "q")
    other_targets = lora.add_lora(tiny(tok), LoraSettings(rank=4, target_modules=("v_proj",)))
    with pytest.raises(ValueError, match="does not match the model's: missing.*v_proj.*unexpected.*q_proj"):
        lora.load_adapter(other_targets, tmp_path / "q")
    other_rank = lora.add_lora(tiny(tok), LoraSettings(rank=2, target_modules=("q_proj",)))
    with pytest.raises(ValueError, match=r"has shape \(4, 64\), the model's is \(2, 64\) \(another rank\?\)"):
        lora.load_adapter(other_rank, tmp_path / "q")
    with pytest.raises(FileNotFoundError, match="is not a LoRA adapter folder"):
        lora.read_adapter(tmp_path)
    with pytest.raises(FileNotFoundError, match="does not name its base model"):
        lora.load_lora_model(tmp_path / "q")
    lora.save_adapter(model, tmp_path / "gone", base_model=str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="is not a local folder.*never downloaded"):
        lora.load_lora_model(tmp_path / "gone")


# --- merging -------------------------------------------------------------------------------------------
def test_merged_weights_are_base_plus_scaled_b_times_a(tok) -> None:
    model = lora.add_lora(tiny(tok), LoraSettings(rank=2, alpha=6, target_modules=("q_proj",)))
    perturb_adapter(model)
    with torch.no_grad():
        for name, tensor in lora.adapter_state_dict(model).items():
            if ".lora_A." in name:
                tensor.copy_(torch.ones_like(tensor))
    prefix = "model.layers.0.self_attn.q_proj"
    state = model.state_dict()
    a, b = state[f"{prefix}.lora_A.default.weight"], state[f"{prefix}.lora_B.default.weight"]  # (2, 64), (64, 2)
    w = state[f"{prefix}.base_layer.weight"]  # (64, 64)
    merged = lora.merged_state_dict(model)
    assert torch.equal(a, torch.ones_like(a))
    # A is all ones, so (B A)[i, j] = B[i, 0] + B[i, 1] for every column j; the scale is alpha / r = 3.
    expected = w + 3.0 * (b[:, 0] + b[:, 1])[:, None].expand(-1, 64)
    torch.testing.assert_close(merged[f"{prefix}.weight"], expected)
    assert torch.equal(merged["model.layers.0.self_attn.k_proj.weight"], state["model.layers.0.self_attn.k_proj.weight"])
    assert set(merged) == set(tiny(tok).state_dict())
    assert torch.equal(model.state_dict()[f"{prefix}.base_layer.weight"], w)  # the model itself is untouched


def test_merged_model_is_a_plain_model_computing_the_same_function(tok, tmp_path) -> None:
    model = lora.add_lora(tiny(tok), LoraSettings(rank=4))
    perturb_adapter(model)
    plain = lora.merged_model(model)
    assert type(plain) is type(model) and not lora.has_lora(plain)
    assert not any("lora_" in n or "base_layer" in n for n in plain.state_dict())
    torch.testing.assert_close(logits(plain, tok), logits(model, tok), atol=1e-5, rtol=1e-5)
    assert lora.has_lora(model) and len(lora.adapter_state_dict(model)) == 28  # the original keeps its adapter
    plain.save_pretrained(tmp_path / "export")  # a plain HF folder: loads without peft
    from transformers import AutoModelForCausalLM

    again = AutoModelForCausalLM.from_pretrained(tmp_path / "export", dtype=torch.float32)
    torch.testing.assert_close(logits(again, tok), logits(plain, tok))
