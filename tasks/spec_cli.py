"""``dapo-env task init`` and ``dapo-env task validate``: a spec from a data file, and a spec checked before a run.

- ``init NAME --kind math|code --data FILE`` reads the file's columns, guesses the field map and the answer
  transform, prints each guess with its reason, and writes ``NAME.yaml`` with fixtures filled from the first
  rows. ``--package DIST`` also (or, with ``--spec``, only) writes a pip-installable package around the spec.
- ``validate SPEC`` loads every row (each bad row reported as ``file:row: field 'x': message``), renders every
  prompt, runs the fixtures and, for a code task, runs each row's reference solution against each of its tests;
  it exits 1 with a summary when anything failed.

The env layer only (no learners/ import); ``learners/cli.py`` calls :func:`add_parsers` and :func:`run`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .discovery import ENV_VAR
from .base import TaskDataError
from .loading import RowError, read_file, read_hub
from .spec import SPEC_SUFFIXES, SpecError, TaskSpec, load_task_spec, register_spec, spec_for
from .spec_rows import SpecConverter

_QUESTION = ("question", "problem", "prompt", "Question", "Problem", "input", "instruction", "text", "description")
_ANSWER = ("answer", "Answer", "final_answer", "solution", "target", "output", "label", "ground_truth")
_ID = ("id", "unique_id", "task_id", "problem_id", "idx", "index", "ID")
_TESTS = ("tests", "test_list", "test_cases", "test", "asserts")
_ENTRY = ("entry_point", "function_name", "fn_name", "func_name")
_SOLUTION = ("solution", "canonical_solution", "reference_solution", "code", "reference")
_SETUP = ("test_setup_code", "setup", "test_setup")
MATH_TEMPLATE = "{question}\n\nPlease reason step by step, and put your final answer within \\boxed{{}}."
CODE_TEMPLATE = "{question}\n\nWrite the complete solution in Python, in one ```python code block."
_SAMPLE = 20


def add_parsers(sub: Any, formatter_class: type[argparse.HelpFormatter] = argparse.HelpFormatter) -> None:
    """Add ``task`` (with ``init`` and ``validate``) to the ``dapo-env`` subparsers."""
    task = sub.add_parser("task", help="write a task spec from a data file (init) or check one (validate)",
                          formatter_class=formatter_class,
                          description="Task spec files: docs/reference/task-spec.md describes every field.")
    actions = task.add_subparsers(dest="task_command", required=True, metavar="ACTION")
    init = actions.add_parser("init", formatter_class=formatter_class,
                              help="write NAME.yaml from a data file (and, with --package, a package around it)")
    init.add_argument("name", nargs="?", metavar="NAME", help="the task's name, e.g. MyMath (its id: NAME-v0)")
    init.add_argument("--kind", choices=("math", "code"), default="math", help="what the task grades")
    init.add_argument("--data", type=Path, metavar="FILE", help="a .jsonl, .json, .csv or .parquet file of rows")
    init.add_argument("--out", type=Path, metavar="PATH",
                      help="where to write the spec (a .yaml file or a folder) (default: ./NAME.yaml)")
    init.add_argument("--package", metavar="DIST",
                      help="also write a pip-installable package DIST/ around the spec (default: none)")
    init.add_argument("--spec", type=Path, metavar="SPEC",
                      help="with --package and no --data: the spec to wrap (default: NAME.yaml, else the only spec "
                           "file in this folder)")
    init.add_argument("--debug", action="store_true", help="on an error, show the full traceback")
    validate = actions.add_parser("validate", formatter_class=formatter_class,
                                  help="check a spec: every row, every prompt, the fixtures, code references")
    validate.add_argument("spec", type=Path, metavar="SPEC", help="the spec file")
    validate.add_argument("--split", action="append", metavar="SPLIT",
                          help="only these splits (repeatable) (default: every split the spec's files name)")
    validate.add_argument("--debug", action="store_true", help="on an error, show the full traceback")


def run(args: argparse.Namespace) -> int:
    """The ``task`` command's exit status."""
    if args.task_command == "validate":
        return validate(args.spec, splits=args.split)
    if args.spec is not None and not args.package:
        raise ValueError("--spec is for --package: dapo-env task init --package DIST --spec SPEC")
    if args.package and args.data is None:  # wrap an existing spec: --spec, else NAME.yaml, else the only spec here
        spec = args.spec or _existing_spec(args.name)
        print(f"wrote {write_package(args.package, spec)}")
        return 0
    if not args.name or args.data is None:
        raise ValueError("dapo-env task init NAME --kind math|code --data FILE (or --package DIST --spec SPEC)")
    spec = init_spec(args.name, kind=args.kind, data=args.data, out=args.out)
    if args.package:
        print(f"wrote {write_package(args.package, spec)}")
    return 0


