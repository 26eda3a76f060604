"""A plain Gymnasium loop over a dapo_env task with a scripted policy (no model needed).

The "policy" knows the answers (it peeks at the env's problem, which a real policy never can) and
answers right with probability ``--p-correct``; the loop shows what a step returns, with DAPO's
reward shaping stacked as wrappers.

Run:
    python examples/gym_loop.py --episodes 20 --p-correct 0.6
"""

from __future__ import annotations

import argparse

import gymnasium as gym
import numpy as np

import dapo_env  # noqa: F401  (registers the task ids)
from dapo_env import Completion, OverlongFilter, RewardMap, SoftOverlongPenalty


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", default="Arithmetic-v0")
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--p-correct", type=float, default=0.6)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    env = gym.make(args.env_id, max_response_tokens=64)
    env = SoftOverlongPenalty(env, max_response_tokens=64, cache_length=16)
    env = OverlongFilter(env)
    env = RewardMap(env)  # {0, 1} -> {-1, +1}
    rng = np.random.default_rng(args.seed)

    total_reward, correct, masked = 0.0, 0, 0
    prompt, info = env.reset(seed=args.seed)
    for episode in range(args.episodes):
        answer = env.unwrapped.problem.answer  # scripted policy only: a real policy sees just the prompt
        guess = answer if rng.random() < args.p_correct else f"{answer}0"
        num_tokens = int(rng.integers(8, 80))
        finish = "length" if num_tokens >= 64 else "stop"
        action = Completion(f"Working...\nAnswer: {guess}", num_tokens=min(num_tokens, 64), finish_reason=finish)
        prompt_seen = prompt
        _, reward, terminated, truncated, info = env.step(action)
        assert terminated and not truncated
        total_reward += float(reward)
        correct += info["correct"]
        masked += not info["loss_mask"]
        if episode < 3:
            print(f"prompt: {prompt_seen[:60]!r}\n  -> reward {reward:+.3f} terms {info['reward_terms']}")
        prompt, info = env.reset()
    env.close()
    summary = {"episodes": args.episodes, "accuracy": correct / args.episodes,
               "mean_reward": total_reward / args.episodes, "loss_masked": masked}
    print(summary)
    return summary


if __name__ == "__main__":
    main()
