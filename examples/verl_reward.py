"""verl with a dapo-env task: Parquet files from ``to_hf_dataset`` and ``custom_reward_function`` pointing at us.

verl is not needed to run this script. It writes ``train.parquet`` / ``test.parquet`` in verl's format
(chat ``prompt``, ``data_source``, ``ability``, ``reward_model.ground_truth``, ``extra_info``), loads
``dapo_env/interop/__init__.py`` the way verl does (``spec_from_file_location`` under a made-up module name), scores
a right and a wrong response per row the way verl's naive reward manager calls ``compute_score``, and
prints the overrides for a verl run::

    python -m verl.trainer.main_ppo \\
        data.train_files=OUT/train.parquet data.val_files=OUT/test.parquet \\
        custom_reward_function.path=pkg://dapo_env.interop custom_reward_function.name=compute_score \\
        +custom_reward_function.reward_kwargs.reward_map=[-1,1] ...

``custom_reward_function.path`` may also be the file path of ``dapo_env/interop/verl.py`` (older verl). Rows
route themselves (``data_source`` is the task id, ``extra_info.task`` too), so Ray workers need no set-up;
for data written by someone else, route with ``+custom_reward_function.reward_kwargs.task=MBPP-v0`` or
``...reward_kwargs.data_source_tasks={my/source: MBPP-v0}``. verl's own data_source names
(``openai/gsm8k``, ``lighteval/MATH``, ``math_dapo``, ``aime2024``, ...) are known already.

Run:
    python examples/verl_reward.py
    python examples/verl_reward.py --task MBPP-v0 --data-files path/to/mbpp.jsonl --out verl_data
"""

from __future__ import annotations

import argparse
import importlib.util
import tempfile
from functools import partial
from pathlib import Path
from typing import Any

import dapo_env.interop
from dapo_env.interop import to_hf_dataset
from dapo_env.tasks import get_task


def load_compute_score(reward_kwargs: dict[str, Any]) -> Any:
    """What verl's ``custom_reward_function`` does: run the file as a module copy, bind ``reward_kwargs``."""
    path = Path(dapo_env.interop.__file__)
    spec = importlib.util.spec_from_file_location(f"custom_module_{hash(str(path))}", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return partial(module.compute_score, **reward_kwargs)


def right_response(task_id: str, problem: Any) -> str:
    if task_id == "MBPP-v0":
        return f"```python\n{problem.metadata['code']}\n```"
    if task_id == "Countdown-v0":
        return f"Answer: {problem.metadata['solution']}"
    return f"Let me think.\nAnswer: {problem.answer}"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default="Arithmetic-v0")
    parser.add_argument("--data-files", default=None, help="local data file for dataset tasks")
    parser.add_argument("--limit", type=int, default=8)
    parser.add_argument("--out", default=None, help="folder for the Parquet files (default: a temporary folder)")
    args = parser.parse_args(argv)

    out = Path(args.out or tempfile.mkdtemp(prefix="verl_data_"))
    out.mkdir(parents=True, exist_ok=True)
    task_kwargs = {"data_files": args.data_files} if args.data_files else {}
    task = get_task(args.task)
    splits = {"train": task.split, "test": task.split} if task.split == "test" else {"train": "train", "test": "test"}
    for name, split in splits.items():
        to_hf_dataset(args.task, split=split, chat=True, limit=args.limit, **task_kwargs).to_parquet(
            str(out / f"{name}.parquet"))

    from datasets import Dataset

    rows = Dataset.from_parquet(str(out / "train.parquet"))
    problems = {p.id: p for p in task.load(split=splits["train"], **task_kwargs)}
    compute_score = load_compute_score({"reward_map": [-1, 1]})
    scores = []
    for row in rows:
        for response in (right_response(args.task, problems[row["problem_id"]]), "I am not sure."):
            extra_info = dict(row["extra_info"], num_turns=None, rollout_reward_scores={})  # verl adds these
            scores.append(compute_score(data_source=row["data_source"], solution_str=response,
                                        ground_truth=row["reward_model"]["ground_truth"], extra_info=extra_info)["score"])
    print(f"wrote {out / 'train.parquet'} and {out / 'test.parquet'} ({len(rows)} rows each, data_source={args.task!r})")
    print(f"scores of a right and a wrong response per row, as verl's naive manager gets them: {scores}")
    print("verl overrides:")
    print(f"  data.train_files={out / 'train.parquet'} data.val_files={out / 'test.parquet'}")
    print("  custom_reward_function.path=pkg://dapo_env.interop custom_reward_function.name=compute_score")
    print("  +custom_reward_function.reward_kwargs.reward_map=[-1,1]")
    return {"out": str(out), "scores": scores}


if __name__ == "__main__":
    main()
