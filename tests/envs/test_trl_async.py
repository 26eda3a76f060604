"""Our TRL adapters under TRL 1.16's ``AsyncGRPOTrainer`` and the unscorable-row contract of both trainers.

``AsyncGRPOTrainer`` runs its rollouts in ``_AsyncRolloutLoop`` (``trl/experimental/async_grpo/
async_rollout_worker.py``), in a spawned process that talks to a vLLM server over aiohttp. Here the real class
runs in-process: its ``__init__`` probes our environment factory (``inspect.getmembers`` on the instance's class:
``reset``, ``get_reward``, the tools), and its real ``_generate_loop`` / ``_score_loop`` play rollouts (pooled
environments reset in its thread pool, the prompt built from the observation, TRL's own tool-call parsing and
``_execute_tool_calls``) and score them in ``_score_group`` (reward functions called with ``completions=,
prompts=, completion_ids=`` and the row's columns, ``None`` turned into NaN and advantage 0). Only
``_generate_one_turn``, the one HTTP request to vLLM, is replaced by a scripted policy that returns token ids
(neither vLLM nor aiohttp is installed here). ``GRPOTrainer``'s reward path is its real ``_calculate_rewards``
on a tiny local model.
"""

from __future__ import annotations

import asyncio
import json
import math
import multiprocessing as mp
import pickle
import queue
import runpy
import warnings
from pathlib import Path
from typing import Any

import pytest

from dapo_env.interop import InteropWarning, trl_environment_factory, trl_reward_function
from dapo_env.types import InvalidReference

worker = pytest.importorskip("trl.experimental.async_grpo.async_rollout_worker")

ROOT = Path(__file__).resolve().parents[2]
UNREADABLE = ("We first count the pairs of socks in the drawer.\nThen we multiply the pairs by two to get the "
              "number of socks, which gives the total that we wanted.")  # a worked solution with no final answer
ROWS = [{"problem": "Tom has 3 apples and buys 4 more. How many apples does he have?", "answer": "7"},
        {"problem": "Ann has 2 pens and finds 2 more. How many pens does she have?", "answer": UNREADABLE}]


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    """examples/trl_multiturn.py's tokenizer: byte-level BPE with TRL's copy of the Qwen2.5 template, so TRL's
    ``add_response_schema`` and ``parse_response`` read ``<tool_call>`` blocks."""
    example = runpy.run_path(str(ROOT / "examples" / "trl_multiturn.py"))
    texts = [r["problem"] for r in ROWS] + ["print(3+4) The answer is \\boxed{7}. ```output 7 ``` python code"]
    return example["build_tokenizer"](texts)


@pytest.fixture()
def data_file(tmp_path: Path) -> str:
    path = tmp_path / "gsm8k.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in ROWS) + "\n")
    return str(path)


class ScriptedLoop(worker._AsyncRolloutLoop):
    """TRL's rollout loop with a scripted model in place of the vLLM request: a rollout with tools first makes
    ``tool_call`` (``print(3+4)`` through the ``python`` tool), then answers; the answers to one prompt alternate
    between 7 and 8 (so both come up, whatever order the rollouts finish in)."""

    answers: dict[str, int] = {}
    tool_call = {"name": "python", "arguments": {"code": "print(3+4)"}}

    async def _generate_one_turn(self, prompt_ids: list[int]) -> tuple[list[int], list[float]]:
        seen = self.tokenizer.decode(prompt_ids)
        if self.tools and "<tool_response>" not in seen:
            text = f"<tool_call>\n{json.dumps(self.tool_call)}\n</tool_call>"
        else:
            asked = seen.split("<tool_response>")[0]
            self.answers[asked] = self.answers.get(asked, 0) + 1
            text = f"The answer is \\boxed{{{7 + self.answers[asked] % 2}}}."
        ids = self.tokenizer.encode(text, add_special_tokens=False) + [self.tokenizer.eos_token_id]
        return ids, [-0.5] * len(ids)


