"""dapo_env.interop, called exactly the way its clients call it.

The harness functions below re-enact, from reading their source, how TRL 1.16's ``GRPOTrainer`` and async
rollout worker call reward functions, and how verl's reward managers (naive, dapo, batch, prime, the reward
loop) load and call ``compute_score``. Rows always come from ``to_hf_dataset``, for math, code and
procedural tasks; the real GRPOTrainer run is in ``test_interop_trl.py``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import pickle
import subprocess
import sys
import threading
import warnings
from collections.abc import Callable, Mapping
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path
from types import MappingProxyType
from typing import Any

import cloudpickle
import datasets
import pytest
from env_helpers import fixture_kwargs

from dapo_env.interop import (
    VERL_DATA_SOURCES,
    InteropWarning,
    MissingReferenceColumn,
    TaskReward,
    apps_tests,
    completion_text,
    compute_score,
    register_data_source,
    to_hf_dataset,
    trl_reward_function,
    verl_compute_score,
)
from dapo_env.tasks import get_task, list_tasks
from dapo_env.types import CodeTests, InvalidReference

ROOT = Path(__file__).resolve().parents[2]
INTEROP_FILE = ROOT / "dapo_env" / "interop" / "__init__.py"
VERL_FILE = ROOT / "dapo_env" / "interop" / "verl.py"


# --- right and wrong responses for a row ---------------------------------------------------------------
def right_response(task_id: str, problem: Any) -> str:
    """A response the task's verifier accepts, from the problem's own data (no verifier internals)."""
    if task_id in ("MBPP-v0", "MBPPFeedback-v0"):
        return f"Here you go:\n```python\n{problem.metadata['code']}\n```"
    if task_id == "GSM8KTool-v0":  # its final answer is a box
        return f"Let me think step by step.\n\\boxed{{{problem.answer}}}"
    if task_id == "HumanEval-v0":
        return f"```python\n{problem.answer.prefix}{problem.metadata['canonical_solution']}```"
    if task_id == "Countdown-v0":
        return f"Let me try.\nAnswer: {problem.metadata['solution']}"
    return f"Let me think step by step.\nAnswer: {problem.answer}"


def wrong_response(task_id: str) -> str:
    if task_id in ("MBPP-v0", "MBPPFeedback-v0", "HumanEval-v0"):
        return "```python\ndef f(*args):\n    return None\n```"
    return "I think it is hard.\nAnswer: 123456789"


def rows_and_problems(task_id: str, tmp_path: Path, **kwargs: Any) -> tuple[datasets.Dataset, dict[str, Any]]:
    task_kwargs = fixture_kwargs(task_id, tmp_path)
    if task_id in ("Countdown-v0", "Sort-v0", "Largest-v0", "Arithmetic-v0"):
        task_kwargs = {"size": 6}
    ds = to_hf_dataset(task_id, **task_kwargs, **kwargs)
    problems = {p.id: p for p in get_task(task_id).load(**task_kwargs)}
    return ds, problems


# --- TRL 1.16, as GRPOTrainer._calculate_rewards and the async rollout worker call reward functions -----
def call_like_grpo_trainer(reward_func: Any, rows: list[dict[str, Any]], completions: list[Any],
                           num_generations: int) -> list[float]:
    """Each row repeated num_generations times; every column but prompt/completion/completion_ids becomes a
    keyword with one value per completion, plus trainer_state/log_extra/log_metric; None rewards become NaN."""
    inputs = [row for row in rows for _ in range(num_generations)]
    assert len(inputs) == len(completions)
    prompts = [row["prompt"] for row in inputs]
    keys = [key for key in inputs[0] if key not in ("prompt", "completion", "completion_ids")]
    reward_kwargs: dict[str, Any] = {key: [row[key] for row in inputs] for key in keys}
    metrics: dict[str, list[float]] = {}
    reward_kwargs["trainer_state"] = object()  # a transformers TrainerState in TRL
    reward_kwargs["log_extra"] = lambda column, values: None
    reward_kwargs["log_metric"] = lambda name, value: metrics.setdefault(name, []).append(value)
    completion_ids = [[7] * (1 + i % 3) for i in range(len(completions))]
    is_async = asyncio.iscoroutinefunction(reward_func) or asyncio.iscoroutinefunction(type(reward_func).__call__)
    if is_async:
        output = asyncio.run(reward_func(prompts=prompts, completions=completions, completion_ids=completion_ids,
                                         **reward_kwargs))
    else:
        output = reward_func(prompts=prompts, completions=completions, completion_ids=completion_ids, **reward_kwargs)
    output = [r if r is not None else float("nan") for r in output]
    assert len(output) == len(prompts), "TRL raises when a reward function returns the wrong number of rewards"
    call_like_grpo_trainer.metrics = metrics  # type: ignore[attr-defined]
    return [float(r) for r in output]


def call_like_async_rollout_worker(reward_func: Any, row: dict[str, Any], completions: list[Any]) -> list[float]:
    """TRL's async GRPO worker: one group; row values repeated per generation (no trainer_state); a sync reward
    function runs in a thread (asyncio.to_thread)."""
    n = len(completions)
    reward_kwargs = {key: [row[key]] * n for key in row if key not in {"prompt", "completion", "completion_ids"}}
    kwargs = dict(completions=completions, prompts=[row["prompt"]] * n, completion_ids=[[1, 2]] * n, **reward_kwargs)

    async def score() -> list[float]:
        return await asyncio.to_thread(reward_func, **kwargs)

    return asyncio.run(score())


def trl_name(func: Any) -> str:
    """How TRL names a reward function in its logs (functools.partial unwrapped, else __name__, else the class)."""
    while isinstance(func, partial):
        func = func.func
    return getattr(func, "__name__", type(func).__name__)


# --- verl: loading compute_score (custom_reward_function) and the reward managers' calls -----------------
def load_like_verl(path: Path, name: str = "compute_score", reward_kwargs: Mapping[str, Any] | None = None) -> Any:
    """verl's get_custom_reward_fn: the file is executed as a module copy under a made-up name (not put in
    sys.modules), the object fetched by name, and reward_kwargs bound with a partial."""
    spec = importlib.util.spec_from_file_location(f"custom_module_{hash(str(path.resolve()))}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    raw_fn = getattr(module, name)
    return partial(merge_reward_kwargs, raw_fn, dict(reward_kwargs or {}))


def merge_reward_kwargs(raw_fn: Callable[..., Any], extra: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
    """verl's _call_with_kwargs: config reward_kwargs override call-time keywords."""
    return raw_fn(*args, **{**kwargs, **extra})