def _existing_spec(name: str | None) -> Path:
    if name:
        path = Path(name if name.endswith(SPEC_SUFFIXES) else f"{name}.yaml")
        if not path.is_file():
            raise FileNotFoundError(2, "no such spec file (write one with --data FILE, or pass --spec SPEC)", str(path))
        return path
    found = sorted(p for p in Path.cwd().iterdir() if p.suffix in SPEC_SUFFIXES and p.is_file())
    if len(found) != 1:
        raise ValueError(f"--package: pass --spec SPEC (this folder has {len(found)} spec files: "
                         f"{[p.name for p in found][:5]})")
    return found[0]


# --- init -------------------------------------------------------------------------------------------------
def _rows(data: Path) -> list[dict[str, Any]]:
    rows = []
    for row in read_file(data):
        rows.append(row)
        if len(rows) >= _SAMPLE:
            break
    if not rows:
        raise ValueError(f"{data}: the file has no rows")
    return rows


def _pick(columns: Sequence[str], names: Sequence[str], taken: set[str]) -> str | None:
    lower = {c.lower(): c for c in columns if c not in taken}
    return next((lower[n.lower()] for n in names if n.lower() in lower), None)


def guess_fields(rows: Sequence[Mapping[str, Any]], kind: str) -> tuple[dict[str, str], str, list[str]]:
    """The field map, the answer transform and one line of reasoning per guess, from a file's first rows.

    Example:
        >>> fields, transform, why = guess_fields([{"problem": "1+1?", "solution": "1+1=2\\n#### 2"}], "math")
        >>> fields, transform
        ({'question': 'problem', 'answer': 'solution'}, 'gsm8k')
    """
    columns = list(rows[0])
    taken: set[str] = set()
    fields: dict[str, str] = {}
    why: list[str] = []

    def choose(key: str, names: Sequence[str], reason: str, *, required: bool) -> None:
        column = _pick(columns, names, taken)
        if column is None and required:
            text = [c for c in columns if c not in taken and all(isinstance(r.get(c), str) for r in rows)]
            column = text[0] if text else None
            reason = "the first text column left (no column has a usual name; check it)"
        if column is None:
            if required:
                raise ValueError(f"no column for {key}: the rows have {columns}; write fields.{key} by hand")
            return
        fields[key] = column
        taken.add(column)
        why.append(f"{key:<12} <- {column!r}: {reason}")

    choose("question", _QUESTION, "a column named like a question", required=True)
    if kind == "code":
        choose("tests", _TESTS, "a column named like tests", required=True)
        choose("entry_point", _ENTRY, "the function the tests call", required=False)
        choose("solution", _SOLUTION, "a reference solution: validate runs it against the tests", required=False)
        choose("setup", _SETUP, "code run before the tests", required=False)
    else:
        choose("answer", _ANSWER, "a column named like an answer", required=True)
    choose("id", _ID, "a column named like an id", required=False)
    transform = "none"
    if kind == "math":
        answers = [str(r.get(fields["answer"], "")) for r in rows]
        hashes, boxes = sum("####" in a for a in answers), sum("\\boxed" in a for a in answers)
        if 2 * hashes > len(answers):
            transform = "gsm8k"
            why.append(f"answer_transform gsm8k: {hashes} of {len(answers)} sampled answers hold a '#### N' line")
        elif 2 * boxes > len(answers):
            transform = "boxed"
            why.append(f"answer_transform boxed: {boxes} of {len(answers)} sampled answers are solutions with "
                       "\\boxed{}")
        else:
            why.append("answer_transform none: the answers are used as they are (no '#### N' line, no \\boxed{})")
    rest = [c for c in columns if c not in taken]
    if rest:
        why.append(f"metadata     <- every other column {rest}: usable as {{{rest[0]}}} in the prompt")
    return fields, transform, why


