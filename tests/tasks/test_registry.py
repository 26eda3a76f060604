from __future__ import annotations

import pickle
import subprocess
import sys

import gymnasium
import pytest

from dapo_env.tasks import Task, get_task, list_tasks, register_task, unregister_task
from dapo_env.tasks.arithmetic import ArithmeticConfig
from dapo_env.tasks.base import template_fields
from dapo_env.tasks.procedural import ProceduralSource
from dapo_env.tasks.arithmetic import generate_arithmetic
from dapo_env.types import Problem, VerifyResult

BUILTINS = [
    "AIME24-v0",
    "AIME25-v0",
    "Arithmetic-v0",
    "Countdown-v0",
    "DAPOMath-v0",
    "GSM8K-v0",
    "HumanEval-v0",
    "MATH500-v0",
    "MBPP-v0",
]


def _exact(response: str, reference: str, /) -> VerifyResult:
    ok = response.strip() == reference
    return VerifyResult(ok, float(ok), response.strip(), "equal" if ok else "different")


def _task(name: str = "RegistryProbe", version: int = 0, **overrides) -> Task:
    fields = dict(
        name=name,
        source=ProceduralSource(default=ArithmeticConfig(size=4), generate=generate_arithmetic),
        verifier=_exact,
        version=version,
    )
    fields.update(overrides)
    return Task(**fields)


@pytest.fixture
def probe():
    registered: list[str] = []
    yield registered
    for env_id in registered:
        if env_id in list_tasks():
            unregister_task(env_id)


@pytest.mark.parametrize("env_id", BUILTINS)
def test_every_builtin_is_registered_with_gymnasium(env_id: str) -> None:
    assert env_id in list_tasks()
    spec = gymnasium.spec(env_id)
    assert spec.entry_point == "dapo_env.envs:ReasoningEnv"
    assert spec.vector_entry_point == "dapo_env.vector:GroupVectorEnv"
    assert spec.kwargs == {"task": env_id}
    task = get_task(env_id)
    assert task.env_id == env_id
    assert get_task(task.name) is task
    assert "question" in template_fields(task.prompt_template)
    assert task.description


def test_register_get_and_duplicate(probe: list[str]) -> None:
    task = _task()
    env_id = register_task(task)
    probe.append(env_id)
    assert env_id == "RegistryProbe-v0"
    assert get_task("RegistryProbe-v0") is task and get_task("RegistryProbe") is task
    assert gymnasium.spec(env_id).kwargs == {"task": env_id}
    with pytest.raises(ValueError, match="defined twice: by python and by python.*overwrite=True"):
        register_task(_task())
    replacement = _task(description="second")
    assert register_task(replacement, overwrite=True) == env_id
    assert get_task(env_id) is replacement


def test_name_lookup_returns_highest_version(probe: list[str]) -> None:
    probe.append(register_task(_task(version=0)))
    newer = _task(version=2)
    probe.append(register_task(newer))
    assert get_task("RegistryProbe") is newer
    assert get_task("RegistryProbe-v0").version == 0


def test_gymnasium_id_taken_by_another_env_is_a_duplicate(probe: list[str]) -> None:
    gymnasium.register(id="ForeignProbe-v0", entry_point="gymnasium.envs.classic_control:CartPoleEnv")
    try:
        with pytest.raises(ValueError, match="Gymnasium registry"):
            register_task(_task(name="ForeignProbe"))
    finally:
        gymnasium.registry.pop("ForeignProbe-v0", None)


def test_unknown_task_lists_known_ones() -> None:
    with pytest.raises(KeyError) as info:
        get_task("NoSuchTask-v3")
    message = str(info.value)
    assert "NoSuchTask-v3" in message
    for env_id in BUILTINS:
        assert env_id in message


def test_unregister_removes_gymnasium_id(probe: list[str]) -> None:
    env_id = register_task(_task())
    unregister_task(env_id)
    assert env_id not in list_tasks() and env_id not in gymnasium.registry


@pytest.mark.parametrize(
    ("overrides", "error", "match"),
    [
        ({"name": "Bad-v1"}, ValueError, "version suffix"),
        ({"name": "has space"}, ValueError, "letters, digits"),
        ({"version": -1}, ValueError, "version"),
        ({"prompt_template": "Q: {}"}, ValueError, "positional"),
        ({"prompt_template": "Q: {question"}, ValueError, "literal braces"),
        ({"source": object()}, TypeError, "load"),
        ({"verifier": "not callable"}, TypeError, "callable"),
        ({"split": ""}, ValueError, "split"),
    ],
)
def test_task_validation(overrides: dict, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        _task(**overrides)


def test_task_is_frozen_and_keyword_only() -> None:
    task = _task()
    with pytest.raises(AttributeError):
        task.name = "Other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        Task("X", task.source, task.verifier)  # type: ignore[misc]


def test_format_prompt_uses_metadata_and_override() -> None:
    task = _task(prompt_template="[{num_operands}] {question}")
    problem = Problem(id="1", question="Compute {x}+1.", answer="2", metadata={"num_operands": 2})
    assert task.format_prompt(problem) == "[2] Compute {x}+1."  # braces in the question stay literal
    assert task.format_prompt(problem, template="Q: {question}\nA:") == "Q: Compute {x}+1.\nA:"
    with pytest.raises(KeyError, match="level"):
        task.format_prompt(problem, template="{question} {level}")


def test_load_default_split_and_kwargs() -> None:
    task = _task(split="test")
    problems = task.load(size=3)
    assert len(problems) == 3 and problems.split == "test"
    assert task.load(split="train", size=2).split == "train"


def test_import_is_cheap() -> None:
    code = (
        "import sys, dapo_env.tasks as t; "
        "assert len(t.list_tasks()) >= 9; "
        "heavy = [m for m in ('torch', 'datasets', 'pyarrow') if m in sys.modules]; "
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


@pytest.mark.parametrize("env_id", BUILTINS)
def test_builtin_tasks_pickle(env_id: str) -> None:
    task = get_task(env_id)
    clone = pickle.loads(pickle.dumps(task))
    assert clone.env_id == env_id and clone.prompt_template == task.prompt_template
    assert type(clone.verifier) is type(task.verifier)