def verl_row_item(row: Mapping[str, Any]) -> dict[str, Any]:
    """What DataProto.non_tensor_batch holds per sample once verl read the parquet file."""
    return {"data_source": row["data_source"], "reward_model": dict(row["reward_model"]),
            "extra_info": dict(row["extra_info"])}


def naive_manager(compute: Any, items: list[dict[str, Any]], responses: list[str]) -> tuple[list[float], dict]:
    """NaiveRewardManager: per sample, keywords only; extra_info gains num_turns and rollout_reward_scores; a dict
    result's keys are appended to reward_extra_info (so every sample must return the same keys)."""
    rewards, extra = [], {}
    for item, response in zip(items, responses):
        extra_info = item.get("extra_info", {})
        extra_info["num_turns"] = None
        extra_info["rollout_reward_scores"] = {}
        score = compute(data_source=item["data_source"], solution_str=response,
                        ground_truth=item["reward_model"]["ground_truth"], extra_info=extra_info)
        if isinstance(score, dict):
            for key, value in score.items():
                extra.setdefault(key, []).append(value)
            score = score["score"]
        rewards.append(float(score))
    assert all(len(values) == len(items) for values in extra.values()), "ragged reward_extra_info breaks verl"
    return rewards, extra


def dapo_manager(compute: Any, items: list[dict[str, Any]], responses: list[str], eos: str = "</s>") -> list[float]:
    """DAPORewardManager: strips a trailing EOS string, then like naive; a plain number is also logged as acc."""
    rewards = []
    for item, response in zip(items, responses):
        if response.endswith(eos):
            response = response[: -len(eos)]
        extra_info = item.get("extra_info", {})
        extra_info["rollout_reward_scores"] = {}
        result = compute(data_source=item["data_source"], solution_str=response,
                         ground_truth=item["reward_model"]["ground_truth"], extra_info=extra_info)
        rewards.append(float(result["score"] if isinstance(result, dict) else result))
    return rewards