def _yaml(value: Any) -> str:
    """A YAML scalar: JSON's double-quoted strings are valid YAML."""
    return json.dumps(value, ensure_ascii=False)


def _math_fixtures(answer: str) -> list[tuple[str, float, str | None, str]]:
    number = re.fullmatch(r"-?\d+", answer.strip())
    wrong = str(int(answer) + 1) if number else ("1" if answer.strip() != "1" else "2")
    return [(f"The answer is \\boxed{{{answer}}}.", 1.0, None, "right"),
            (f"The answer is \\boxed{{{wrong}}}.", 0.0, None, "wrong"),
            ("I am not sure.", 0.0, "no_answer", "malformed: no final answer")]


def _code_fixtures(solution: str | None, tests: Any) -> list[tuple[str, float, str | None, str]]:
    out = []
    if solution:
        out.append((f"```python\n{solution.rstrip()}\n```", 1.0, None, "right: the row's reference solution"))
    else:
        out.append(("```python\n# write a correct solution of the first problem here\n```", 1.0, None,
                    "right: REPLACE with a correct solution (the data has no reference solution column)"))
    out += [("```python\ndef unrelated():\n    return None\n```", 0.0, None, "wrong: defines nothing the tests call"),
            ("I cannot solve this.", 0.0, "no_code", "malformed: no code")]
    return out


def init_spec(name: str, *, kind: str, data: Path, out: Path | None = None) -> Path:
    """Write a spec for ``data`` (see the module doc); returns its path."""
    data = Path(data)
    if not data.is_file():
        raise FileNotFoundError(2, "no such data file", str(data))
    rows = _rows(data)
    fields, transform, why = guess_fields(rows, kind)
    target = Path(out) if out is not None else Path(f"{name}.yaml")
    if target.is_dir() or (out is not None and target.suffix not in SPEC_SUFFIXES):
        target = target / f"{name}.yaml"
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        relative = os.path.relpath(data.resolve(), target.parent.resolve())
    except ValueError:  # another drive
        relative = str(data.resolve())
    converter = SpecConverter(kind=kind, question=fields["question"], answer=fields.get("answer"),
                              id=fields.get("id"), tests=fields.get("tests"), entry_point=fields.get("entry_point"),
                              solution=fields.get("solution"), setup=fields.get("setup"), transform=transform)
    try:
        first = converter(rows[0], 0)
    except RowError as exc:
        raise ValueError(f"{data}:1: field {exc.field!r}: {exc} (the guessed field map does not read the first "
                         "row; write the fields by hand)") from exc
    if kind == "math":
        fixtures = _math_fixtures(str(first.answer))
    else:
        fixtures = _code_fixtures(rows[0].get(fields["solution"]) if "solution" in fields else None, first.answer)
    lines = [f"# Task spec written by `dapo-env task init` from {data.name}; every field: docs/reference/task-spec.md",
             f"name: {name}", "version: 0", f"kind: {kind}",
             f"description: {_yaml(f'{name}, from {data.name}')}",
             "data:", f"  files: {_yaml(relative)}   # one file: every split; or {{train: a.jsonl, test: b.jsonl}}",
             "fields:"]
    lines += [f"  {key}: {_yaml(column)}" for key, column in fields.items()]
    lines.append("  metadata: all          # the other columns, usable as {column} in the prompt")
    if kind == "math":
        lines.append(f"answer_transform: {transform}   # none | gsm8k ('#### N') | boxed (last \\boxed{{}}) | integer")
    template = MATH_TEMPLATE if kind == "math" else CODE_TEMPLATE
    lines += ["prompt:", f"  template: {_yaml(template)}",
              "verifier:", f"  name: {kind}          # " + ("math: strict extraction, graded symbolically"
                                                            if kind == "math" else "runs the tests in the sandbox"),
              "fixtures:   # responses and the reward (the verifier's score) they must get; validate runs them"]
    for response, reward, reason, note in fixtures:
        lines += [f"  - response: {_yaml(response)}   # {note}", f"    problem: {_yaml(first.id)}",
                  f"    reward: {reward:g}"]
        if reason:
            lines.append(f"    reason: {reason}")
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"read {len(rows)} row(s) of {data} (columns {list(rows[0])}); guessed:")
    for line in why:
        print(f"  {line}")
    print(f"wrote {target}: check the guesses, then run `dapo-env task validate {target}`")
    return target