def run_worker(tokenizer: Any, dataset: Any, *, groups: int, num_generations: int = 4,
               loop_cls: type[ScriptedLoop] = ScriptedLoop, **kwargs: Any) -> tuple[ScriptedLoop, list[Any]]:
    """Build TRL's loop as ``_child_main`` does (``PartialState()``, then the loop from the keywords that
    ``AsyncRolloutWorker.start`` pickles into the spawned process, round-tripped through pickle together here)
    and run its real generate and score loops until ``groups`` groups are scored; returns the loop and the
    scored samples."""
    from accelerate.state import PartialState

    PartialState()
    loop_kwargs = pickle.loads(pickle.dumps(dict(
        model_name="tiny", dataset=dataset, processing_class=tokenizer, eos_token_ids=[tokenizer.eos_token_id],
        num_generations=num_generations, max_inflight_tasks=num_generations, max_tool_calling_iterations=2,
        **kwargs)))
    loop = loop_cls(**loop_kwargs, rollout_buffer=queue.Queue(), model_version_value=mp.Value("i", 0),
                        heartbeat_value=mp.Value("d", 0.0), failed_event=mp.Event(),
                        exception_info_queue=queue.Queue(maxsize=1), metrics_queue=queue.Queue())

    async def until_scored(stop: asyncio.Event) -> None:
        while loop._total_groups_scored < groups:
            await asyncio.sleep(0.01)
        stop.set()

    async def main() -> None:
        stop = asyncio.Event()
        await asyncio.wait_for(asyncio.gather(loop._generate_loop(stop_event=stop), loop._score_loop(stop_event=stop),
                                              until_scored(stop)), timeout=60)

    try:
        loop._loop.run_until_complete(main())
    finally:
        loop._tool_pool.shutdown(wait=True)
        loop._loop.close()
    samples = []
    while not loop.rollout_buffer.empty():
        samples.append(loop.rollout_buffer.get_nowait())
    return loop, samples


def by_row(samples: list[Any], name: str) -> dict[int, list[list[tuple[float, float, str]]]]:
    """``dataset row -> its groups -> [(reward from the named function, advantage, final message)]``, one per
    conversation (a conversation may be several training rows). Groups take the two rows in turn."""
    groups: dict[int, dict[int, tuple[float, float, str]]] = {}
    for sample in samples:
        groups.setdefault(sample.group_id, {})[id(sample.completion)] = (
            sample.metrics[f"rewards/{name}"], sample.advantage, sample.completion[-1]["content"])
    rows: dict[int, list[list[tuple[float, float, str]]]] = {}
    for group_id, conversations in sorted(groups.items()):
        assert len(conversations) == 4
        rows.setdefault(group_id % 2, []).append(list(conversations.values()))
    return rows


def check_scored(groups: list[list[tuple[float, float, str]]]) -> None:
    """Each final answer got its grade (7 right, 8 wrong; both came up), and above-mean rewards got positive
    advantages."""
    finals = [final for group in groups for _, _, final in group]
    assert {"\\boxed{7}" in f for f in finals} == {True, False}
    for group in groups:
        assert all(r == (1.0 if "\\boxed{7}" in final else 0.0) for r, _, final in group)
        mean = sum(r for r, _, _ in group) / len(group)
        assert all((a > 0) == (r > mean) for r, a, _ in group)


def check_unscorable(groups: list[list[tuple[float, float, str]]]) -> None:
    """Every rollout of the unreadable row: NaN reward, advantage 0 (left out), and the run went on."""
    assert groups and all(math.isnan(r) and a == 0.0 for group in groups for r, a, _ in group)


def test_async_worker_probes_plays_and_scores_the_factory_with_an_unreadable_reference(
        tokenizer: Any, data_file: str) -> None:
    factory = trl_environment_factory("GSM8KTool-v0", data_files=data_file)
    with pytest.warns(InteropWarning, match="1 of 2 references cannot be read"):
        dataset = factory.dataset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loop, samples = run_worker(tokenizer, dataset, groups=2, reward_funcs=[factory.reward],
                                   environment_factory=factory)
    # the probe: reset and the task's python tool; no get_reward (the reward comes from factory.reward)
    assert loop._env_reward_types == [] and loop.reward_func_names == ["GSM8KTool_episode_reward"]
    assert [t.__name__ for t in loop._env_tools[None]] == ["python"]
    rows = by_row(samples, "GSM8KTool_episode_reward")
    check_scored(rows[0])  # problem 0 (answer 7): the tool call ran in TRL's loop; the replay scored the answers
    check_unscorable(rows[1])  # problem 1: its reference cannot be read
    assert loop.reward_funcs[0].unscorable == {"invalid_reference": 4 * len(rows[1])}  # the worker's copy counted
    assert sum("unscorable (invalid_reference)" in str(w.message) for w in caught) == 1  # once per cause
    completion = next(s.completion for s in samples if s.group_id == 0)
    assert completion[1] == {"role": "tool", "name": "python",
                             "content": "```output\n7\n```\nYou may run code 2 more times."}