def batch_manager(compute: Any, items: list[dict[str, Any]], responses: list[str]) -> list[float]:
    """BatchRewardManager: one call with plural keywords (its own reward_kwargs are added by the caller)."""
    extras = [item.get("extra_info", {}) for item in items]
    for extra_info in extras:
        extra_info["rollout_reward_scores"] = {}
    scores = compute(data_sources=[item["data_source"] for item in items], solution_strs=responses,
                     ground_truths=[item["reward_model"].get("ground_truth", None) for item in items],
                     extra_infos=extras)
    return [float(s["score"] if isinstance(s, dict) else s) for s in scores]


def prime_manager(compute: Any, items: list[dict[str, Any]], responses: list[str]) -> list[float]:
    """PrimeRewardManager: positional (data_source, solution, ground_truth, extra_info) in a process pool (the
    function is pickled); a failure or anything not a number is read as float(result[0]), failures score 0."""
    scores = []
    with ProcessPoolExecutor(max_workers=2) as executor:
        futures = [executor.submit(partial(compute, item["data_source"], response, item["reward_model"]["ground_truth"],
                                           item.get("extra_info")))
                   for item, response in zip(items, responses)]
        for future in futures:
            result = future.result(timeout=120)
            scores.append(float(result) if isinstance(result, int | float | bool) else float(result[0]))
    return scores


def reward_loop_manager(compute: Any, items: list[dict[str, Any]], responses: list[str]) -> list[float]:
    """The reward loop's naive manager: a sync compute_score runs in the event loop's default thread pool."""
    async def one(item: dict[str, Any], response: str) -> float:
        loop = asyncio.get_running_loop()
        extra_info = item.get("extra_info", {})
        extra_info["num_turns"] = None
        extra_info["rollout_reward_scores"] = {}
        result = await loop.run_in_executor(None, lambda: compute(
            data_source=item["data_source"], solution_str=response, ground_truth=item["reward_model"]["ground_truth"],
            extra_info=extra_info))
        return float(result["score"] if isinstance(result, dict) else result)

    async def run() -> list[float]:
        return list(await asyncio.gather(*(one(i, r) for i, r in zip(items, responses))))

    return asyncio.run(run())