# --- validate ---------------------------------------------------------------------------------------------
def _splits(spec: TaskSpec, only: Sequence[str] | None) -> list[tuple[str, list[str] | None]]:
    files = dict(getattr(spec.task.source, "files", ()))
    if only:
        return [(s, list(files.get(s, files.get("*", ()))) or None) for s in only]
    if not files:
        return [(spec.task.split, None)]
    if "*" in files:
        return [(spec.task.split, list(files["*"]))]
    return [(split, list(paths)) for split, paths in files.items()]


def validate(path: Path, *, splits: Sequence[str] | None = None) -> int:
    """Check a spec (see the module doc); prints a report and returns 0 when everything passed, else 1."""
    try:
        spec = load_task_spec(path)
    except SpecError as exc:
        print(f"FAIL spec: {exc}")
        print(f"{path}: 1 problem (the spec itself); fix it and run validate again")
        return 1
    task, failures = spec.task, []
    print(f"{task.env_id}: {spec.kind} task from {spec.path}")
    problems_by_split: dict[str, list[Any]] = {}
    convert = task.source.dataset.convert if hasattr(task.source, "dataset") else None
    for split, files in _splits(spec, splits):
        problems, bad = [], 0
        if convert is None:
            problems = list(task.load(split))
        else:
            sources = [(f, _lazy_rows(read_file, f)) for f in files] if files else [
                (f"hub:{task.source.hub_id}", _lazy_rows(read_hub, task.source.hub_id, task.source.hub_config,
                                                         split, env_id=task.env_id, example="rows.jsonl"))]
            for where, rows in sources:
                try:
                    for index, row in enumerate(rows):
                        try:
                            problems.append(convert(row, index))
                        except RowError as exc:
                            bad += 1
                            failures.append(f"{where}:{index + 1}: field {exc.field!r}: {exc}")
                except TaskDataError as exc:  # the file (or the hub dataset) itself cannot be read
                    field = "data.files" if files else "data.hub"
                    failures.append(f"{spec.path}: field {field!r}: {' '.join(str(exc).split())}")
        problems_by_split[split] = problems
        rendered = 0
        for problem in problems:
            try:
                task.format_prompt(problem)
                rendered += 1
            except KeyError as exc:
                failures.append(f"{spec.path}: field 'prompt.template': problem {problem.id!r}: {exc.args[0]}")
        print(f"  split {split}: {len(problems)} rows read, {bad} bad; {rendered} prompts rendered")
    failures += _run_fixtures(spec, problems_by_split)
    if spec.kind == "code":
        failures += _run_references(spec, problems_by_split)
    if failures:
        print(f"FAIL {task.env_id}: {len(failures)} problem(s):")
        for line in failures:
            print(f"  {line}")
        return 1
    print(f"OK {task.env_id}: every row, prompt and fixture passed")
    return 0


def _lazy_rows(read: Any, *args: Any, **kwargs: Any) -> Any:
    yield from read(*args, **kwargs)  # read when iterated, so an unreadable source is reported with the others


