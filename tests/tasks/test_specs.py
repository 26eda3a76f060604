"""Task spec files in this process: loading builds the Task a Python user would write, bad input is one line
naming the file and the field, init guesses from jsonl/csv/parquet, validate reports bad rows and failing
references, the CLI's --task takes a spec path, and the TRL/verl adapters grade a spec task."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import gymnasium as gym
import pytest
from spec_files import CODE_ROWS, MATH_ROWS, code_spec, math_spec, write_rows

import dapo_env  # noqa: F401  (registers the built-in tasks)
from dapo_env.tasks import TaskDataError, get_task, task_origin, unregister_task
from dapo_env.tasks.spec import SpecError, load_spec, load_task_spec, register_spec, verifier_names
from dapo_env.tasks.spec_cli import guess_fields, init_spec, resolve_task_argument, spec_defaults, validate


@pytest.fixture
def registered() -> list[str]:
    ids: list[str] = []
    yield ids
    for env_id in ids:
        unregister_task(env_id)


def test_spec_builds_a_task_and_its_env(tmp_path: Path, registered: list[str]) -> None:
    env_id = register_spec(math_spec(tmp_path))
    registered.append(env_id)
    task = get_task(env_id)
    assert (env_id, task.system_prompt, task_origin(env_id)) == ("SpecMath-v0", "Be brief.", f"spec {tmp_path / 'SpecMath.yaml'}")
    assert [p.answer for p in task.load()] == ["9", "1234"]  # '#### N' read, thousands comma dropped
    env = gym.make(env_id)
    prompt, info = env.reset(options={"index": 0})
    assert prompt == "What is $3^2$? (level 1)"
    assert env.step("It is \\boxed{9}.")[1] == 1.0
    assert task.prepare_reference("9 + 0\n#### 9", {}) == "9" and task.prepare_reference(9, {}) == "9"
    assert spec_defaults(env_id) == {"reward_high": 1.0, "reward_low": 0.0}


@pytest.mark.parametrize(("extra", "message"), [
    ("promt: {template: x}\n", "field 'promt': unknown field; did you mean 'prompt'?"),
    ("verifier_x: 1\n", "field 'verifier_x': unknown field; did you mean 'verifier'?"),
])
def test_unknown_field_lists_close_matches(tmp_path: Path, extra: str, message: str) -> None:
    spec = math_spec(tmp_path, extra=extra)
    with pytest.raises(SpecError) as info:
        load_spec(spec)
    assert str(info.value).startswith(f"{spec}: {message}") and "\n" not in str(info.value)


def test_bad_input_is_one_line_naming_file_and_field(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    cases = {
        "kind: math\ndata: {files: rows.jsonl}\n": "field 'name': expected the task's name",
        "name: S\nkind: math\n": "field 'data': missing",
        "name: S\ndata: {files: nowhere.jsonl}\n": "field 'data.files': data file 'nowhere.jsonl' does not exist",
        "name: S\ndata: {files: rows.jsonl}\nfields: {answer: solution}\nverifier: {name: mathh}\n":
            "field 'verifier.name': unknown verifier 'mathh'; did you mean 'math'?",
        "name: S\ndata: {files: rows.jsonl}\nfields: {answer: solution}\nverifier: {name: math, options: {x: 1}}\n":
            "field 'verifier.options': math rejects {'x': 1}",
        "name: S\ndata: {files: rows.jsonl}\nanswer_transform: gsm9k\n": "did you mean 'gsm8k'?",
        "name: S\ndata: [1\n": "not valid YAML",
    }
    write_rows(tmp_path / "rows.jsonl", MATH_ROWS)
    for text, expected in cases.items():
        spec.write_text(text)
        with pytest.raises(SpecError) as info:
            load_spec(spec)
        assert str(info.value).startswith(str(spec)) and expected in str(info.value), (text, str(info.value))
    assert {"math", "code"} <= set(verifier_names())


def test_placeholder_the_data_lacks_is_an_error(tmp_path: Path) -> None:
    spec = math_spec(tmp_path)
    spec.write_text(spec.read_text().replace("(level {level})", "({topic})"))
    with pytest.raises(TaskDataError, match=r"field 'prompt.template': placeholder \{topic\} is not in the data"):
        load_spec(spec).load()


def test_a_python_verifier_and_converter_by_module_function(tmp_path: Path) -> None:
    (tmp_path / "mine.py").write_text(
        "from dapo_env.types import Problem\n"
        "def convert(row, index):\n    return Problem(str(index), row['q'], str(row['a']))\n"
        "def exact(response, reference):\n    return response.strip() == reference\n")
    write_rows(tmp_path / "rows.jsonl", [{"q": "2+2?", "a": 4}])
    spec = tmp_path / "mine.yaml"
    spec.write_text("name: SpecMine\nkind: custom\ndata: {files: rows.jsonl}\nconverter: mine:convert\n"
                    "verifier: mine:exact\n")
    task = load_spec(spec)
    problem = task.load()[0]
    assert (task.verifier("4", problem.answer).correct, task.verifier("5", problem.answer).correct) == (True, False)


@pytest.mark.parametrize("suffix", ["jsonl", "csv", "parquet"])
def test_init_guesses_from_each_format(tmp_path: Path, suffix: str, capsys: pytest.CaptureFixture[str]) -> None:
    import pandas

    data = tmp_path / f"rows.{suffix}"
    frame = pandas.DataFrame(MATH_ROWS)
    {"jsonl": lambda: frame.to_json(data, orient="records", lines=True), "csv": lambda: frame.to_csv(data, index=False),
     "parquet": lambda: frame.to_parquet(data)}[suffix]()
    spec = init_spec("InitMath", kind="math", data=data, out=tmp_path / "specs")
    printed = capsys.readouterr().out
    assert spec == tmp_path / "specs" / "InitMath.yaml"
    assert "answer       <- 'solution'" in printed and "answer_transform gsm8k" in printed
    assert validate(spec) == 0  # the fixtures it filled in pass


def test_guess_fields_for_code_and_boxed_answers() -> None:
    fields, _, _ = guess_fields(CODE_ROWS, "code")
    assert fields == {"question": "prompt", "tests": "tests", "entry_point": "entry_point", "solution": "solution",
                      "id": "task_id"}
    assert guess_fields([{"problem": "x", "answer": "so $\\boxed{2}$"}], "math")[1] == "boxed"


def test_validate_reports_each_bad_row_as_file_row_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [*MATH_ROWS, {"id": "bad1", "question": "x", "solution": "no hashes"}, {"id": "bad2", "solution": "#### 1"}]
    write_rows(tmp_path / "rows.jsonl", rows)
    assert validate(math_spec(tmp_path)) == 1
    out = capsys.readouterr().out
    data = tmp_path / "rows.jsonl"
    assert f"{data}:3: field 'solution': has no '#### N' line" in out
    assert f"{data}:4: field 'question': missing field question" in out
    assert "FAIL SpecMath-v0: 2 problem(s)" in out


def test_validate_lists_the_test_a_reference_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [*CODE_ROWS, {"task_id": "neg", "prompt": "Write neg(x).", "tests": ["assert neg(1) == -1", "assert neg(2) == 3"],
                         "entry_point": "neg", "solution": "def neg(x):\n    return -x"}]
    assert validate(code_spec(tmp_path, rows=rows)) == 1
    out = capsys.readouterr().out
    assert "problem 'neg': the reference solution fails test 2: 'assert neg(2) == 3'" in out
    assert "problem 'add'" not in out and "fixtures: 1/1 passed" in out


def test_validate_reports_a_failing_fixture(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = math_spec(tmp_path, extra="  - {response: 'So \\boxed{9}.', problem: sq, reward: 0}\n")
    assert validate(spec) == 1
    assert "fixtures[3]: expected reward 0, got 1" in capsys.readouterr().out


def test_task_argument_registers_spec_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            registered: list[str]) -> None:
    monkeypatch.delenv("DAPO_ENV_TASK_PATH", raising=False)
    spec = math_spec(tmp_path, name="ArgMath")
    assert resolve_task_argument(f"{spec}:0.7,GSM8K-v0:0.3") == "ArgMath-v0:0.7,GSM8K-v0:0.3"
    registered.append("ArgMath-v0")
    assert resolve_task_argument(str(spec)) == "ArgMath-v0"  # the same file again: reused
    import os

    assert os.environ["DAPO_ENV_TASK_PATH"] == str(spec.resolve())


def test_train_config_takes_the_spec_defaults(tmp_path: Path, registered: list[str]) -> None:
    from dapo_env.learners.cli import build_parser, config_from_args

    spec = math_spec(tmp_path, name="CfgMath")
    registered.append(resolve_task_argument(str(spec)))
    cfg, _ = config_from_args(build_parser().parse_args(["train", "--task", "CfgMath-v0"]))
    assert (cfg.task, cfg.reward_high, cfg.reward_low) == ("CfgMath-v0", 1.0, 0.0)
    cfg, _ = config_from_args(build_parser().parse_args(["train", "--task", "CfgMath-v0", "--set", "reward_low=-0.5"]))
    assert cfg.reward_low == -0.5  # the run's own setting wins


def test_collision_names_both_sources(tmp_path: Path, registered: list[str]) -> None:
    registered.append(register_spec(math_spec(tmp_path, name="TwiceMath")))
    other = tmp_path / "other"
    other.mkdir()
    with pytest.raises(ValueError, match=rf"TwiceMath-v0 is defined twice: by spec {tmp_path / 'TwiceMath.yaml'} and "
                                         rf"by spec {other / 'TwiceMath.yaml'}"):
        register_spec(math_spec(other, name="TwiceMath"))
    with pytest.raises(ValueError, match="GSM8K-v0 is defined twice: by built-in and by spec"):
        register_spec(math_spec(other, name="GSM8K"))


def test_trl_and_verl_adapters_grade_a_spec_task(tmp_path: Path, registered: list[str]) -> None:
    from dapo_env.interop import to_hf_dataset, trl_reward_function, verl_compute_score

    env_id = register_spec(math_spec(tmp_path, name="AdaptMath"))
    registered.append(env_id)
    dataset = to_hf_dataset(env_id)
    reward = trl_reward_function(env_id)
    scores = reward(prompts=dataset["prompt"], completions=["\\boxed{9}", "\\boxed{1}"], answer=dataset["answer"])
    assert scores == [1.0, 0.0]
    hub_form = [row["solution"] for row in MATH_ROWS]  # the user's own column, '#### N' solutions
    assert reward(prompts=["p", "p"], completions=["\\boxed{9}", "\\boxed{1234}"], answer=hub_form) == [1.0, 1.0]
    assert verl_compute_score("mine", "\\boxed{1234}", "x\n#### 1,234", {}, task=env_id)["score"] == 1.0
    assert verl_compute_score(env_id, "\\boxed{9}", "9", {})["acc"] is True  # routed by the id itself


def test_code_spec_grades_in_the_sandbox(tmp_path: Path, registered: list[str]) -> None:
    env_id = register_spec(code_spec(tmp_path))
    registered.append(env_id)
    env = gym.make(env_id)
    env.reset(options={"index": 0})
    assert env.step("```python\ndef add(a, b):\n    return a + b\n```")[1] == 1.0
    spec = load_task_spec(tmp_path / "SpecCode.yaml")
    assert spec.task.load()[0].answer.entry_point == "add" and spec.solution_column == "solution"
    assert json.loads(json.dumps(spec.task.load()[0].answer.to_dict()))["tests"][0] == "assert add(1, 2) == 3"


def test_multi_turn_spec_with_tools_by_import_path(tmp_path: Path, registered: list[str]) -> None:
    (tmp_path / "table_tools.py").write_text(
        "def lookup(key: str) -> str:\n    '''Look a key up.\n\n    Args:\n        key: the key\n    '''\n"
        "    return {'b': '2'}.get(key, 'no such key')\n")
    spec = math_spec(tmp_path, name="ToolMath",
                     extra="multi_turn: {tools: ['table_tools:lookup'], max_tool_calls: 2, tool_format: hermes}\n")
    env_id = register_spec(spec)
    registered.append(env_id)
    task = get_task(env_id)
    assert task.turns == "multi-turn" and [t.name for t in task.interaction.tools] == ["lookup"]
    assert gym.spec(env_id).entry_point == "dapo_env.multiturn:MultiTurnEnv"


def test_entry_point_returning_tasks_and_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               registered: list[str]) -> None:
    from importlib.metadata import EntryPoint

    from dapo_env.tasks.discovery import TaskSourceWarning, _load_entry_point

    spec = math_spec(tmp_path, name="PluginSpec")
    (tmp_path / "plugin_probe.py").write_text(
        "from dapo_env.tasks import Task, get_task\n"
        f"def tasks():\n    return [Task(name='PluginTask', source=get_task('GSM8K-v0').source, "
        f"verifier=get_task('GSM8K-v0').verifier), {str(spec)!r}]\n"
        "def broken():\n    raise RuntimeError('plugin bug')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    ids = _load_entry_point(EntryPoint("probe", "plugin_probe:tasks", "dapo_env.tasks"))
    registered.extend(ids)
    assert ids == ["PluginTask-v0", "PluginSpec-v0"]
    assert task_origin("PluginTask-v0") == "entry point probe = plugin_probe:tasks"
    with pytest.warns(TaskSourceWarning, match="plugin_probe:broken: failed to load .RuntimeError: plugin bug"):
        assert _load_entry_point(EntryPoint("bad", "plugin_probe:broken", "dapo_env.tasks")) == []


def test_an_unreadable_data_file_names_the_spec_and_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "rows.jsonl").write_text('{"question": "1+1?", "solution": "#### 2"}\nnot json at all {\n')
    spec = math_spec(tmp_path)
    with pytest.raises(TaskDataError, match=rf"^{spec}: field 'data.files': could not read .*rows.jsonl"):
        load_spec(spec).load()
    assert validate(spec) == 1
    assert f"{spec}: field 'data.files': could not read" in capsys.readouterr().out


def test_registering_the_same_file_again_reloads_it(tmp_path: Path, registered: list[str]) -> None:
    spec = math_spec(tmp_path, name="AgainMath")
    registered.append(register_spec(spec))
    spec.write_text(spec.read_text().replace("(level {level})", "[{level}]"))
    assert register_spec(spec) == "AgainMath-v0"  # not "defined twice": the same file
    assert get_task("AgainMath-v0").prompt_template == "{question} [{level}]"


def test_a_spec_whose_module_raises_is_kept_as_a_broken_id(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dapo_env.tasks.discovery import TaskSourceWarning, load_spec_file

    (tmp_path / "explodes.py").write_text("raise RuntimeError('boom at import')\n")
    spec = math_spec(tmp_path, name="BoomMath")
    spec.write_text(spec.read_text().replace("verifier: {name: math, options: {extraction: strict}}", "verifier: explodes:fn"))
    with pytest.warns(TaskSourceWarning, match="boom at import"):
        assert load_spec_file(spec) == "BoomMath-v0"
    try:
        with pytest.raises(TaskDataError, match=rf"^{spec}: RuntimeError: boom at import"):
            gym.make("BoomMath-v0")
        from dapo_env.learners.cli import main

        capsys.readouterr()
        assert main(["tasks", "--json"]) == 0
        rows = {row["id"]: row for row in map(json.loads, capsys.readouterr().out.splitlines())}
        assert rows["BoomMath-v0"]["kind"] == "broken" and rows["BoomMath-v0"]["origin"] == f"spec {spec}"
        assert "boom at import" in rows["BoomMath-v0"]["description"]
    finally:
        unregister_task("BoomMath-v0")


def test_a_mixture_spec_is_handed_to_the_mixture_loader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         registered: list[str]) -> None:
    import types

    from dapo_env.tasks import Task

    seen = {}

    def load_mixture_spec(data, path):  # stands in for dapo_env.tasks.mixture's loader
        seen.update(data=data, path=path)
        base = get_task("GSM8K-v0")
        return Task(name=data["name"], version=data.get("version", 0), source=base.source, verifier=base.verifier)

    monkeypatch.setitem(sys.modules, "dapo_env.tasks.mixture", types.SimpleNamespace(load_mixture_spec=load_mixture_spec))
    spec = tmp_path / "mix.yaml"
    spec.write_text("name: MixProbe\nversion: 2\nmixture: [{task: GSM8K-v0, weight: 1}]\nschedule: whatever\n")
    registered.append(register_spec(spec))
    assert registered == ["MixProbe-v2"] and seen["path"] == spec.resolve()
    assert seen["data"]["mixture"] == [{"task": "GSM8K-v0", "weight": 1}] and task_origin("MixProbe-v2") == f"spec {spec}"
