from __future__ import annotations

import dataclasses
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from dapo_env.learners.algo.losses import POLICY_LOSSES, group_advantages
from dapo_env.learners.trainer import Trainer, train

sys.path.insert(0, str(Path(__file__).parent))
from trainer_helpers import even_length, starts_with_digit, tiny_config  # noqa: E402

torch.set_num_threads(1)

STEP_KEYS = {
    "reward/mean", "rollout/accuracy", "rollout/accuracy_before_filter", "policy/entropy", "policy/clip_frac_high",
    "policy/clip_frac_low", "response/length_mean", "response/length_max", "response/truncation_rate",
    "rollout/zero_adv_share", "rollout/rounds", "rollout/samples_generated", "perf/rollout_tokens_per_s",
    "perf/update_tokens_per_s", "time/step_s", "policy/logprob_mismatch_mean", "policy/logprob_mismatch_max",
    "optim/lr", "optim/grad_norm", "policy/drift_from_init", "eval/accuracy",
}


def test_two_steps_change_parameters_and_log_every_metric(tmp_path: Path) -> None:
    trainer = Trainer(tiny_config(tmp_path))
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    result = trainer.fit()
    changed = [n for n, p in trainer.model.named_parameters() if not torch.equal(before[n], p.detach())]
    assert len(changed) == len(before)
    steps = [m for m in result.metrics if m["step"] > 0]
    assert [m["step"] for m in steps] == [1, 2]
    for record in steps:
        assert STEP_KEYS <= set(record), STEP_KEYS - set(record)
        assert record["policy/logprob_mismatch_max"] < 1e-3  # the engine holds the learner's weights
        assert record["optim/grad_norm"] > 0
    assert steps[-1]["policy/drift_from_init"] > 0
    run = result.run_dir
    for name in ("config.json", "metrics.jsonl", "curves.png", "init_weights.pt"):
        assert (run / name).exists(), name
    from dapo_env.learners.run.run_folder import find_eval_files, read_eval_samples

    evals = find_eval_files(run)  # every evaluation's samples, as the report reads them
    assert sorted(evals) == [0, 1, 2]
    for step, accuracy in result.eval_history:
        samples = read_eval_samples(evals[step])
        assert len(samples) == 8 and sum(s.correct for s in samples) / 8 == pytest.approx(accuracy)
    assert (run / "checkpoints" / "step_000002" / "trainer_state.pt").exists()


def test_stale_engine_is_caught_by_the_push_check(tmp_path: Path) -> None:
    from dapo_env.learners.engines import HFEngine
    from dapo_env.learners.models.tiny import build_tiny_model, build_tokenizer

    class Stale(HFEngine):  # an engine whose load_weights silently does nothing
        def load_weights(self, weights) -> None:
            pass

    tok = build_tokenizer(model_max_length=256)
    model = build_tiny_model(tok, hidden_size=64, layers=1, heads=2, max_positions=256)
    with pytest.raises(RuntimeError, match="did not take effect"):
        Trainer(tiny_config(tmp_path), model=model, tokenizer=tok, engine=Stale(build_tiny_model(tok), tok))
    assert not (tmp_path / "t").exists()  # a run that failed to start leaves no folder behind


def test_mismatch_metric_compares_only_samples_of_the_current_policy(tmp_path: Path) -> None:
    trainer = Trainer(tiny_config(tmp_path, max_gen_rounds=4))
    real = trainer.engine.generate

    def shifted(prompts, n, sampling):  # engine logprobs off by 0.5 on every token
        return [[dataclasses.replace(c, logprobs=tuple(x - 0.5 for x in c.logprobs)) for c in group]
                for group in real(prompts, n, sampling)]

    trainer.engine.generate = shifted
    record = trainer.train_step()
    assert record["policy/logprob_mismatch_mean"] == pytest.approx(0.5, abs=1e-3)
    assert record["policy/logprob_mismatch_max"] == pytest.approx(0.5, abs=1e-3)


