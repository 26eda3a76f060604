"""Padding cut without changing the loss: ``TrainConfig.packing`` ("off", "length", "pack") gives the same
loss and gradients as the padded computation (to float rounding, fp64 here), reports the padding it leaves
(``padded_share``), and activation checkpointing gives the same gradients as keeping the activations.

Workloads: Sort-v0 prompts with a wide range of list lengths and responses from 1 to ~100 tokens, and
multi-turn samples whose environment tokens are masked out of the loss; hypothesis draws the lengths."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dapo_env.learners.algo.batch import (LAYOUTS, build_sequence_batch, first_fit_decreasing, forward_layout,
                                     layout_logprobs, micro_batch_layouts, micro_batches)
from dapo_env.learners.config import preset
from dapo_env.learners.algo.logprobs import activation_checkpointing
from dapo_env.learners.algo.losses import group_advantages
from dapo_env.learners.models.tiny import build_tiny_model, build_tokenizer
from dapo_env.learners.algo.update import update_policy
from dapo_env.tasks import get_task
from dapo_env.types import Completion, Group

torch.set_num_threads(1)
G = 4
TOK = build_tokenizer()


@dataclasses.dataclass(frozen=True)
class TurnSample:
    """A multi-turn sample (the TrainSample protocol): sampled turns (mask 1) around environment replies (0)."""

    prompt_token_ids: tuple[int, ...]
    token_ids: tuple[int, ...]
    sampled_mask: tuple[int, ...]
    logprobs: tuple[float, ...]
    weights_version: int = 0


def _model() -> torch.nn.Module:
    return build_tiny_model(TOK, hidden_size=64, layers=2, heads=2, max_positions=1024, seed=0).double()


MODEL = _model()


def sort_groups(response_lengths: list[list[int]], seed: int = 0) -> list[Group]:
    """Sort-v0 prompts (2 to 60 numbers: 50 to 300 prompt tokens) and responses of the given lengths (the
    start of the sorted answer, padded out with digits)."""
    task = get_task("Sort-v0")
    problems = task.load(split="train", min_count=2, max_count=60, max_value=999, size=len(response_lengths), seed=seed)
    groups = []
    for g, (problem, lengths) in enumerate(zip(problems, response_lengths)):
        prompt = tuple(TOK(task.format_prompt(problem))["input_ids"])
        answer = (TOK(str(problem.answer))["input_ids"] * 50)
        comps = tuple(Completion("x", token_ids=tuple(answer[:n]), prompt_token_ids=prompt, weights_version=0,
                                 logprobs=tuple(-1.0 for _ in range(n))) for n in lengths)
        rewards = tuple(1.0 if k % 2 else -1.0 for k in range(len(lengths)))
        groups.append(Group(str(g), "p", comps, rewards, tuple(r > 0 for r in rewards),
                            tuple(not (g == 1 and k == 0) for k in range(len(lengths)))))  # one sample filtered
    return groups


def turn_groups(turns: list[list[tuple[int, int]]], seed: int = 0) -> list[Group]:
    """Multi-turn samples: per sample a list of (sampled tokens, environment reply tokens) turns."""
    gen = np.random.default_rng(seed)
    groups = []
    for g in range(len(turns) // G):
        prompt = tuple(int(t) for t in gen.integers(5, 60, size=3 + 5 * g))
        samples = []
        for spec in turns[g * G:(g + 1) * G]:
            ids, mask = [], []
            for sampled, reply in spec:
                ids += [int(t) for t in gen.integers(5, 60, size=sampled + reply)]
                mask += [1] * sampled + [0] * reply
            samples.append(TurnSample(prompt, tuple(ids), tuple(mask), tuple(-1.0 if m else 0.0 for m in mask)))
        rewards = (1.0, -1.0, 1.0, -1.0)
        groups.append(Group(str(g), "p", tuple(samples), rewards, tuple(r > 0 for r in rewards), (True,) * G))
    return groups


def run_update(groups: list[Group], packing: str, *, micro: int, checkpointing: bool = False, model: Any = None,
               **overrides: Any) -> tuple[dict[str, float], list[torch.Tensor]]:
    """One off-policy update (2 optimizer steps, SGD lr 1) from the same fp64 model: metrics and gradients."""
    model = copy.deepcopy(MODEL if model is None else model)
    cfg = preset("tiny", group_size=G, batch_size=len(groups), mini_batch_size=max(len(groups) // 2, 1),
                 micro_batch_size=micro, grad_clip=1e9, packing=packing, gradient_checkpointing=checkpointing,
                 **overrides)
    batch = build_sequence_batch(groups, pad_id=0)
    adv = group_advantages(torch.tensor([r for g in groups for r in g.rewards], dtype=torch.float64), G)
    old = (batch.rollout_logprobs.double() + 0.05 * torch.randn(batch.rollout_logprobs.shape,
                                                               generator=torch.Generator().manual_seed(0))).double()
    old = old * batch.response_mask
    trainable = [p for p in model.parameters() if p.requires_grad]
    before = [p.detach().clone() for p in trainable]
    out = update_policy(model, torch.optim.SGD(trainable, lr=1.0), batch, adv, cfg, key=(0, 1), old_logp=old)
    return out.metrics, [b - p.detach() for b, p in zip(before, trainable)]


def assert_same(a: tuple[dict[str, float], list[torch.Tensor]], b: tuple[dict[str, float], list[torch.Tensor]]) -> None:
    for key in ("loss", "entropy", "clip_frac", "approx_kl", "grad_norm"):
        assert a[0][key] == pytest.approx(b[0][key], rel=1e-9, abs=1e-12), key
    for x, y in zip(a[1], b[1]):
        torch.testing.assert_close(x, y, rtol=1e-9, atol=1e-12)


lengths = st.lists(st.integers(1, 100), min_size=G, max_size=G)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(lengths, min_size=2, max_size=4), st.integers(1, 7))
def test_length_and_pack_give_the_padded_loss_and_gradients_on_sort(response_lengths: list[list[int]],
                                                                   micro: int) -> None:
    groups = sort_groups(response_lengths)
    padded = run_update(groups, "off", micro=micro)
    for packing in ("length", "pack"):
        assert_same(run_update(groups, packing, micro=micro), padded)


turns = st.lists(st.tuples(st.integers(1, 20), st.integers(0, 30)), min_size=1, max_size=4)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(turns, min_size=2 * G, max_size=2 * G), st.integers(1, 8))
def test_length_and_pack_give_the_padded_loss_on_multi_turn_episodes(spec: list[list[tuple[int, int]]],
                                                                     micro: int) -> None:
    groups = turn_groups(spec)
    padded = run_update(groups, "off", micro=micro)
    for packing in ("length", "pack"):
        assert_same(run_update(groups, packing, micro=micro), padded)


def test_padded_share_is_reported_and_cut() -> None:
    # two groups of 4: prompts of P_g tokens, responses 1..100 tokens
    groups = sort_groups([[1, 100, 3, 50], [7, 90, 2, 12]], seed=3)
    batch = build_sequence_batch(groups, pad_id=0)
    prompt = batch.attention_mask[:, :batch.prompt_len].sum(-1)
    real = int(prompt.sum() + batch.response_mask.sum())
    share = {p: run_update(groups, p, micro=2)[0]["padded_share"] for p in LAYOUTS}
    # off: 2 optimizer steps of one group each, every row padded to the whole batch's P + R
    assert share["off"] == pytest.approx(1 - real / (8 * batch.input_ids.shape[1]))
    assert share["pack"] <= share["length"] < share["off"]
    assert share["pack"] < 0.1 < share["off"]


def test_micro_batches_sort_by_length_and_keep_every_row() -> None:
    groups = sort_groups([[5, 1, 9, 3], [2, 8, 4, 7]])
    batch = build_sequence_batch(groups, pad_id=0)
    rows = torch.tensor([6, 0, 3, 5, 1, 7, 2, 4])
    assert torch.equal(torch.cat(micro_batches(batch, rows, 3, "off")), rows)
    for packing in ("length", "pack"):
        parts = micro_batches(batch, rows, 3, packing)
        assert [len(p) for p in parts] == [3, 3, 2] and sorted(torch.cat(parts).tolist()) == sorted(rows.tolist())
        response = batch.response_mask.sum(-1)
        assert (response[torch.cat(parts)].diff() <= 0).all()  # longest responses first
    with pytest.raises(ValueError, match="choose one of"):
        micro_batches(batch, rows, 3, "bucket")


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 100), min_size=4, max_size=4 * 6).filter(lambda xs: len(xs) % 4 == 0),
       st.integers(1, 9), st.sampled_from(LAYOUTS))
def test_micro_batch_layouts_cover_every_row_once_within_the_padded_bound(lengths: list[int], size: int,
                                                                        packing: str) -> None:
    groups = sort_groups([lengths[i:i + 4] for i in range(0, len(lengths), 4)])
    batch = build_sequence_batch(groups, pad_id=0)
    rows = torch.randperm(batch.num_rows, generator=torch.Generator().manual_seed(len(lengths)))
    layouts = micro_batch_layouts(batch, rows, size, packing)
    assert sorted(torch.cat([m.rows for m in layouts]).tolist()) == sorted(rows.tolist())
    width = batch.input_ids.shape[1]
    for m in layouts:
        assert m.shape[0] <= size and m.total_tokens <= size * width  # never more than a padded micro-batch
        assert 0 <= m.padding_tokens < m.total_tokens
        if packing == "pack":
            assert sorted(i for b in m.bins for i in b) == list(range(m.rows.numel()))
    real = sum(m.real_tokens for m in layouts)
    assert real == int(batch.attention_mask.sum())  # prompt + response tokens, each counted once
    if packing == "pack":  # the mini-batch packs into as few rows as first-fit-decreasing finds
        assert sum(m.total_tokens for m in layouts) <= min(
            sum(forward_layout(batch, sub, "length").total_tokens for sub in micro_batches(batch, rows, size, "length")),
            len(rows) * width)


@given(st.lists(st.integers(1, 50), min_size=1, max_size=30))
def test_first_fit_decreasing_places_every_item_once_within_capacity(items: list[int]) -> None:
    capacity = max(items)
    bins = first_fit_decreasing(items, capacity)
    assert sorted(i for b in bins for i in b) == list(range(len(items)))
    assert all(sum(items[i] for i in b) <= capacity for b in bins)
    assert len(bins) <= len(items)


def test_packed_rows_keep_sequences_apart() -> None:
    """A token's log-prob in a packed row does not depend on its neighbours (changing them changes nothing)."""
    groups = turn_groups([[(1, 0)], [(30, 0)], [(2, 3)], [(5, 0)]])  # 3-token prompt: 4, 33, 8, 8 tokens
    batch = build_sequence_batch(groups, pad_id=0)
    rows = torch.arange(4)
    layout = forward_layout(batch, rows, "pack")
    assert any(len(b) > 1 for b in layout.bins)  # some row holds several sequences
    with torch.no_grad():
        packed = layout_logprobs(MODEL, batch, layout, 1.0)[0]
        alone = torch.cat([layout_logprobs(MODEL, batch, forward_layout(batch, rows[i:i + 1], "off"), 1.0)[0]
                           for i in range(4)])
    torch.testing.assert_close(packed, alone, rtol=1e-10, atol=1e-12)