def _run_fixtures(spec: TaskSpec, problems_by_split: Mapping[str, list[Any]]) -> list[str]:
    from dapo_env.verifiers import as_verifier

    task, failures, passed = spec.task, [], 0
    verifier = as_verifier(task.verifier)
    for index, fixture in enumerate(spec.fixtures):
        where = f"{spec.path}: fixtures[{index}]"
        if fixture.problem is not None:
            split = fixture.split or task.split
            pool = problems_by_split.get(split) or problems_by_split.get(next(iter(problems_by_split), ""), [])
            match = [p for p in pool if p.id == fixture.problem]
            if not match:
                failures.append(f"{where}: problem {fixture.problem!r} is not in split {split!r}")
                continue
            reference = match[0].answer
        else:
            try:
                reference = task.prepare_reference(fixture.answer)
            except (ValueError, TypeError) as exc:
                failures.append(f"{where}: answer {fixture.answer!r} is not a reference this task reads: {exc}")
                continue
        result = verifier(fixture.response, reference)
        if abs(result.score - fixture.reward) > 1e-6:
            failures.append(f"{where}: expected reward {fixture.reward:g}, got {result.score:g} ({result.reason})")
        elif fixture.reason is not None and not str(result.reason).startswith(fixture.reason):
            failures.append(f"{where}: expected reason {fixture.reason!r}, got {result.reason!r}")
        else:
            passed += 1
    print(f"  fixtures: {passed}/{len(spec.fixtures)} passed")
    return failures


def _run_references(spec: TaskSpec, problems_by_split: Mapping[str, list[Any]]) -> list[str]:
    """Every row's reference solution against each of its tests."""
    from dapo_env.verifiers import CodeVerifier

    verifier = spec.task.verifier if hasattr(spec.task.verifier, "report") else CodeVerifier()
    column, failures, ran, missing = spec.solution_column, [], 0, 0
    for split, problems in problems_by_split.items():
        for problem in problems:
            solution = problem.metadata.get(column) if column else None
            if not isinstance(solution, str) or not solution.strip():
                missing += 1
                continue
            ran += 1
            report = verifier.report(f"```python\n{solution}\n```", problem.answer)
            if not report.tests:
                failures.append(f"{split} problem {problem.id!r}: the reference solution fails: {report.result.reason}")
            for test in report.tests:
                if not test.passed:
                    failures.append(f"{split} problem {problem.id!r}: the reference solution fails test "
                                    f"{test.index + 1}: {test.source.strip()[:120]!r}: {test.message}")
    note = f", {missing} without one (not run)" if missing else ""
    print(f"  reference solutions: {ran} run against their tests{note}")
    return failures


# --- package ----------------------------------------------------------------------------------------------
def write_package(dist: str, spec_path: Path) -> Path:
    """Write ``DIST/`` (beside the current folder): a pip-installable package holding the spec and its data
    files as package data, its ``dapo_env.tasks`` entry point, and a test that validates the spec."""
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_.-]*", dist):
        raise ValueError(f"--package {dist!r}: use letters, digits, '_', '.' or '-', starting with a letter")
    spec = load_task_spec(spec_path)
    module = re.sub(r"[^0-9a-zA-Z_]", "_", dist).lower()
    root = Path(dist)
    if root.exists():
        raise FileExistsError(17, "already exists; pick another --package name or remove it", str(root))
    package = root / module
    (package / "data").mkdir(parents=True)
    (root / "tests").mkdir()
    text = Path(spec.path).read_text(encoding="utf-8")
    files = dict(getattr(spec.task.source, "files", ()))
    copied: dict[str, str] = {}
    for paths in files.values():
        for item in paths:
            copied.setdefault(item, f"data/{Path(item).name}")
            shutil.copy2(item, package / copied[item])
    import yaml

    data = yaml.safe_load(text)
    if files:
        raw = data["data"]["files"]

        def moved(paths: Any) -> Any:  # the spec's data paths, now the copies in data/
            if isinstance(paths, str):
                return copied[str((Path(spec.path).parent / paths).resolve())]
            return [moved(p) for p in paths]

        data["data"]["files"] = {k: moved(v) for k, v in raw.items()} if isinstance(raw, Mapping) else moved(raw)
    spec_name = Path(spec.path).name
    (package / spec_name).write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    (package / "__init__.py").write_text(
        f'"""{spec.task.env_id} as a dapo-env task package: `pip install .`, then '
        f'gym.make("{spec.task.env_id}")."""\n\n'
        "from pathlib import Path\n\n"
        f'SPEC = Path(__file__).with_name("{spec_name}")\n\n\n'
        "def tasks():\n"
        '    """The dapo_env.tasks entry point: the spec files this package ships."""\n'
        "    return [SPEC]\n", encoding="utf-8")
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n\n'
        f'[project]\nname = "{dist}"\nversion = "0.1.0"\ndescription = {_yaml(spec.task.description)}\n'
        'requires-python = ">=3.11"\ndependencies = ["dapo-env"]\n\n'
        f'[project.entry-points."dapo_env.tasks"]\n{module} = "{module}:tasks"\n\n'
        f'[tool.setuptools]\npackages = ["{module}"]\n\n'
        f'[tool.setuptools.package-data]\n{module} = ["*.yaml", "data/*"]\n', encoding="utf-8")
    (root / "tests" / f"test_{module}.py").write_text(
        f'"""The packaged spec validates: every row, prompt and fixture."""\n\n'
        f"from dapo_env.tasks.spec_cli import validate\n\nfrom {module} import SPEC\n\n\n"
        f"def test_spec_validates():\n    assert validate(SPEC) == 0\n", encoding="utf-8")
    (root / "README.md").write_text(
        f"# {dist}\n\nThe dapo-env task `{spec.task.env_id}` ({spec.task.description}).\n\n"
        f"```bash\npip install .\ndapo-env tasks   # lists {spec.task.env_id} with this package as its origin\n"
        f"dapo-env train --task {spec.task.env_id}\n```\n", encoding="utf-8")
    return root