def test_async_worker_scores_a_plain_reward_function_with_none_for_the_unreadable_row(tokenizer: Any) -> None:
    from datasets import Dataset

    dataset = Dataset.from_list([{"prompt": [{"role": "user", "content": r["problem"]}], "answer": r["answer"]}
                                 for r in ROWS])
    reward = trl_reward_function("GSM8K-v0")
    with pytest.warns(InteropWarning, match="unscorable"):
        loop, samples = run_worker(tokenizer, dataset, groups=2, reward_funcs=[reward])
    rows = by_row(samples, "GSM8K_reward")
    check_scored(rows[0])
    check_unscorable(rows[1])
    assert loop.reward_funcs[0].unscorable == {"invalid_reference": 4 * len(rows[1])}


def guess(number: str) -> str:
    """Submit one guess.

    Args:
        number: an integer from 1 to 16
    """
    return f"Answer: {number}"


class GuessEight(ScriptedLoop):
    tool_call = {"name": "guess", "arguments": {"number": "8"}}


def test_async_worker_with_environments_that_own_their_reward(tokenizer: Any) -> None:
    """``owns_reward=True``: the probe finds ``get_reward`` (a reward source named after the class, no reward
    function needed), the worker calls it with no argument after each rollout, and ``factory.reward`` refuses to
    count the episodes a second time."""
    factory = trl_environment_factory("GuessNumber-v0", tool=guess, size=2, owns_reward=True)
    dataset = factory.dataset()
    expected = []
    for row in dataset:  # what one guess of 8 earns on each problem, asked of our environment directly
        environment = factory()
        environment.reset(**row)
        environment.guess(number="8")
        expected.append(environment.get_reward())
    loop, samples = run_worker(tokenizer, dataset, groups=2, loop_cls=GuessEight, environment_factory=factory,
                               reward_funcs=[])  # AsyncGRPOTrainer(reward_funcs=None) hands its worker []
    name = type(factory()).__name__
    assert loop._env_reward_types == [type(factory())] and loop.reward_func_names == [name]
    assert [t.__name__ for t in loop._env_tools[None]] == ["guess"]
    for row, groups in by_row(samples, name).items():
        assert all(r == expected[row] for group in groups for r, _, _ in group)  # the final message is not played
    with pytest.raises(TypeError, match="own their reward"):
        factory.reward(completions=["x"], environments=[factory()])


def test_replay_that_diverges_from_the_rollout_is_unscorable(data_file: str) -> None:
    """Without environments= the reward replays the completion's tool calls; a recorded reply the replay does not
    reproduce (an environment that is not deterministic given its problem) makes the row unscorable."""
    factory = trl_environment_factory("GSM8KTool-v0", data_files=data_file, strict_references=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InteropWarning)  # the unreadable row 1 (warned once per process)
        row = factory.dataset()[0]
    call = {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "python", "arguments": {"code": "print(3+4)"}}}]}
    honest = [call, {"role": "tool", "name": "python", "content": "```output\n7\n```\nYou may run code 2 more times."},
              {"role": "assistant", "content": "\\boxed{7}"}]
    forged = [call, {"role": "tool", "name": "python", "content": "```output\n8\n```"}, honest[-1]]
    exhausted = [call]  # the worker stopped at max_tool_calling_iterations: the call was never run
    columns = {k: [v] * 3 for k, v in row.items() if k != "prompt"}
    with pytest.warns(InteropWarning, match="replay_diverged"):
        rewards = factory.reward(completions=[honest, forged, exhausted], prompts=[row["prompt"]] * 3,
                                 completion_ids=[[1]] * 3, **columns)
    assert rewards == [1.0, None, 0.0] and factory.reward.unscorable == {"replay_diverged": 1}


def test_strict_references_keep_the_raise(data_file: str) -> None:
    strict = trl_environment_factory("GSM8KTool-v0", data_files=data_file, strict_references=True)
    with pytest.raises(InvalidReference, match="reference 1"):
        strict.dataset()
    environment = strict()
    environment.reset(problem_id="1")
    with pytest.raises(InvalidReference):
        environment.python(code="print(1)")
    reward = trl_reward_function("GSM8K-v0", strict_references=True)
    with pytest.raises(InvalidReference, match="reference 1"):
        reward(prompts=["p", "q"], completions=["\\boxed{7}", "\\boxed{4}"], answer=["7", UNREADABLE])