def test_gradient_checkpointing_recomputes_layers_and_keeps_the_gradients() -> None:
    groups = sort_groups([[4, 30, 9, 17], [12, 2, 25, 6]])
    model = copy.deepcopy(MODEL)
    calls: list[int] = []
    model.model.layers[0].self_attn.register_forward_hook(lambda *_: calls.append(1))  # runs inside the layer
    plain = run_update(groups, "pack", micro=4, model=model)
    n_plain = len(calls)
    calls.clear()
    ckpt = run_update(groups, "pack", micro=4, model=model, checkpointing=True)
    assert_same(ckpt, plain)
    # deepcopy keeps the hook: with checkpointing the layer runs again in every backward
    assert n_plain > 0 and len(calls) == 2 * n_plain
    assert not model.model.layers[0].gradient_checkpointing  # the model's own setting is restored


def test_gradient_checkpointing_with_lora_keeps_the_adapter_gradients() -> None:
    pytest.importorskip("peft")
    from dapo_env.learners.models.lora import LoraSettings, add_lora

    model = copy.deepcopy(MODEL)
    add_lora(model, LoraSettings(rank=4))
    model.double()
    groups = sort_groups([[4, 30, 9, 17], [12, 2, 25, 6]])
    plain = run_update(groups, "length", micro=3, model=model)
    ckpt = run_update(groups, "length", micro=3, model=model, checkpointing=True)
    assert len(plain[1]) < len(list(model.parameters()))  # only the adapter trains
    assert any(float(d.abs().max()) > 0 for d in plain[1])
    assert_same(ckpt, plain)