# --- --task for train and eval ------------------------------------------------------------------------------
def _is_spec_path(value: str) -> bool:
    return value.endswith(SPEC_SUFFIXES) or (os.sep in value and Path(value).is_file())


def resolve_task_argument(value: str) -> str:
    """``--task`` with spec paths replaced by their ids: each path is registered here and put on
    ``DAPO_ENV_TASK_PATH`` so child processes (rollout workers, spawn pools) register it too. A comma list
    with ``:weight`` suffixes keeps its form (``"a.yaml:0.7,GSM8K-v0:0.3"`` -> ``"MyMath-v0:0.7,GSM8K-v0:0.3"``).
    """
    parts = []
    for part in value.split(","):
        match = re.fullmatch(r"(.+?)(:\d+(?:\.\d*)?|:\.\d+)?", part.strip())
        name, weight = (match.group(1), match.group(2) or "") if match else (part, "")
        if _is_spec_path(name):
            parts.append(register_spec_argument(Path(name)) + weight)
        else:
            parts.append(part.strip())
    return ",".join(parts)


def register_spec_argument(path: Path) -> str:
    """Register the spec at ``path`` (once; a spec already discovered from that file is reused) and export it
    to child processes through ``DAPO_ENV_TASK_PATH``; returns its id."""
    resolved = path.resolve()
    if not resolved.is_file():
        raise FileNotFoundError(2, "no such spec file", str(path))
    from .spec import spec_id

    env_id = spec_id(resolved)
    known = spec_for(env_id) if env_id else None
    if known is None or known.path != resolved:
        env_id = register_spec(resolved)
    current = os.environ.get(ENV_VAR, "")
    if str(resolved) not in current.split(os.pathsep):
        os.environ[ENV_VAR] = os.pathsep.join(filter(None, [str(resolved), current]))
    return env_id  # type: ignore[return-value]


def spec_defaults(task: str | None, exclude: Sequence[str] = ()) -> dict[str, Any]:
    """The run defaults (``TrainConfig`` fields) the spec of ``task`` declares, without ``exclude`` (fields the
    run sets itself); {} for a task not from a spec, or a mixture."""
    from .registry import get_task
    from .spec import spec_train_defaults

    if not task or "," in task:
        return {}
    try:
        env_id = get_task(task).env_id
    except (KeyError, ValueError):
        return {}  # an unknown task is reported where the config is used
    return {k: v for k, v in spec_train_defaults(env_id).items() if k not in set(exclude)}


__all__ = ["add_parsers", "guess_fields", "init_spec", "register_spec_argument", "resolve_task_argument", "run",
           "spec_defaults", "validate", "write_package"]