def test_grpo_trainer_reward_path_with_one_unreadable_reference(tmp_path: Path) -> None:
    """A batch through the real ``GRPOTrainer._calculate_rewards`` (tiny local model): the unreadable row's
    reward is NaN (TRL's None), the other rows are scored, and the run's metric says how many were dropped."""
    import os

    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from dapo_env.learners.tiny import build_tiny_model, build_tokenizer

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    tok = build_tokenizer()
    model = build_tiny_model(tok, hidden_size=32, layers=1, heads=1, seed=0)
    rows = [{"prompt": r["problem"], "answer": r["answer"]} for r in ROWS * 2]
    config = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=2,
                        max_completion_length=8, report_to="none", use_cpu=True, save_strategy="no",
                        disable_tqdm=True, dataloader_num_workers=0)
    reward = trl_reward_function("GSM8K-v0")
    trainer = GRPOTrainer(model=model, reward_funcs=[reward], args=config, train_dataset=Dataset.from_list(rows),
                          processing_class=tok)
    completions = ["\\boxed{7}", "\\boxed{4}", "\\boxed{8}", "\\boxed{4}"]
    inputs = [{**row, "completion": c} for row, c in zip(rows, completions)]
    with pytest.warns(InteropWarning, match="invalid_reference"):
        rewards = trainer._calculate_rewards(inputs, [r["prompt"] for r in rows], completions, [[5]] * 4)
    assert rewards.shape == (4, 1) and rewards[0, 0].item() == 1.0 and rewards[2, 0].item() == 0.0
    assert math.isnan(rewards[1, 0].item()) and math.isnan(rewards[3, 0].item())
    assert reward.unscorable == {"invalid_reference": 2}
    assert trainer._pending_metrics["rewards/GSM8K_reward/unscorable"] == [0.5]


class FlakyVerifier:
    """Grades like MathVerifier, but its "sandbox" fails on responses that say ``crash`` and it raises on ``raise``:
    verification errors, not the model's mistakes."""

    def __init__(self) -> None:
        from dapo_env.verifiers import MathVerifier

        self.math = MathVerifier()

    def __call__(self, response: str, reference: Any) -> Any:
        from dapo_env.types import VerifyResult

        if "crash" in response:
            return VerifyResult(False, 0.0, None, "sandbox_error:OSError")
        if "raise" in response:
            raise RuntimeError("the verifier broke")
        return self.math(response, reference)


def test_errored_verifications_are_unscorable_in_trl_and_counted_in_verl() -> None:
    from env_helpers import ListSource, toy_problems

    from dapo_env.interop import compute_score
    from dapo_env.interop.verl import UNSCORABLE
    from dapo_env.tasks import Task, register_task, unregister_task

    task = Task(name="FlakyToy", source=ListSource(toy_problems(2)), verifier=FlakyVerifier())
    register_task(task, overwrite=True)
    try:
        reward = trl_reward_function("FlakyToy-v0")
        with pytest.warns(InteropWarning) as caught:
            scores = reward(prompts=["p"] * 4, completions=["Answer: 3", "crash", "raise", "crash again"],
                            answer=["3"] * 4)
        assert scores == [1.0, None, None, None]
        assert reward.unscorable == {"verifier_error:sandbox_error:OSError": 2, "verifier_error:error:RuntimeError": 1}
        assert len([w for w in caught if "unscorable" in str(w.message)]) == 2  # once per cause
        before = UNSCORABLE.counts["verifier_error:error:RuntimeError"]
        once = pytest.warns(InteropWarning, match="verl cannot skip a sample")  # once per cause and process
        with once if not before else warnings.catch_warnings():
            result = compute_score("FlakyToy-v0", "raise", "3", {})
        assert result == {"score": 0.0, "acc": False, "pred": ""}  # verl cannot skip: 0.0, like its prime manager
        assert UNSCORABLE.counts["verifier_error:error:RuntimeError"] == before + 1
        with pytest.raises(InvalidReference, match=r"drop or repair this row"):
            compute_score("FlakyToy-v0", "Answer: 3", UNREADABLE, {})
    finally:
        unregister_task(task.env_id)