@pytest.mark.parametrize("verifier", [even_length, "trainer_helpers:starts_with_digit"])
def test_custom_verifier_reward_is_what_the_loss_sees(tmp_path: Path, verifier: object,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The custom verifier's verdict, mapped to +-1 and shaped by the overlong penalty, becomes the group
    rewards; their group advantages are exactly the advantages every policy_loss call receives."""
    from dapo_env import OverlongPenalty

    cfg = tiny_config(tmp_path, verifier=verifier, max_steps=1, checkpoint_every=0, plot_every=0, eval_every=0,
                      max_gen_rounds=4)
    trainer = Trainer(cfg)
    batches, seen = [], []
    sample = trainer.sampler.sample
    trainer.sampler.sample = lambda: batches.append(sample()) or batches[-1]
    real_loss = POLICY_LOSSES["ppo-clip"]

    def spy(logp, old_logp, advantages, mask, **kwargs):
        seen.append(advantages.detach().clone())
        return real_loss(logp, old_logp, advantages, mask, **kwargs)

    monkeypatch.setitem(POLICY_LOSSES, "ppo-clip", spy)  # the loss update_policy looks up
    record = trainer.train_step()
    groups = batches[0].groups
    assert groups, "the toy verifier should give informative groups"
    judge = even_length if callable(verifier) else starts_with_digit
    penalty = OverlongPenalty(max_response_tokens=cfg.max_response_tokens, cache_length=cfg.overlong_cache_length)
    for g in groups:
        for c, r in zip(g.completions, g.rewards):
            verdict = judge(c.text, None)
            right = verdict if isinstance(verdict, bool) else verdict.correct
            assert r == pytest.approx((1.0 if right else -1.0) + penalty(c.num_tokens))
    G = cfg.group_size
    expected = group_advantages(torch.tensor([r for g in groups for r in g.rewards]), G).view(-1, G)
    got = torch.cat(seen).view(-1, G)  # each group's G rows stay together through the shuffles

    def rows(t: torch.Tensor) -> torch.Tensor:
        return torch.tensor(sorted(map(tuple, t.tolist())))

    torch.testing.assert_close(rows(got), rows(expected))
    assert record["reward/mean"] == pytest.approx(float(np.mean([r for g in groups for r in g.rewards])))


def test_grpo_preset_runs_without_filtering(tmp_path: Path) -> None:
    cfg = tiny_config(tmp_path, max_steps=1, checkpoint_every=0, plot_every=0, eval_every=0)
    cfg = cfg.with_overrides({"preset_name": "grpo", "clip_high": 0.2, "loss_agg": "seq-mean-token-mean",
                              "dynamic_sampling": False, "overlong_penalty": False, "overlong_filter": True})
    record = train(cfg).metrics[-1]
    assert record["rollout/rounds"] == 1 and record["rollout/num_groups"] == cfg.batch_size


def test_bf16_precision_trains_with_fp32_weights_and_a_small_mismatch(tmp_path: Path) -> None:
    """precision="bf16" autocasts rollouts and the learner's forward: weights and optimizer state stay
    fp32, every parameter moves, and engine and learner (both bf16 compute) still agree closely."""
    trainer = Trainer(tiny_config(tmp_path, precision="bf16"))
    assert trainer.engine.autocast_dtype == torch.bfloat16
    seen: set[tuple[bool, torch.dtype]] = set()  # (training mode, matmul output dtype) of every forward
    proj = trainer.model.model.layers[0].self_attn.q_proj
    proj.register_forward_hook(lambda module, args, out: seen.add((module.training, out.dtype)))
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    result = trainer.fit()
    assert seen == {(True, torch.bfloat16), (False, torch.bfloat16)}  # updates and rollouts both autocast
    assert all(p.dtype == torch.float32 for p in trainer.model.parameters())
    assert all(not torch.equal(before[n], p.detach()) for n, p in trainer.model.named_parameters())
    state = trainer.optimizer.state[next(iter(trainer.model.parameters()))]
    assert state["exp_avg"].dtype == torch.float32
    for record in (m for m in result.metrics if m["step"] > 0):
        assert record["policy/logprob_mismatch_max"] < 1e-3  # same bf16 compute on both sides
        assert math.isfinite(record["loss/policy"])


def test_precision_is_validated(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="precision"):
        tiny_config(tmp_path, precision="fp16")


def test_difficulty_sampling_logs_its_beliefs_and_checkpoints_them(tmp_path: Path) -> None:
    cfg = tiny_config(tmp_path, max_steps=2, checkpoint_every=2, plot_every=0, eval_every=0)
    cfg = cfg.with_overrides({"difficulty_sampling": True})
    trainer = Trainer(cfg)
    records = [m for m in trainer.fit().metrics if m["step"] > 0]
    for record in records:
        assert 0 < record["difficulty/seen_share"] <= 1 and 0 <= record["difficulty/expected_informative"] <= 1
    beliefs = trainer.source.env.difficulty
    generated_groups = sum(r["rollout/samples_generated"] for r in records) // cfg.group_size
    assert beliefs.seen.sum() == generated_groups  # every generated group updated its problem's belief
    resumed = Trainer(cfg.with_overrides({"max_steps": 3}), resume=True)
    assert np.array_equal(resumed.source.env.difficulty.alpha, beliefs.alpha)


def test_a_registered_advantage_estimator_trains_without_touching_the_trainer(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A per-token estimator (N, R) registered from outside reaches update_policy through the config alone."""
    from dapo_env.learners.algo.losses import ADVANTAGES

    seen: list[tuple[int, ...]] = []

    def per_token(rewards, mask, *, group_size, scale_by_std, turns=None):
        adv = group_advantages(rewards, group_size, scale_by_std=scale_by_std)[:, None] * mask  # (N, R)
        seen.append(tuple(adv.shape))
        return adv

    monkeypatch.setitem(ADVANTAGES, "per-token-test", per_token)
    trainer = Trainer(tiny_config(tmp_path, max_steps=1, advantage="per-token-test", checkpoint_every=0))
    try:
        record = trainer.train_step()
    finally:
        trainer.close()
    assert seen and len(seen[0]) == 2 and (record["rollout/num_groups"] == 0 or math.isfinite(record["loss/policy"]))


@pytest.mark.parametrize("keep", [True, False])
def test_keep_surplus_discards_or_uses_the_behaviour_policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            keep: bool) -> None:
    """False: every trained sample comes from the current weights (staleness 0). True: a carried-over sample's old
    log-probs are the engine's at sampling time (its rows of old_logp equal the batch's rollout log-probs)."""
    import dapo_env.learners.trainer as trainer_module

    seen: list[tuple[Any, Any]] = []
    real = trainer_module.update_policy

    def spy(model, optimizer, batch, advantages, cfg, **kwargs):
        seen.append((batch, kwargs["old_logp"]))
        return real(model, optimizer, batch, advantages, cfg, **kwargs)

    monkeypatch.setattr(trainer_module, "update_policy", spy)
    cfg = tiny_config(tmp_path, max_steps=4, keep_surplus=keep, eval_every=0, checkpoint_every=0, plot_every=0,
                      batch_size=2, mini_batch_size=1, group_size=4, max_gen_rounds=4)
    records = [r for r in train(cfg).metrics if r["step"] > 0]
    if not keep:
        assert all(r["staleness/max"] in (0.0, None) for r in records)
        return
    stale_steps = [i for i, r in enumerate(records) if (r["staleness/max"] or 0) > 0]
    assert stale_steps, "the fixture must carry surplus groups over"
    for batch, old in seen:
        rows = batch.weights_versions < batch.weights_versions.max()  # sampled by older weights
        if rows.any():
            torch.testing.assert_close(old[rows], batch.rollout_logprobs[rows])
