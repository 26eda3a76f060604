"""The learner on multi-turn episodes: GuessNumber-v0 through EpisodeGroupEnv + DynamicSampler.

What is checked: the loss covers sampled tokens only (environment tokens masked), token-mean denominators
count sampled tokens, the overlong penalty counts the tokens the model sampled in the episode, the
engine-vs-learner mismatch is taken over sampled tokens, held-out evaluation plays episodes through the one
``evaluate``, and a run trains, checkpoints and resumes exactly.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from dapo_env import EpisodeGroupEnv
from dapo_env.learners.algo.batch import build_sequence_batch, logprob_mismatch
from dapo_env.learners.cli import build_parser, config_from_args
from dapo_env.learners.config import preset
from dapo_env.learners.engines import HFEngine, SamplingParams
from dapo_env.learners.run.evaluation import evaluate
from dapo_env.learners.algo.losses import group_advantages
from dapo_env.learners.metrics import read_metrics, strip_timing
from dapo_env.learners.rollout.setup import make_group_env, resolve_task, shaping_options
from dapo_env.sampler import play_round
from dapo_env.learners.models.tiny import build_tiny_model, build_tokenizer
from dapo_env.learners.trainer import train
from dapo_env.learners.algo.update import update_policy
from dapo_env.types import Completion

sys.path.insert(0, str(Path(__file__).parent))

KNOBS = {"n": 7, "k": 3}


@pytest.fixture(scope="module")
def tok() -> Any:
    return build_tokenizer(model_max_length=512)


def rollout_groups(tok: Any, *, seed: int = 0, prompts: int = 2, group: int = 4) -> tuple[Any, list[Any]]:
    """Real episodes of the random-init tiny model (its turns are mostly not guesses, so replies are long)."""
    model = build_tiny_model(tok, max_positions=512, seed=seed)
    engine = HFEngine(model, tok)
    calls = iter(range(100))
    with EpisodeGroupEnv("GuessNumber-v0", num_envs=prompts * group, group_size=group, tokenizer=tok,
                         max_episode_tokens=150, **KNOBS) as env:
        env.reset(seed=seed)
        groups = env.rollout(lambda reqs: engine.generate_turns(
            reqs, SamplingParams(max_response_tokens=6, seed=next(calls)))).groups
    return model, groups


def test_loss_mask_covers_exactly_the_sampled_tokens(tok: Any) -> None:
    _, groups = rollout_groups(tok)
    batch = build_sequence_batch(groups, pad_id=tok.pad_token_id)
    trajectories = [t for g in groups for t in g.completions]
    assert any(t.num_turns > 1 for t in trajectories)  # environment tokens are in the sequences
    for row, t in enumerate(trajectories):
        n = len(t.token_ids)
        assert batch.response_ids[row, :n].tolist() == list(t.token_ids)
        assert batch.loss_mask[row, :n].tolist() == [float(m) for m in t.sampled_mask]
        assert not batch.loss_mask[row, n:].any()
        assert int(batch.loss_mask[row].sum()) == t.num_tokens  # sampled tokens, not the replies' tokens
    assert int(batch.loss_mask.sum()) < int(batch.response_mask.sum())


def test_token_mean_loss_divides_by_sampled_tokens(tok: Any) -> None:
    # On-policy (ratio 1) the token-mean loss is -sum(A_i * mask) / #sampled tokens: hand-computed here.
    model, groups = rollout_groups(tok, seed=1)
    batch = build_sequence_batch(groups, pad_id=tok.pad_token_id)
    rewards = torch.tensor([float(i % 3 == 0) for i in range(batch.num_rows)])
    advantages = group_advantages(rewards, 4)
    cfg = preset("guess", group_size=4, batch_size=2, mini_batch_size=2, micro_batch_size=3, lr=1e-9)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    result = update_policy(model, optimizer, batch, advantages, cfg, key=(0, 0))
    mask = batch.loss_mask
    expected = -float((advantages[:, None] * mask).sum() / mask.sum())
    assert result.metrics["loss"] == pytest.approx(expected, abs=1e-5)
    # counting environment tokens too would give another loss
    assert expected != pytest.approx(-float((advantages[:, None] * batch.response_mask).sum() / batch.response_mask.sum()))


def test_mismatch_is_over_sampled_tokens_only(tok: Any) -> None:
    model, groups = rollout_groups(tok, seed=2)
    batch = build_sequence_batch(groups, pad_id=tok.pad_token_id)
    from dapo_env.learners.algo.batch import batch_logprobs

    learner = batch_logprobs(model, batch, micro_batch_size=8, temperature=1.0)
    version = groups[0].completions[0].weights_version
    out = logprob_mismatch(batch, learner, version)
    assert out["policy/logprob_mismatch_max"] < 1e-4  # KV-reused turns: the learner's full forward agrees
    env_tokens = batch.response_mask & ~batch.sampled_mask
    assert (learner[env_tokens] - batch.rollout_logprobs[env_tokens]).abs().max() > 0.1  # env log-probs are 0.0


def test_overlong_penalty_counts_the_models_tokens_in_the_episode(tok: Any) -> None:
    # Every turn samples 10 tokens (no guess), so 3 turns make 30 sampled tokens; replies add ~100 more that the
    # penalty must not count. L_max = max_episode_tokens = 200, cache 25: penalty = (200 - 25 - 30) / 25 > 0 -> 0.
    cfg = preset("guess", task_kwargs=KNOBS, batch_size=1, group_size=2, mini_batch_size=1, max_episode_tokens=200,
                 overlong_cache_length=25, max_response_tokens=12)  # the cache may exceed one turn's budget
    assert shaping_options(cfg, episodes=True)["overlong_penalty"]["max_response_tokens"] == 200
    cfg = cfg.with_overrides({"max_episode_tokens": 400, "overlong_cache_length": 385})  # ramp starts at 15 tokens

    def generate(requests: list[Any]) -> list[Completion]:
        ids = tuple(tok.encode("xxxxxxxxx", add_special_tokens=False)) + (tok.eos_token_id,)
        return [Completion("xxxxxxxxx", token_ids=ids, logprobs=(-1.0,) * 10) for _ in requests]

    env = make_group_env(cfg, resolve_task(cfg), tok)
    groups = play_round(env, generate, seed=0).groups
    env.close()
    info = groups[0].infos[0]
    t = groups[0].completions[0]
    assert t.num_tokens == 30 and len(t.token_ids) > 60
    assert info["reward_terms"]["overlong_penalty"] == pytest.approx(-(30 - 15) / 385)


def test_overlong_penalty_needs_the_episode_budget() -> None:
    with pytest.raises(ValueError, match="max_episode_tokens=N.*overlong_penalty=false"):
        preset("guess", max_episode_tokens=None)
    assert preset("guess", max_episode_tokens=None, overlong_penalty=False).max_episode_tokens is None


class ScriptedEngine:
    """An engine that plays a fixed strategy from the replies in each request's text (for evaluate)."""

    def __init__(self, tok: Any, bisect: bool) -> None:
        self.tok, self.bisect = tok, bisect

    def generate_turns(self, requests: list[Any], sampling: SamplingParams) -> list[Completion]:
        out = []
        for r in requests:
            low, high = 1, 7
            guess = 4
            for reply in re.findall(r"user: (higher|lower)", r.text):
                low, high = (guess + 1, high) if reply == "higher" else (low, guess - 1)
                guess = (low + high) // 2
            text = f"Answer: {guess if self.bisect else 4 + r.turn}"
            ids = tuple(self.tok.encode(text, add_special_tokens=False)) + (self.tok.eos_token_id,)
            out.append(Completion(text, token_ids=ids, logprobs=(0.0,) * len(ids), finish_reason="stop"))
        return out

    def release(self) -> None:  # keeps nothing between turns
        pass