def run_in_fresh_interpreter(code: str, blob: bytes) -> Any:
    """A pickled object handed to a new Python process (a spawned TRL rollout worker, a Ray worker)."""
    result = subprocess.run([sys.executable, "-c", code], input=blob, capture_output=True, cwd=ROOT, timeout=300,
                            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HF_DATASETS_OFFLINE": "1"})
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    return json.loads(result.stdout.decode().strip().splitlines()[-1])


# --- to_hf_dataset ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("task_id", list_tasks())
def test_rows_of_every_task_score_through_trl_and_verl(task_id: str, tmp_path: Path) -> None:
    ds, problems = rows_and_problems(task_id, tmp_path, chat=task_id.startswith("M"))
    assert set(ds.column_names) == {"prompt", "answer", "data_source", "ability", "reward_model", "problem_id",
                                    "extra_info"}
    rows = [ds[i] for i in range(len(ds))]
    for row in rows:
        assert isinstance(row["answer"], str) and row["reward_model"] == {"style": "rule", "ground_truth": row["answer"]}
        assert row["data_source"] == task_id and row["extra_info"]["task"] == task_id
        assert row["extra_info"]["problem_id"] == row["problem_id"]
    rights = [right_response(task_id, problems[row["problem_id"]]) for row in rows]
    wrong = wrong_response(task_id)
    completions = [c for r in rights for c in (r, wrong)]
    reward = trl_reward_function(task_id)
    assert call_like_grpo_trainer(reward, rows, completions, num_generations=2) == [1.0, 0.0] * len(rows)
    items = [verl_row_item(row) for row in rows]
    assert naive_manager(compute_score, items, rights)[0] == [1.0] * len(rows)
    assert naive_manager(compute_score, [verl_row_item(r) for r in rows], [wrong] * len(rows))[0] == [0.0] * len(rows)


def test_rows_survive_map_parquet_json_and_concatenation(tmp_path: Path) -> None:
    mbpp, problems = rows_and_problems("MBPP-v0", tmp_path, chat=True, system_prompt="You write Python.")
    math_ds, math_problems = rows_and_problems("MATH500-v0", tmp_path, chat=True, system_prompt="You do maths.")
    mbpp.to_parquet(str(tmp_path / "mbpp.parquet"))
    mbpp.to_json(str(tmp_path / "mbpp.jsonl"))
    copies = [datasets.Dataset.from_parquet(str(tmp_path / "mbpp.parquet")),
              datasets.Dataset.from_json(str(tmp_path / "mbpp.jsonl")),
              mbpp.map(lambda row: {"prompt": row["prompt"]})]
    for copy in copies:
        assert [copy[i] for i in range(len(copy))] == [mbpp[i] for i in range(len(mbpp))]
    assert mbpp[0]["prompt"][0] == {"role": "system", "content": "You write Python."}
    assert json.loads(mbpp[0]["answer"])["tests"] == list(problems[mbpp[0]["problem_id"]].answer.tests)
    mixed = datasets.concatenate_datasets([copies[0], math_ds])  # every task's columns have the same types
    rows = [mixed[i] for i in range(len(mixed))]
    everything = {**problems, **math_problems}
    rights = [right_response(r["data_source"], everything[r["problem_id"]]) for r in rows]
    routed = trl_reward_function()  # no task: each row is routed by its data_source
    assert call_like_grpo_trainer(routed, rows, rights, num_generations=1) == [1.0] * len(rows)
    assert batch_manager(compute_score, [verl_row_item(r) for r in rows], rights) == [1.0] * len(rows)


def test_to_hf_dataset_options_and_errors(tmp_path: Path) -> None:
    ds = to_hf_dataset("Arithmetic-v0", split="test", limit=3, size=40)
    assert len(ds) == 3 and isinstance(ds[0]["prompt"], str) and ds[0]["extra_info"]["split"] == "test"
    templated = to_hf_dataset("Arithmetic-v0", limit=1, prompt_template="Q: {question} A:")
    assert templated[0]["prompt"].startswith("Q: Compute ")
    assert to_hf_dataset("Countdown-v0", limit=1)[0]["ability"] == "reasoning"
    assert to_hf_dataset("MBPP-v0", limit=1, **fixture_kwargs("MBPP-v0", tmp_path))[0]["ability"] == "code"
    with pytest.raises(ValueError, match="chat=True"):
        to_hf_dataset("Arithmetic-v0", system_prompt="be brief")
    with pytest.raises(ValueError, match="limit"):
        to_hf_dataset("Arithmetic-v0", limit=0)
    with pytest.raises(KeyError, match="register_task"):
        to_hf_dataset("NoSuchTask-v0")


def test_shared_data_rows_score_their_reference_solutions(shared_data: Path) -> None:
    for task_id, path in (("MBPP-v0", "mbpp/mbpp.jsonl"), ("GSM8K-v0", "gsm8k/gsm8k_test.jsonl")):
        ds = to_hf_dataset(task_id, data_files=str(shared_data / path), limit=6, chat=True)
        problems = {p.id: p for p in get_task(task_id).load(data_files=str(shared_data / path))}
        rows = [ds[i] for i in range(len(ds))]
        rights = [right_response(task_id, problems[r["problem_id"]]) for r in rows]
        assert call_like_grpo_trainer(trl_reward_function(task_id), rows, rights, 1) == [1.0] * 6
        assert dapo_manager(compute_score, [verl_row_item(r) for r in rows], [r + "</s>" for r in rights]) == [1.0] * 6


# --- TRL ---------------------------------------------------------------------------------------------------
def test_trl_conversational_completions_names_and_metrics(tmp_path: Path) -> None:
    ds, problems = rows_and_problems("GSM8K-v0", tmp_path, chat=True)
    rows = [ds[i] for i in range(len(ds))]
    gold = [problems[r["problem_id"]].answer for r in rows]
    completions = []
    for g in gold:
        completions.append([{"role": "assistant", "content": f"So the total is \\boxed{{{g}}}."}])
        completions.append([{"role": "assistant", "content": None, "tool_calls": [{"name": "calc"}]},
                            {"role": "tool", "content": g},
                            {"role": "assistant", "content": [{"type": "text", "text": f"Answer: {g}"}]}])
        completions.append([{"role": "assistant", "content": "I give up."}])
    reward = trl_reward_function("GSM8K-v0", reward_map=(-1.0, 1.0))
    assert trl_name(reward) == "GSM8K_reward"
    assert call_like_grpo_trainer(reward, rows, completions, num_generations=3) == [1.0, 1.0, -1.0] * len(rows)
    assert call_like_grpo_trainer.metrics == {"rewards/GSM8K_reward/accuracy": [2 / 3],  # type: ignore[attr-defined]
                                              "rewards/GSM8K_reward/unscorable": [0.0]}
    assert completion_text({"role": "assistant", "content": "c"}) == "c" and completion_text([]) == ""
    with pytest.raises(TypeError, match="completion"):
        completion_text(3)


def test_trl_reward_pickles_and_scores_in_a_spawned_process(tmp_path: Path) -> None:
    ds, problems = rows_and_problems("MBPP-v0", tmp_path)
    row = ds[0]
    right = right_response("MBPP-v0", problems[row["problem_id"]])
    reward = trl_reward_function("MBPP-v0", workers=1)
    assert call_like_async_rollout_worker(reward, row, [right, "no code"]) == [1.0, 0.0]  # pool started
    for restored in (pickle.loads(pickle.dumps(reward)), cloudpickle.loads(cloudpickle.dumps(reward))):
        assert isinstance(restored, TaskReward) and restored.__name__ == "MBPP_reward"
        assert call_like_async_rollout_worker(restored, row, [right]) == [1.0]
        restored.close()
    reward.close()
    # TRL's async trainer pickles reward functions into a spawned rollout process
    code = ("import json, pickle, sys\nreward, kwargs = pickle.loads(sys.stdin.buffer.read())\n"
            "print(json.dumps(reward(**kwargs)))")
    kwargs = {"prompts": [row["prompt"]] * 2, "completions": [right, "x"], "completion_ids": [[1], [2]],
              **{k: [row[k]] * 2 for k in row if k != "prompt"}}
    assert run_in_fresh_interpreter(code, pickle.dumps((reward, kwargs))) == [1.0, 0.0]


def test_trl_reward_is_safe_from_many_threads(tmp_path: Path) -> None:
    ds, problems = rows_and_problems("MBPP-v0", tmp_path)
    rows = [ds[i] for i in range(len(ds))]
    reward = trl_reward_function("MBPP-v0", workers=2)
    outputs: list[list[float]] = []

    def work(row: dict[str, Any]) -> None:
        right = right_response("MBPP-v0", problems[row["problem_id"]])
        outputs.append(call_like_async_rollout_worker(reward, row, [right, "```python\nraise SystemExit\n```"]))

    threads = [threading.Thread(target=work, args=(rows[i % len(rows)],)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    reward.close()
    assert outputs == [[1.0, 0.0]] * 4


def test_trl_missing_and_wrong_references_raise_clearly(tmp_path: Path) -> None:
    reward = trl_reward_function("Arithmetic-v0")
    with pytest.raises(MissingReferenceColumn, match=r"answer_column=") as caught:
        reward(prompts=["p"], completions=["Answer: 1"], completion_ids=[[1]], solution=["1"], trainer_state=None)
    assert "'solution'" in str(caught.value) and "trainer_state" not in str(caught.value)
    assert isinstance(caught.value, KeyError) and isinstance(caught.value, ValueError)
    renamed = trl_reward_function("Arithmetic-v0", answer_column="solution")
    assert renamed(prompts=["p"], completions=["Answer: 1"], solution=["1"]) == [1.0]
    verl_style = reward(prompts=["p"], completions=["Answer: 2"], reward_model=[{"style": "rule", "ground_truth": "2"}])
    assert verl_style == [1.0]  # verl-format rows: reward_model.ground_truth when there is no answer column
    with pytest.raises(ValueError, match="2 completions but 1"):
        reward(prompts=["p", "q"], completions=["a", "b"], answer=["1"])
    with pytest.raises(InvalidReference, match="reference 0"):
        trl_reward_function("Arithmetic-v0", strict_references=True)(
            prompts=["p"], completions=["Answer: 1"], answer=[{"gold": "1"}])
    with pytest.warns(InteropWarning, match=r"unscorable \(invalid_reference\): reference 1"):
        assert reward(prompts=["p", "q"], completions=["Answer: 1", "Answer: 1"], answer=["1", {"gold": "1"}]) == [
            1.0, None]  # TRL's unscorable row
    assert reward.unscorable == {"invalid_reference": 1}
    code = trl_reward_function("MBPP-v0", strict_references=True)
    for bad in (17, "{not json", '{"tests": "assert f()"}', {"inputs": [1]}):
        with pytest.raises(InvalidReference):
            code(prompts=["p"], completions=["```python\ndef f(): return 1\n```"], answer=[bad])
    with pytest.raises(ValueError, match="workers"):
        trl_reward_function("MBPP-v0", workers=-1)


def test_trl_reference_forms_users_try(tmp_path: Path) -> None:
    solution = "```python\ndef add(a, b):\n    return a + b\n```"
    tests = CodeTests(tests=("assert add(1, 2) == 3", "assert add(2, 2) == 4"), entry_point="add")
    forms = [tests, tests.to_dict(), json.dumps(tests.to_dict()), list(tests.tests), "\n".join(tests.tests)]
    code = trl_reward_function("MBPP-v0")
    assert code(prompts=["p"] * len(forms), completions=[solution] * len(forms), answer=forms) == [1.0] * len(forms)
    math = trl_reward_function("MATH500-v0")
    golds = ["34", 34, 34.0, {"ground_truth": "34"}]
    assert math(prompts=["p"] * 4, completions=["\\boxed{34}"] * 4, answer=golds) == [1.0] * 4


# --- verl ----------------------------------------------------------------------------------------------------
VERL_NAMES = [  # (data_source as verl's preprocessors / default_compute_score write it, response, ground truth)
    ("openai/gsm8k", "She has 5 + 7 = 12 apples.\n#### 12", "12"),
    ("lighteval/MATH", "Hence the value is $\\boxed{\\frac{3}{4}}$.", "\\frac{3}{4}"),
    ("DigitalLearningGmbH/MATH-lighteval", "The answer is $\\boxed{2\\sqrt{2}}$", "2\\sqrt{2}"),
    ("HuggingFaceH4/MATH-500", "\\boxed{(1, 2)}", "(1,2)"),
    ("math_dapo", "Step 1 ...\nAnswer: 70", "70"),
    ("math", "Answer: 204", "204"),
    ("aime2024", "Thus m+n = 25.\nAnswer: 25", "25"),
    ("aime_2025", "\\boxed{70}", "70"),
    ("numina_olympiads", "so $x = \\boxed{-3}$", "-3"),
    ("hiyouga/geometry3k", "\\boxed{60}", "60"),
]


@pytest.mark.parametrize(("data_source", "response", "truth"), VERL_NAMES)
def test_verl_data_source_names(data_source: str, response: str, truth: str) -> None:
    with warnings.catch_warnings():
        # a name verl writes is known: no fallback warning (a one-time unscorable note under load is not one)
        warnings.filterwarnings("error", message=".*unknown data_source")
        right = compute_score(data_source, response, truth, {"index": 0})
        wrong = compute_score(data_source, response, "9999")
    assert right == {"score": 1.0, "acc": True, "pred": right["pred"]} and right["pred"]
    assert wrong["score"] == 0.0 and wrong["acc"] is False and set(wrong) == {"score", "acc", "pred"}


def test_verl_unknown_data_source_falls_back_to_auto_math_with_one_warning() -> None:
    name = "my_lab/unknown-source-for-the-warning-test"
    with pytest.warns(InteropWarning, match="unknown data_source") as caught:
        assert compute_score(name, "\\boxed{5}", "5")["acc"] is True
        assert compute_score(name, "Answer: 6", "5")["acc"] is False
    assert len([w for w in caught if "unknown data_source" in str(w.message)]) == 1
    assert issubclass(InteropWarning, UserWarning) and issubclass(InteropWarning, RuntimeWarning)
    rows = [{"prompt": "p", "answer": "5", "data_source": name + "/trl", "extra_info": {"index": 0}}] * 2
    with pytest.warns(InteropWarning, match="unknown data_source"):  # TRL's routing function falls back the same way
        assert call_like_grpo_trainer(trl_reward_function(), rows, ["\\boxed{5}", "no"], 1) == [1.0, 0.0]


@pytest.mark.parametrize("path", [INTEROP_FILE, VERL_FILE], ids=["package", "verl-module"])
def test_verl_managers_with_the_file_loaded_as_a_module_copy(path: Path, tmp_path: Path) -> None:
    math_ds, math_problems = rows_and_problems("GSM8K-v0", tmp_path, chat=True)
    code_ds, code_problems = rows_and_problems("MBPP-v0", tmp_path, chat=True)
    rows = [math_ds[i] for i in range(len(math_ds))] + [code_ds[i] for i in range(len(code_ds))]
    problems = {**math_problems, **code_problems}
    rights = [right_response(r["data_source"], problems[r["problem_id"]]) for r in rows]
    wrongs = [wrong_response(r["data_source"]) for r in rows]
    compute = load_like_verl(path, reward_kwargs={"reward_map": [-1, 1]})
    fresh = lambda: [verl_row_item(r) for r in rows]  # noqa: E731  (managers mutate extra_info)
    rewards, extra = naive_manager(compute, fresh(), rights)
    assert rewards == [1.0] * len(rows) and extra["acc"] == [True] * len(rows)
    assert dapo_manager(compute, fresh(), [w + "</s>" for w in wrongs]) == [-1.0] * len(rows)
    assert batch_manager(compute, fresh(), rights) == [1.0] * len(rows)
    assert prime_manager(compute, fresh(), rights[:1] + wrongs[1:]) == [1.0] + [-1.0] * (len(rows) - 1)
    assert reward_loop_manager(compute, fresh(), rights) == [1.0] * len(rows)
    # the copy hands out the installed module's objects: picklable by reference, one routing table
    raw = compute.args[0]
    assert raw is verl_compute_score and pickle.loads(pickle.dumps(compute)).args[0] is verl_compute_score
    other = load_like_verl(INTEROP_FILE, "VERL_DATA_SOURCES").args[0]
    assert other is VERL_DATA_SOURCES


def test_verl_routing_from_reward_kwargs_reaches_a_fresh_worker(tmp_path: Path) -> None:
    ds, problems = rows_and_problems("MBPP-v0", tmp_path)
    row = ds[0]
    right = right_response("MBPP-v0", problems[row["problem_id"]])
    gt = row["reward_model"]["ground_truth"]
    # data written by someone else: an unknown data_source and no extra_info["task"]
    by_task = load_like_verl(INTEROP_FILE, reward_kwargs={"task": "MBPP-v0"})
    assert by_task(data_source="lab/code", solution_str=right, ground_truth=gt, extra_info={})["acc"] is True
    by_map = load_like_verl(INTEROP_FILE, reward_kwargs={
        "data_source_tasks": MappingProxyType({"lab/code": "MBPP-v0"}), "reward_map": (-1, 1)})  # OmegaConf-like
    assert by_map(data_source="lab/code", solution_str="no code", ground_truth=gt, extra_info=None)["score"] == -1.0
    # a Ray worker: the bound function arrives pickled in a process where nothing was registered
    code = ("import json, pickle, sys\nfn, kwargs, call = pickle.loads(sys.stdin.buffer.read())\n"
            "print(json.dumps(dict(fn(**call, **kwargs))))")
    blob = cloudpickle.dumps((by_map.args[0], by_map.args[1],
                              {"data_source": "lab/code", "solution_str": right, "ground_truth": gt, "extra_info": {}}))
    assert run_in_fresh_interpreter(code, blob)["score"] == 1.0
    # rows from to_hf_dataset renamed for verl's metrics grouping still route by extra_info["task"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        renamed = compute_score("lab/python-mix", right, gt, dict(row["extra_info"]))
    assert renamed["acc"] is True


def test_register_data_source_reaches_the_module_copy() -> None:
    register_data_source("lab/arith", "Arithmetic-v0")
    try:
        copy = load_like_verl(INTEROP_FILE)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert copy("lab/arith", "Answer: 3", "3", None)["acc"] is True
        with pytest.raises(ValueError, match="overwrite=True"):
            register_data_source("lab/arith", "Arithmetic-v0")
    finally:
        VERL_DATA_SOURCES.pop("lab/arith")


def test_verl_code_rows_in_apps_form() -> None:
    program = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    stdio = json.dumps({"inputs": ["1 2\n", "5 5\n"], "outputs": ["3\n", "10\n"]})
    assert compute_score("codecontests", program, stdio)["score"] == 1.0
    assert compute_score("apps", program.replace("a + b", "a - b"), stdio)["score"] == 0.0
    calls = {"inputs": [[1, 2], [3, 4]], "outputs": [[3], 7], "fn_name": "add"}
    assert compute_score("taco", "def add(a, b):\n    return a + b", json.dumps(calls))["acc"] is True
    assert apps_tests(calls).entry_point == "add"
    with pytest.raises(InvalidReference, match="as many outputs"):
        apps_tests({"inputs": ["1"], "outputs": []})


def test_verl_result_shape_wrong_forms_and_batch_lengths() -> None:
    result = compute_score("math_dapo", "Answer: 3", "3")
    assert result[0] == 1.0 and float(result[0]) == result["score"]  # prime's float(result[0])
    assert pickle.loads(pickle.dumps(result)) == result
    with pytest.raises(KeyError):
        result[1]
    with pytest.raises(InvalidReference, match="'math_dapo'"):
        compute_score("math_dapo", "Answer: 3", {"answer": "3"})
    with pytest.raises(InvalidReference, match="'MBPP-v0'"):
        compute_score("MBPP-v0", "```python\nx = 1\n```", 42)
    assert compute_score("math_dapo", "Answer: 3", {"ground_truth": 3})["acc"] is True  # verl's nested form
    batch = verl_compute_score(data_sources=["math_dapo", "aime2024"], solution_strs=["Answer: 1", "Answer: 2"],
                               ground_truths=["1", "3"], extra_infos=[None, {}], reward_map=[-1, 1])
    assert [b["score"] for b in batch] == [1.0, -1.0]
    with pytest.warns(InteropWarning, match="ignores the keyword"):
        compute_score("math_dapo", "Answer: 1", "1", reward_mpa=[-1, 1])
    with pytest.raises(TypeError, match="solution_str"):
        compute_score("math_dapo")
    with pytest.raises(ValueError):
        compute_score("math_dapo", "Answer: 1", "1", reward_map=[1, -1])



# --- the real thing: TRL's GRPOTrainer, two steps on a tiny local model ----------------------------------
class RecordingReward:
    """Delegates to a reward function and records how TRL called it (module level, so it pickles)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.__name__, self.calls = inner, inner.__name__, []

    def __call__(self, *args: Any, **kwargs: Any) -> list[float]:
        rewards = self.inner(*args, **kwargs)
        self.calls.append({"args": args, "kwargs": kwargs, "rewards": rewards})
        return rewards


def test_real_grpo_trainer_two_steps_on_to_hf_dataset_rows(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    trl = pytest.importorskip("trl")
    from dapo_env.learners.models.tiny import build_tiny_model, build_tokenizer

    train = to_hf_dataset("Arithmetic-v0", chat=True, limit=8, size=100)
    reward = RecordingReward(trl_reward_function("Arithmetic-v0", reward_map=(-1.0, 1.0)))
    tokenizer = build_tokenizer(model_max_length=256)
    config = trl.GRPOConfig(output_dir=str(tmp_path), max_steps=2, per_device_train_batch_size=4, num_generations=4,
                            max_completion_length=8, loss_type="dapo", beta=0.0, logging_steps=1, save_strategy="no",
                            report_to="none", use_cpu=True, disable_tqdm=True, seed=0, dataloader_num_workers=0)
    trainer = trl.GRPOTrainer(model=build_tiny_model(tokenizer, seed=0), reward_funcs=[reward], args=config,
                              train_dataset=train, processing_class=tokenizer)
    trainer.train()
    assert trainer.state.global_step == 2 and len(reward.calls) == 2
    for call in reward.calls:
        kwargs = call["kwargs"]
        assert call["args"] == ()  # TRL passes everything by keyword
        assert set(kwargs) == {"prompts", "completions", "completion_ids", "answer", "data_source", "ability",
                               "reward_model", "problem_id", "extra_info", "trainer_state", "log_extra", "log_metric"}
        assert all(isinstance(c, list) and c[-1]["role"] == "assistant" for c in kwargs["completions"])
        expected = [map_score(get_task("Arithmetic-v0").verifier(completion_text(c), a).score)
                    for c, a in zip(kwargs["completions"], kwargs["answer"])]
        assert call["rewards"] == expected
    # the harness above passes TRL exactly these keywords
    seen: dict[str, Any] = {}
    call_like_grpo_trainer(lambda **kw: seen.update(kw) or [0.0] * len(kw["completions"]), [train[0]], ["x"] * 4, 4)
    assert set(seen) == set(reward.calls[0]["kwargs"])
    logged = [e for e in trainer.state.log_history if "rewards/Arithmetic_reward/mean" in e]
    assert len(logged) == 2 and all("rewards/Arithmetic_reward/accuracy" in e for e in logged)


def map_score(score: float) -> float:
    return -1.0 + 2.0 * score
