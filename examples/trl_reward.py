"""The TRL reward-function adapter, called the way TRL's GRPOTrainer calls reward functions.

With TRL installed you would write::

    from trl import GRPOTrainer
    trainer = GRPOTrainer(model=..., reward_funcs=[trl_reward_function("DAPOMath-v0")], train_dataset=ds)

where ``ds`` has a ``prompt`` column and an ``answer`` column. GRPOTrainer then calls each reward
function with ``prompts=``, ``completions=`` (strings, or message lists for conversational data) and
every other dataset column as a keyword argument, one value per completion (each prompt's row is
repeated ``num_generations`` times). This script reproduces that call without needing TRL.

Run:
    python examples/trl_reward.py
"""

from __future__ import annotations

from dapo_env.interop import trl_reward_function
from dapo_env.tasks import get_task


def main() -> dict[str, list[float]]:
    task = get_task("Arithmetic-v0")
    rows = [{"prompt": task.format_prompt(p), "answer": p.answer} for p in task.load(size=3)]
    num_generations = 2

    # GRPOTrainer repeats every row num_generations times and samples one completion per copy.
    batch = [row for row in rows for _ in range(num_generations)]
    prompts = [row["prompt"] for row in batch]
    answers = [row["answer"] for row in batch]
    completions = [f"Let me compute.\nAnswer: {a}" if i % 2 == 0 else "Answer: 12345" for i, a in enumerate(answers)]

    reward_func = trl_reward_function("Arithmetic-v0", reward_map=(-1.0, 1.0))
    standard = reward_func(prompts=prompts, completions=completions, answer=answers, completion_ids=None)

    # Conversational datasets: prompts and completions are lists of {"role", "content"} messages.
    chat_prompts = [[{"role": "user", "content": p}] for p in prompts]
    chat_completions = [[{"role": "assistant", "content": c}] for c in completions]
    conversational = reward_func(prompts=chat_prompts, completions=chat_completions, answer=answers)

    print(f"reward function name (TRL logs under it): {reward_func.__name__}")
    print(f"standard:       {standard}")
    print(f"conversational: {conversational}")
    return {"standard": standard, "conversational": conversational}


if __name__ == "__main__":
    main()