def test_evaluate_plays_episodes(tok: Any) -> None:
    task = resolve_task(preset("guess"))
    problems = task.load(split="test", **KNOBS)[:60]
    bisect = evaluate(ScriptedEngine(tok, True), task, problems, max_response_tokens=12, tokenizer=tok,
                      max_episode_tokens=128)
    assert bisect.accuracy == 1.0
    assert all(r.tokens == 10 * (r.completion.count("Answer:")) for r in bisect.records)
    ignoring = evaluate(ScriptedEngine(tok, False), task, problems, max_response_tokens=12, tokenizer=tok)
    assert {r.correct for r in ignoring.records} == {True, False}  # guesses 4, 5, 6 whatever the replies:
    for record, problem in zip(ignoring.records, problems):
        assert record.correct == (int(problem.answer) in (4, 5, 6))


def guess_config(out: Path, **overrides: Any) -> Any:
    base = dict(max_steps=2, batch_size=2, group_size=4, mini_batch_size=1, micro_batch_size=8, eval_size=6,
                eval_every=1, warmstart_steps=2, warmstart_batch_size=4, tiny_hidden_size=64, tiny_heads=2,
                tiny_layers=1, checkpoint_every=1, plot_every=0, out_dir=str(out), name="g", progress=False)
    base.update(overrides)
    return preset("guess", **base)