def test_activation_checkpointing_refuses_a_model_without_it() -> None:
    with pytest.raises(ValueError, match="gradient_checkpointing=False"):
        with activation_checkpointing(torch.nn.Linear(2, 2)):
            pass
    with activation_checkpointing(torch.nn.Linear(2, 2), enabled=False):
        pass


def test_config_checks_the_switches() -> None:
    with pytest.raises(ValueError, match="packing"):
        preset("tiny", packing="bucket")
    with pytest.raises(ValueError, match="gradient_checkpointing"):
        preset("tiny", gradient_checkpointing="yes")


def test_packing_refuses_an_attention_without_a_packed_mask() -> None:
    from types import SimpleNamespace

    from dapo_env.learners.algo.logprobs import check_packing_support

    check_packing_support(MODEL)  # sdpa: fine
    custom = SimpleNamespace(config=SimpleNamespace(_attn_implementation="my_kernel"))
    with pytest.raises(ValueError, match="packing='length'"):
        check_packing_support(custom)


def test_auto_packs_where_it_is_exact_and_sorts_by_length_elsewhere() -> None:
    from types import SimpleNamespace

    from dapo_env.learners.algo.logprobs import resolve_packing

    custom = SimpleNamespace(config=SimpleNamespace(_attn_implementation="my_kernel"))
    assert resolve_packing("auto", MODEL) == "pack" and resolve_packing("auto", custom) == "length"
    assert [resolve_packing(p, custom) for p in ("off", "length", "pack")] == ["off", "length", "pack"]
    groups = sort_groups([[5, 1, 9, 3], [2, 8, 4, 7]])
    with pytest.raises(ValueError, match="resolve_packing"):  # the layout functions need it resolved
        micro_batches(build_sequence_batch(groups, pad_id=0), torch.arange(8), 2, "auto")
    assert_same(run_update(groups, "auto", micro=2), run_update(groups, "off", micro=2))  # the default is exact


def test_train_flag_switches_gradient_checkpointing_and_set_picks_the_packing() -> None:
    from dapo_env.learners.cli import build_parser, config_from_args

    args = build_parser().parse_args(["train", "--gradient-checkpointing", "--set", "packing=pack"])
    cfg, resume = config_from_args(args)
    assert cfg.gradient_checkpointing is True and cfg.packing == "pack" and not resume
    cfg, _ = config_from_args(build_parser().parse_args(["train"]))
    assert cfg.gradient_checkpointing is False and cfg.packing == "auto"  # pack where it is exact
