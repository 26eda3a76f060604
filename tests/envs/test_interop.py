from __future__ import annotations

import pytest

from dapo_env.interop import (
    VERL_DATA_SOURCES,
    completion_text,
    compute_score,
    register_data_source,
    trl_reward_function,
    verl_compute_score,
)


def test_trl_reward_function_scores_standard_and_conversational_completions(toy_task) -> None:
    reward = trl_reward_function("EnvToy-v0")
    assert reward.__name__ == "EnvToy_reward"
    prompts = ["p1", "p2", "p3"]
    completions = ["... Answer: 9", "Answer: $\\boxed{10}$", "no answer"]
    assert reward(prompts=prompts, completions=completions, answer=["9", "9", "9"]) == [1.0, 0.0, 0.0]
    chat = [[{"role": "assistant", "content": c}] for c in completions]
    assert reward(prompts=prompts, completions=chat, answer=["9", "10", "9"], completion_ids=None) == [1.0, 1.0, 0.0]
    mapped = trl_reward_function(toy_task, reward_map=(-1.0, 1.0), answer_column="solution")
    assert mapped(prompts, completions, solution=["9", "9", "9"]) == [1.0, -1.0, -1.0]


def test_trl_reward_function_errors_say_the_fix(toy_task) -> None:
    reward = trl_reward_function(toy_task)
    with pytest.raises(KeyError, match="answer_column="):
        reward(prompts=["p"], completions=["Answer: 1"], solution=["1"])
    with pytest.raises(ValueError, match="2 completions but 1"):
        reward(prompts=["p", "q"], completions=["a", "b"], answer=["1"])
    with pytest.raises(TypeError, match="completion"):
        completion_text(3)


def test_trl_reward_function_with_worker_processes(toy_task) -> None:
    reward = trl_reward_function(toy_task, workers=1)
    assert reward(prompts=["p", "q"], completions=["Answer: 9", "Answer: 8"], answer=["9", "9"]) == [1.0, 0.0]


def test_completion_text_takes_the_last_assistant_message() -> None:
    messages = [{"role": "assistant", "content": "first"}, {"role": "tool", "content": "x"},
                {"role": "assistant", "content": "final"}]
    assert completion_text(messages) == "final"
    assert completion_text({"role": "assistant", "content": "c"}) == "c"
    assert completion_text([]) == ""


def test_verl_compute_score_dispatches_on_data_source(toy_task) -> None:
    dapo_style = "Step by step...\nAnswer: 70"
    assert verl_compute_score("math_dapo", dapo_style, "70") == {"score": 1.0, "acc": True, "pred": "70"}
    assert compute_score is verl_compute_score
    assert compute_score("aime25", "Answer: 71", "70", extra_info={"index": 0})["acc"] is False
    assert compute_score("EnvToy-v0", "Answer: 9", "9", reward_map=[-1, 1])["score"] == 1.0
    assert compute_score("EnvToy", "Answer: 8", "9", reward_map=[-1, 1])["score"] == -1.0
    with pytest.raises(KeyError, match="register_data_source"):
        compute_score("unknown/source", "Answer: 1", "1")


def test_register_data_source(toy_task) -> None:
    register_data_source("my/toy", "EnvToy-v0")
    try:
        assert compute_score("my/toy", "Answer: 3", "3")["acc"] is True
        with pytest.raises(ValueError, match="overwrite=True"):
            register_data_source("my/toy", "EnvToy-v0")
    finally:
        VERL_DATA_SOURCES.pop("my/toy")
