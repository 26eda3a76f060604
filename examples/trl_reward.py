"""TRL's ``GRPOTrainer`` on a dapo-env task: rows from ``to_hf_dataset``, rewards from ``trl_reward_function``.

Runs offline in seconds: a tiny random Llama and a character tokenizer (``dapo_env.learners.models.tiny``) stand
in for a real model, so the rewards of the two training steps are mostly -1; swap in
``model="Qwen/Qwen2.5-0.5B-Instruct"`` (and drop ``processing_class``) for a real run. Needs the ``bench``
extra (``pip install "dapo-env[bench]"``, which pins TRL).

What it shows:

1. ``to_hf_dataset(task, chat=True)`` gives TRL's conversational format; the ``answer`` column (and
   ``data_source``, ``reward_model``, ``problem_id``, ``extra_info``) reach reward functions as keywords.
2. ``trl_reward_function(task, reward_map=(-1, 1))`` is a picklable object TRL logs as ``<task>_reward``;
   before training, the script calls it the way ``GRPOTrainer`` does on known-right and known-wrong
   completions, so the numbers can be checked.
3. ``GRPOTrainer`` trains two steps with DAPO's loss and clip range, logging ``rewards/<task>_reward/mean``
   and the accuracy the reward function reports (``rewards/<task>_reward/accuracy``).

Run:
    python examples/trl_reward.py
    python examples/trl_reward.py --task Countdown-v0 --steps 2
"""

from __future__ import annotations

import argparse
import pickle
import tempfile
from typing import Any

from dapo_env.interop import to_hf_dataset, trl_reward_function
from dapo_env.tasks import get_task


def check_like_trl(reward: Any, rows: list[dict[str, Any]], num_generations: int, size: int) -> list[float]:
    """The call GRPOTrainer makes: each row repeated ``num_generations`` times, every column but ``prompt`` as
    a keyword; here the first completion of each group is right and the others are not."""
    problems = {p.id: p for p in get_task(rows[0]["data_source"]).load(size=size)}
    batch = [row for row in rows for _ in range(num_generations)]
    completions = [
        [{"role": "assistant", "content": f"Answer: {problems[row['problem_id']].answer}" if i % num_generations == 0
          else "Answer: none"}]
        for i, row in enumerate(batch)
    ]
    columns = {key: [row[key] for row in batch] for key in batch[0] if key != "prompt"}
    return reward(prompts=[row["prompt"] for row in batch], completions=completions,
                  completion_ids=[[0]] * len(batch), trainer_state=None, **columns)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default="Arithmetic-v0", help="a procedural task id (no data files needed)")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--num-generations", type=int, default=4)
    args = parser.parse_args(argv)

    from transformers import PrinterCallback
    from trl import GRPOConfig, GRPOTrainer

    from dapo_env.learners.models.tiny import build_tiny_model, build_tokenizer

    size = 200  # problems the procedural task generates; the dataset keeps the first 4 per step
    train = to_hf_dataset(args.task, chat=True, limit=4 * args.steps, size=size)
    reward = trl_reward_function(args.task, reward_map=(-1.0, 1.0))
    reward = pickle.loads(pickle.dumps(reward))  # TRL's async trainer ships reward functions to another process
    checked = check_like_trl(reward, [train[i] for i in range(2)], args.num_generations, size)
    print(f"reward function {reward.__name__!r} on right/wrong completions: {checked}")

    tokenizer = build_tokenizer(model_max_length=512)
    model = build_tiny_model(tokenizer, seed=0)
    with tempfile.TemporaryDirectory(prefix="trl_reward_example_") as output_dir:
        config = GRPOConfig(
            output_dir=output_dir, max_steps=args.steps, per_device_train_batch_size=args.num_generations,
            num_generations=args.num_generations, max_completion_length=16, learning_rate=1e-4,
            loss_type="dapo", epsilon=0.2, epsilon_high=0.28, beta=0.0, logging_steps=1, save_strategy="no",
            report_to="none", use_cpu=True, disable_tqdm=True, seed=0, dataloader_num_workers=0,
        )
        trainer = GRPOTrainer(model=model, reward_funcs=[reward], args=config, train_dataset=train,
                              processing_class=tokenizer)
        trainer.remove_callback(PrinterCallback)  # the lines below print what matters
        trainer.train()
    logged = [entry for entry in trainer.state.log_history if f"rewards/{reward.__name__}/mean" in entry]
    for entry in logged:
        print(f"step {entry['step']}: rewards/{reward.__name__}/mean = {entry[f'rewards/{reward.__name__}/mean']:+.3f}, "
              f"accuracy = {entry.get(f'rewards/{reward.__name__}/accuracy', float('nan')):.3f}")
    print(f"trained {trainer.state.global_step} GRPOTrainer steps")
    return {"checked": checked, "global_step": trainer.state.global_step, "logged": logged,
            "reward_name": reward.__name__}


if __name__ == "__main__":
    main()
