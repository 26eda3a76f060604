"""update_policy (the public update) and the sequence batch it works on: metric aggregation, split
invariance, the on-policy shortcut, the per-step callback, sampled-token masks and the mismatch metric."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
import torch

from dapo_env.learners.algo import update as update_module
from dapo_env.learners.algo.batch import batch_logprobs, build_sequence_batch, logprob_mismatch
from dapo_env.learners.config import preset
from dapo_env.learners.algo.losses import AGGREGATIONS, POLICY_LOSSES, group_advantages, register_aggregation
from dapo_env.learners.models.tiny import build_tiny_model, build_tokenizer
from dapo_env.learners.algo.update import update_policy
from dapo_env.types import Completion, Group

torch.set_num_threads(1)
G = 4


def _groups(num_groups: int = 4, seed: int = 0, version: int | None = 0) -> list[Group]:
    gen = np.random.default_rng(seed)
    groups = []
    for g in range(num_groups):
        prompt = tuple(int(t) for t in gen.integers(5, 30, size=2 + g))
        comps = tuple(Completion("x", token_ids=tuple(int(t) for t in gen.integers(5, 30, size=n)),
                                 logprobs=tuple(-1.0 for _ in range(n)), prompt_token_ids=prompt,
                                 weights_version=version) for n in gen.integers(1, 9, size=G))
        rewards = (1.0, -1.0, 1.0 if g % 2 else -1.0, -1.0)
        groups.append(Group(str(g), "p", comps, rewards, tuple(r > 0 for r in rewards), (True, True, g != 1, True)))
    return groups


def _setup(**overrides: Any) -> tuple[torch.nn.Module, Any, Any, torch.Tensor]:
    tok = build_tokenizer()
    model = build_tiny_model(tok, hidden_size=64, layers=1, heads=2, seed=0)
    cfg = preset("tiny", group_size=G, batch_size=4, **{"mini_batch_size": 2, "micro_batch_size": 8,
                                                        "grad_clip": 1e9, **overrides})
    groups = _groups()
    batch = build_sequence_batch(groups, pad_id=0)
    adv = group_advantages(torch.tensor([r for g in groups for r in g.rewards]), G)
    return model, cfg, batch, adv


def test_loss_and_every_metric_are_means_over_optimizer_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    model, cfg, batch, adv = _setup(micro_batch_size=8)  # 2 mini-batches of 8 rows: one micro-batch each
    losses: list[float] = []
    real = POLICY_LOSSES["ppo-clip"]

    def spy(*args: Any, **kwargs: Any) -> Any:
        loss, metrics = real(*args, **kwargs)
        losses.append(float(loss.detach()))
        return loss, metrics

    monkeypatch.setitem(POLICY_LOSSES, "ppo-clip", spy)  # the loss update_policy looks up
    old = batch_logprobs(model, batch, micro_batch_size=8, temperature=1.0) - 0.3 * batch.response_mask
    result = update_policy(model, torch.optim.SGD(model.parameters(), lr=0.1), batch, adv, cfg, key=(0, 0),
                           old_logp=old)
    assert result.optimizer_steps == 2 and len(losses) == 2
    assert result.metrics["loss"] == pytest.approx(np.mean(losses))  # a mean, not the sum
    assert abs(sum(losses)) > abs(result.metrics["loss"]) * 1.01 or losses[0] * losses[1] < 0
    assert set(result.metrics) == {"loss", "entropy", "grad_norm", "padded_share", *update_module.LOSS_METRICS}


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"])
def test_micro_batch_split_does_not_change_the_update(agg: str) -> None:
    params = []
    for micro in (1, 3, 16):
        model, cfg, batch, adv = _setup(micro_batch_size=micro, loss_agg=agg, mini_batch_size=4)
        old = batch_logprobs(model, batch, micro_batch_size=16, temperature=1.0) - 0.2 * batch.response_mask
        out = update_policy(model, torch.optim.SGD(model.parameters(), lr=1.0), batch, adv, cfg, key=(1, 2),
                            old_logp=old)
        params.append((out.metrics["loss"], [p.detach().clone() for p in model.parameters()]))
    for loss, ps in params[1:]:
        assert loss == pytest.approx(params[0][0], rel=1e-5, abs=1e-7)
        for a, b in zip(ps, params[0][1]):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_on_policy_shortcut_fills_old_logp_and_needs_one_step() -> None:
    model, cfg, batch, adv = _setup(mini_batch_size=4)
    expected = batch_logprobs(model, batch, micro_batch_size=8, temperature=1.0)
    pushes: list[int] = []
    result = update_policy(model, torch.optim.SGD(model.parameters(), lr=0.1), batch, adv, cfg, key=(0, 0),
                           on_optimizer_step=lambda: pushes.append(1))
    torch.testing.assert_close(result.old_logp, expected, rtol=1e-5, atol=1e-6)
    assert pushes == [1] and result.metrics["clip_frac_high"] == 0.0  # the ratio is 1 on-policy
    model, cfg, batch, adv = _setup(mini_batch_size=2)
    with pytest.raises(ValueError, match="exactly one optimizer step"):
        update_policy(model, torch.optim.SGD(model.parameters(), lr=0.1), batch, adv, cfg, key=(0, 0))


def test_gspo_tis_and_a_registered_aggregation_are_reached_from_the_config(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict[str, Any]] = []
    real = POLICY_LOSSES["ppo-clip"]

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs)
        return real(*args, **kwargs)

    def sum_loss(loss_mat, mask, *, num_tokens, num_seqs, max_response_tokens):
        return (loss_mat * mask).sum()

    monkeypatch.setitem(AGGREGATIONS, "test-sum", sum_loss)  # the key is removed again when the test ends
    register_aggregation("test-sum", sum_loss, overwrite=True)
    monkeypatch.setitem(POLICY_LOSSES, "ppo-clip", spy)  # the loss update_policy looks up
    model, cfg, batch, adv = _setup(ratio_level="sequence", is_correction="token-truncate", is_cap=2.0,
                                    loss_agg="test-sum", mini_batch_size=4)
    old = batch_logprobs(model, batch, micro_batch_size=8, temperature=1.0)
    update_policy(model, torch.optim.SGD(model.parameters(), lr=0.1), batch, adv, cfg, key=(0, 0), old_logp=old)
    assert calls and all(c["ratio_level"] == "sequence" and c["agg"] == "test-sum" for c in calls)
    weights = torch.cat([c["is_weights"] for c in calls])
    # engine log-probs are -1 everywhere: the weights are min(exp(logp_learner + 1), 2) on loss tokens, 0 off them
    on_mask = weights[weights > 0]
    assert on_mask.numel() > weights.numel() // 2 and on_mask.max() <= 2.0 and (on_mask < 2.0).any()


def test_sampled_mask_keeps_environment_tokens_out_of_the_loss() -> None:
    @dataclasses.dataclass(frozen=True)
    class Trajectory:  # a multi-turn sample: 2 sampled tokens, 2 environment tokens, 1 sampled
        prompt_token_ids: tuple[int, ...] = (1, 4)
        token_ids: tuple[int, ...] = (5, 6, 9, 9, 7)
        logprobs: tuple[float, ...] = (-0.5, -0.5, 0.0, 0.0, -0.5)
        sampled_mask: tuple[int, ...] = (1, 1, 0, 0, 1)
        weights_version: int = 3

    group = Group("0", "p", (Trajectory(), Trajectory()), (1.0, -1.0), (True, False), (True, False))
    batch = build_sequence_batch([group], pad_id=0)
    assert batch.sampled_mask[0].tolist() == [True, True, False, False, True]
    assert batch.loss_mask.tolist() == [[1.0, 1.0, 0.0, 0.0, 1.0], [0.0] * 5]
    learner = torch.full((2, 5), -0.75)
    out = logprob_mismatch(batch, learner, weights_version=3)
    assert out == {"policy/logprob_mismatch_mean": 0.25, "policy/logprob_mismatch_max": 0.25}  # env tokens left out


def test_mismatch_leaves_out_samples_of_other_weights_versions() -> None:
    fresh, old = _groups(1, seed=0, version=5), _groups(1, seed=1, version=4)
    batch = build_sequence_batch(fresh + old, pad_id=0)
    learner = batch.rollout_logprobs.clone()
    learner[G:] += 3.0  # the earlier version's samples disagree a lot: they must not count
    learner[:G] += 0.5 * batch.response_mask[:G]
    out = logprob_mismatch(batch, learner, weights_version=5)
    assert out["policy/logprob_mismatch_max"] == pytest.approx(0.5)
    assert logprob_mismatch(batch, learner, weights_version=9)["policy/logprob_mismatch_mean"] is None


def test_behaviour_logprobs_make_the_clipped_ratio_the_true_importance_ratio() -> None:
    """keep_surplus=True, hand-built: a stale sample drawn by the engine with p = 0.25 per token, now p = 0.5
    under the learner. Recomputed old log-probs (the learner's) give ratio 1, nothing clipped: the sample is
    trained as if on-policy. The engine's (behaviour) log-probs give the true ratio 2, clipped at 1 + 0.28."""
    from dapo_env.learners.algo.losses import policy_loss
    from dapo_env.learners.algo.update import behaviour_logprobs

    logp = torch.log(torch.tensor([[0.5, 0.5], [0.5, 0.5]]))  # (N=2, R=2) the learner now
    engine = torch.log(torch.tensor([[0.25, 0.25], [0.5, 0.5]]))  # row 0 sampled by older weights
    mask, adv = torch.ones(2, 2), torch.tensor([1.0, 1.0])
    stale, has = torch.tensor([True, False]), torch.tensor([True, True])
    old = behaviour_logprobs(logp.clone(), engine, has, stale)
    torch.testing.assert_close(old, torch.log(torch.tensor([[0.25, 0.25], [0.5, 0.5]])))
    _, as_if_on_policy = policy_loss(logp, logp, adv, mask, clip_low=0.2, clip_high=0.28)
    _, corrected = policy_loss(logp, old, adv, mask, clip_low=0.2, clip_high=0.28)
    assert float(as_if_on_policy["clip_frac_high"]) == 0.0
    assert float(corrected["clip_frac_high"]) == 0.5  # row 0's two tokens: ratio 2 > 1.28; row 1's: 1
    # a stale sample without engine log-probs keeps the learner's; a fresh one always does
    kept = behaviour_logprobs(logp, engine, torch.tensor([False, True]), torch.tensor([True, True]))
    torch.testing.assert_close(kept[0], logp[0])
    torch.testing.assert_close(kept[1], engine[1])