def test_train_on_episodes_checkpoints_and_resumes_exactly(tmp_path: Path) -> None:
    full = train(guess_config(tmp_path / "full", max_steps=3))
    steps = [r for r in full.metrics if r["step"] > 0]
    assert all(r["episode/turns_mean"] >= 1.0 for r in steps)
    assert all(r["policy/logprob_mismatch_max"] is None or r["policy/logprob_mismatch_max"] < 1e-3 for r in steps)
    assert [r["step"] for r in full.metrics if "eval/accuracy" in r] == [0, 1, 2, 3]
    record = json.loads((full.run_dir / "eval" / "step_000003.jsonl").read_text().splitlines()[0])
    assert record["prompt"] == "<bos>user: Guess 1-3.\nassistant: "  # played through the chat template
    # Stop after 2 steps, then resume for the third: the same stream (surplus episodes included).
    train(guess_config(tmp_path / "split", max_steps=2))
    resumed = train(guess_config(tmp_path / "split", max_steps=3), resume=True)
    assert strip_timing(resumed.metrics) == strip_timing(full.metrics)
    assert strip_timing(read_metrics(resumed.run_dir / "metrics.jsonl")) == strip_timing(full.metrics)


def test_cli_train_on_a_multi_turn_task_uses_the_guess_scale() -> None:
    cfg, resume = config_from_args(build_parser().parse_args(["train", "--task", "GuessNumber-v0"]))
    assert not resume and cfg.preset_name == "guess" and cfg.task == "GuessNumber-v0"
    assert cfg.max_episode_tokens is not None and cfg.task_kwargs == {"n": 3, "k": 2}
    cfg, _ = config_from_args(build_parser().parse_args(["train", "--preset", "guess"]))
    assert cfg.task == "GuessNumber-v0" and cfg.tiny_max_positions == 256
    cfg, _ = config_from_args(build_parser().parse_args(["train"]))
    assert cfg.preset_name == "tiny" and cfg.task == "Largest-v0"


def test_warmstart_response_is_a_template_over_the_answer() -> None:
    with pytest.raises(ValueError, match="warmstart_response"):
        preset("guess", warmstart_response="Answer: 4")


def test_a_multi_turn_run_that_cannot_fit_says_how_to_fix(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"pass --max-episode-tokens \d+ or --tiny-max-positions \d+"):
        train(guess_config(tmp_path, max_episode_tokens=240, overlong_cache_length=4))
