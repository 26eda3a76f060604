"""Multi-turn tasks on the code sandbox: code with test feedback, and math with a Python tool.

* ``MBPPFeedback-v0``: MBPP's problems; after a failing attempt the environment replies with the failing
  tests' output (the test's source where the prompt already shows it, and the candidate's own value or
  exception: never an expected value), up to ``max_attempts`` attempts. Reward ``1 - attempt_penalty *
  (attempt - 1)`` on the passing attempt, 0 otherwise (:class:`CodeFeedback`).
* ``GSM8KTool-v0`` and ``DAPOMathTool-v0``: GSM8K's and DAPO-Math-17k's problems; a turn holding a
  ```` ```python ```` block is a tool call: the environment runs the program in the code sandbox
  (:func:`~dapo_env.verifiers.run_python`) and replies with what it printed (capped; the last lines of
  stderr on an error). The episode ends at the first turn that commits to a final answer outside code
  blocks, graded by the math verifier (GSM8KTool: any commitment GSM8K-v0 accepts, but only a ``\\boxed{}``
  in a turn that also holds code; DAPOMathTool: an ``Answer:`` line, the DAPO scorer's rule, see
  :class:`FinalAnswerVerifier`); every turn without one uses one of ``max_tool_calls`` (:class:`PythonTool`).

Each task reuses its single-turn twin's loading (hub id by default, ``data_files=`` for local files) and
adds its episode rules as load knobs (``gym.make("MBPPFeedback-v0", data_files=..., max_attempts=5)``),
stored in every problem's metadata, where the prompt template and the interaction read them.
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, overload

from .base import DataFiles, ProblemSource, Task
from .code_tasks import MBPP, MBPP_TEMPLATE
from .program_tasks import CPP_PICK, JS_FUNCTIONS
from .math_tasks import DAPO_MATH, DAPO_PREFIX, GSM8K
from .registry import register_task
from dapo_env.tools import TOOL_PARSERS, ToolUse, tool
from dapo_env.types import Completion, History, Problem, Turn, VerifyResult
from dapo_env.verifiers import CodeVerifier, MathVerifier, ProgramVerifier, SandboxLimits

_FENCED = re.compile(r"```.*?```", re.DOTALL)
_LANGUAGE_TITLES = {"python": "Python", "cpp": "C++", "javascript": "JavaScript"}


# --- episode rules as load knobs ------------------------------------------------------------------------
def _check_int(name: str, value: Any, low: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}")


def _check_format(value: Any) -> None:
    if value != "auto" and value not in TOOL_PARSERS:
        raise ValueError(f"tool_format must be one of {['auto', *sorted(TOOL_PARSERS)]}, got {value!r}")


@dataclass(frozen=True, kw_only=True)
class FeedbackRules:
    """The episode rules of ``MBPPFeedback-v0`` (load knobs; each problem's metadata carries them).

    Attributes:
        max_attempts: attempts per problem (>= 1); the episode ends at the first passing attempt.
        attempt_penalty: subtracted from the reward of 1.0 for each attempt before the passing one; a late
            pass must still beat failing, so ``attempt_penalty * (max_attempts - 1)`` must stay below 1.
        tool_format: ``"fenced"`` (each turn is an attempt in a ```` ```python ```` block, answered with test
            feedback) or a native format (``"hermes"``, ``"llama3"``, ``"mistral"``, ``"auto"``): the model calls
            ``run_tests(code)`` in up to ``max_attempts`` turns, then answers with the solution in a message
            without a call (:class:`~dapo_env.tools.ToolUse`).

    Example:
        >>> FeedbackRules(max_attempts=4, attempt_penalty=0.2).max_attempts
        4
    """

    max_attempts: int = 3
    attempt_penalty: float = 0.1
    tool_format: str = "fenced"

    def __post_init__(self) -> None:
        _check_int("max_attempts", self.max_attempts, 1)
        _check_format(self.tool_format)
        penalty = self.attempt_penalty
        if isinstance(penalty, bool) or not isinstance(penalty, (int, float)) or not math.isfinite(penalty) or penalty < 0:
            raise ValueError(f"attempt_penalty must be a finite number >= 0, got {penalty!r}")
        if penalty * (self.max_attempts - 1) >= 1:
            raise ValueError(
                f"attempt_penalty={penalty} x (max_attempts - 1)={self.max_attempts - 1} must be < 1, or a pass on the "
                f"last attempt would earn nothing: lower attempt_penalty below {1 / max(self.max_attempts - 1, 1):.3g}")


@dataclass(frozen=True, kw_only=True)
class ToolRules:
    """The episode rules of ``GSM8KTool-v0`` and ``DAPOMathTool-v0`` (load knobs).

    Attributes:
        max_tool_calls: turns without a final answer allowed per episode (>= 0; each runs the turn's
            program, if it has one); the turn after the last of them must answer, so an episode has at most
            ``max_tool_calls + 1`` turns.
        tool_format: ``"fenced"`` (a turn's last ```` ```python ```` block runs; :class:`PythonTool`) or a
            native format (``"hermes"``, ``"llama3"``, ``"mistral"``, ``"auto"``: calls of the ``python`` tool,
            :class:`~dapo_env.tools.ToolUse`).

    Example:
        >>> ToolRules().max_tool_calls
        3
    """

    max_tool_calls: int = 3
    tool_format: str = "fenced"

    def __post_init__(self) -> None:
        _check_int("max_tool_calls", self.max_tool_calls, 0)
        _check_format(self.tool_format)


class ProblemsWithRules(Sequence[Problem]):
    """A task's problems with the episode rules added to each one's metadata (built on access)."""

    def __init__(self, problems: Sequence[Problem], rules: Mapping[str, Any]) -> None:
        self.problems, self.rules = problems, dict(rules)

    def __len__(self) -> int:
        return len(self.problems)

    @overload
    def __getitem__(self, index: int) -> Problem: ...
    @overload
    def __getitem__(self, index: slice) -> list[Problem]: ...
    def __getitem__(self, index: int | slice) -> Problem | list[Problem]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        problem = self.problems[index]
        return Problem(problem.id, problem.question, problem.answer, {**problem.metadata, **self.rules})

    def __iter__(self) -> Iterator[Problem]:
        return (self[i] for i in range(len(self)))


@dataclass(frozen=True)
class RulesSource:
    """A :class:`~dapo_env.tasks.base.ProblemSource` that loads another source's problems and adds episode
    rules to them: ``load(split, data_files, **knobs)`` takes the rules' fields as knobs and passes every
    other keyword to the base source. With ``protocol=(fenced, native)``, the metadata's ``tool_protocol``
    is the text the prompt shows for the chosen ``tool_format`` (``str.format`` with the rules' fields).

    Example:
        >>> from dapo_env.tasks import get_task
        >>> source = RulesSource(get_task("Arithmetic-v0").source, FeedbackRules())
        >>> problem = source.load("test", size=2, max_attempts=2)[0]
        >>> problem.metadata["max_attempts"], problem.metadata["attempt_penalty"]
        (2, 0.1)
    """

    base: ProblemSource
    rules: Any  # a frozen rules dataclass holding the defaults
    protocol: tuple[str, str] | None = None  # (fenced, native) prompt texts

    def load(self, split: str, data_files: DataFiles | None = None, **knobs: Any) -> ProblemsWithRules:
        names = {f.name for f in fields(self.rules)}
        rules = replace(self.rules, **{k: knobs.pop(k) for k in sorted(names & set(knobs))})
        accepted = self._base_options()
        unknown = sorted(set(knobs) - accepted) if accepted is not None else []
        if unknown:
            raise TypeError(f"unknown option(s) {unknown}; valid options: {sorted(names | (accepted or set()))}")
        metadata = asdict(rules)
        if self.protocol is not None:
            text = self.protocol[0] if metadata.get("tool_format") == "fenced" else self.protocol[1]
            metadata["tool_protocol"] = text.format(**asdict(rules))
        return ProblemsWithRules(self.base.load(split, data_files, **knobs), metadata)

    def _base_options(self) -> set[str] | None:
        """The keywords the base source's ``load`` takes (``None``: any, it has ``**kwargs``)."""
        parameters = inspect.signature(self.base.load).parameters.values()
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
            return None
        return {p.name for p in parameters if p.name not in ("split", "data_files")}

    @property
    def hub_id(self) -> str | None:
        """The base source's hub dataset, if it has one (what ``dapo-env tasks`` lists)."""
        return getattr(self.base, "hub_id", None)

    @property
    def hub_config(self) -> str | None:
        return getattr(self.base, "hub_config", None)


# --- MBPPFeedback-v0 --------------------------------------------------------------------------------------
FEEDBACK_SUFFIX = (
    "\n\nYou have {max_attempts} attempts. After a failing attempt I reply with the output of the failing tests; "
    "then reply with the complete corrected solution in one ```python code block."
)
NATIVE_FEEDBACK_SUFFIX = (
    "\n\nYou can test a solution with the run_tests tool (it runs the tests and shows what failed) in up to "
    "{max_attempts} turns. Then reply, without a tool call, with the complete solution in one ```python code block."
)
MBPP_FEEDBACK_TEMPLATE = MBPP_TEMPLATE + "{tool_protocol}"
_SHOWN_FAILURES = 5


@dataclass(frozen=True, kw_only=True)
class CodeFeedback:
    """The interaction of ``MBPPFeedback-v0``, ``CppPickFeedback-v0`` and ``JSFunctionsFeedback-v0``: reward a
    passing attempt, answer a failing one with the failing tests' output, end after ``max_attempts`` (the
    problem's metadata; :class:`FeedbackRules`). Any language: with a
    :class:`~dapo_env.verifiers.ProgramVerifier` each failing test is shown with its verdict (wrong answer,
    time limit, runtime error) and its input or call with what the program printed or returned, a compile
    error with the compiler's trimmed output.

    The verdict (the task's ``CodeVerifier`` or ``ProgramVerifier``) decides pass or fail. For a failing attempt with tests that ran,
    the feedback comes from ``verifier.report()`` (one more sandboxed run): per failing test its source when
    the prompt already shows it (else "a hidden test") and :attr:`TestReport.message`, which names the
    candidate's own value or exception and never an expected value. No code, a syntax error or a run cut at
    the time or output limit is said as such, without another run.

    Args:
        verifier: the code verifier that runs the feedback report (the task's own, so limits agree).
        role: the chat role of the replies.

    Example:
        >>> from dapo_env.types import CodeTests
        >>> tests = CodeTests(tests=("assert add(1, 2) == 3",))
        >>> problem = Problem("1", "add", tests, {"max_attempts": 3, "attempt_penalty": 0.1})
        >>> history = History(problem, ({"role": "user", "content": "assert add(1, 2) == 3"},))
        >>> turn = CodeFeedback().respond(history, Completion("no code"), VerifyResult(False, 0.0, None, "no_code"))
        >>> turn.done, turn.reply.startswith("No Python code found")
        (False, True)
    """

    verifier: CodeVerifier | ProgramVerifier = field(default_factory=CodeVerifier)
    role: str = "user"

    @property
    def language(self) -> tuple[str, str]:
        """The verifier's language as (title, fence tag): ``("Python", "python")``, ``("C++", "cpp")``, ..."""
        name = getattr(self.verifier, "language", "python")
        return _LANGUAGE_TITLES.get(name, name), name

    def run_tests(self, code: str, problem: Problem) -> str:
        """Run a complete solution against the problem's tests; returns the failing tests' output, or that all
        tests passed.

        Args:
            code: the complete solution (every function the tests call, or the whole program)
        """
        action = Completion(f"```{self.language[1]}\n{code}\n```")
        verdict = self.verifier(action.text, problem.answer)
        if verdict.correct:
            return "All tests passed."
        shown = History(problem, ({"role": "user", "content": str(problem.metadata.get("test_examples", ""))},))
        return self.feedback(shown, action, verdict)

    def respond(self, history: History, action: Completion, verdict: VerifyResult) -> Turn:
        problem, attempt = history.problem, history.turn
        max_attempts, penalty = int(problem.metadata["max_attempts"]), float(problem.metadata["attempt_penalty"])
        left = max_attempts - attempt - 1
        info = {"attempt": attempt + 1, "attempts_left": left}
        if verdict.correct:
            reward = 1.0 - penalty * attempt
            return Turn("All tests passed.", reward, done=True, solved=True, role=self.role, info=info,
                        terms={"pass": 1.0, "attempt_penalty": reward - 1.0})
        if left <= 0:
            return Turn(f"Out of attempts ({verdict.reason}).", 0.0, done=True, role=self.role, info=info)
        again = (f"\n\nYou have {left} attempt{'s' if left > 1 else ''} left: reply with the complete corrected "
                 f"solution in one ```{self.language[1]} code block.")
        return Turn(self.feedback(history, action, verdict) + again, 0.0, role=self.role, info=info)

    def feedback(self, history: History, action: Completion, verdict: VerifyResult) -> str:
        """What went wrong with a failing attempt, in words the model can act on."""
        reason = verdict.reason
        title, fence = self.language
        if reason == "no_code":
            return f"No {title} code found: write the complete solution in one ```{fence} code block."
        if reason.startswith("wrong_language:"):
            other = _LANGUAGE_TITLES.get(reason.partition(":")[2], reason.partition(":")[2])
            return f"Your code is in {other}, but this task takes {title}: write it in one ```{fence} code block."
        if reason == "syntax_error":
            return f"Your code does not compile: {_syntax_error(verdict.extracted or '')}."
        if reason == "compile_error":
            report = self.verifier.report(action.text, history.problem.answer)  # the compiled program is cached
            said = report.tests[0].message.removeprefix("compile error: ") if report.tests else ""
            return f"Your code does not compile:\n{said}".rstrip()
        if reason.startswith("sandbox_error"):
            return f"Your code could not be run ({reason}); try again."
        if ";timeout" in reason:
            return (f"Your code did not finish within the time limit ({self.verifier.limits.wall_s:g} s): look for an "
                    "endless loop or a slow algorithm.")
        if ";output_limit" in reason:
            return "Your code printed more than the output limit: remove the prints."
        return self._failed_tests(history, action)

    def _failed_tests(self, history: History, action: Completion) -> str:
        report = self.verifier.report(action.text, history.problem.answer)
        failed = [t for t in report.tests if not t.passed]
        if not failed:
            return (f"Some tests failed on the first run but passed on a second ({report.result.reason}): your code "
                    "is too slow or not deterministic.")
        lines = [f"{len(failed)} of {len(report.tests)} tests failed:"]
        for test in failed[:_SHOWN_FAILURES]:
            if isinstance(self.verifier, ProgramVerifier):  # its messages name the input or call, never the expected
                lines.append(f"- {test.status.replace('_', ' ')}: {test.message}")
                continue
            source = _public_source(test.source, history.prompt)
            if source is not None:
                lines += [source, f"  {test.message}"]
            elif test.decided == "outside":  # the candidate's own value or exception, without the test
                lines += ["a hidden test:", f"  {test.message}"]
            else:
                lines.append("a hidden test failed")
        if len(failed) > _SHOWN_FAILURES:
            lines.append(f"... and {len(failed) - _SHOWN_FAILURES} more")
        return "\n".join(lines)


def _public_source(source: str, prompt: str) -> str | None:
    """The test's source if the prompt already shows it (the whole test, or its last line when setup code was
    prepended to it), else ``None``."""
    for candidate in (source.strip(), source.strip().splitlines()[-1].strip() if source.strip() else ""):
        if candidate and candidate in prompt:
            return candidate
    return None


def _syntax_error(code: str) -> str:
    """The compiler's message for code that does not compile (compiling runs nothing)."""
    try:
        compile(code, "<candidate>", "exec")
    except SyntaxError as exc:
        where = f" (line {exc.lineno})" if exc.lineno else ""
        return f"SyntaxError: {exc.msg}{where}"
    except (ValueError, RecursionError, MemoryError) as exc:
        return type(exc).__name__
    return "SyntaxError"


# --- GSM8KTool-v0 and DAPOMathTool-v0 ---------------------------------------------------------------------
def outside_code(text: str) -> str:
    """``text`` without its fenced blocks (closed ones, and an unclosed one running to the end): the part of a
    turn that can commit a final answer.

    Example:
        >>> outside_code("Let me compute.\\n```python\\nprint('Answer: 3')\\n```\\nAnswer: 4\\n```py\\nx = ")
        'Let me compute.\\n\\nAnswer: 4\\n'
    """
    text = _FENCED.sub("", text)
    return text.split("```", 1)[0]


@dataclass(frozen=True)
class FinalAnswerVerifier:
    """Grades the final answer written outside code blocks, with a :class:`MathVerifier`.

    Code and its (hallucinated) output are not answers: ``print("Answer: 3")`` inside a ```` ```python ````
    block commits nothing. A turn without a complete ```` ```python ```` block is graded by ``math`` (every
    commitment its ``answer_format`` knows); a turn with one is a tool call unless its prose commits in the
    explicit form ``with_code`` knows (default: ``math``'s), so a calculation stated before the code that
    checks it ("9 * 2 = 18 dollars.") does not end the episode. ``extracted`` is ``None`` exactly when the
    turn commits no final answer.

    Args:
        math: the verifier of a turn without code (and the grader of every answer).
        with_code: the verifier of a turn with code (``None``: ``math``).

    Example:
        >>> verify = FinalAnswerVerifier(MathVerifier(), with_code=MathVerifier(answer_format="boxed"))
        >>> verify("```python\\nprint('Answer:', 6 * 7)\\n```", "42").reason
        'no_answer'
        >>> verify("So 6 * 7 = 42 apples.\\n```python\\nprint(6 * 7)\\n```", "42").extracted is None
        True
        >>> verify("The program printed 42.\\nAnswer: 42", "42").correct
        True
        >>> verify("\\\\boxed{42}\\n```python\\nprint(42)\\n```", "42").correct
        True
    """

    math: MathVerifier = field(default_factory=MathVerifier)
    with_code: MathVerifier | None = None

    def prepare_reference(self, reference: Any) -> str:
        return self.math.prepare_reference(reference)

    def __call__(self, response: str, gold: str) -> VerifyResult:
        if not isinstance(response, str):
            return VerifyResult(False, 0.0, None, "error:TypeError")
        verifier = self.math if self.with_code is None or _last_python_block(response) is None else self.with_code
        return verifier(outside_code(response), gold)


TOOL_PROTOCOL = (
    "You can run Python code: write a program in one ```python code block and end your turn; I run it and reply "
    "with what it printed. Each program runs on its own (nothing is kept between runs, no internet), so print() "
    "every value you need. You may run code at most {max_tool_calls} times. "
)
NATIVE_TOOL_PROTOCOL = (
    "You can run Python programs with the python tool; each run starts fresh (no files kept, no internet), so "
    "print() every value you need. You may call it in at most {max_tool_calls} turns. "
)
_BOXED_END = "put your final answer within \\boxed{{}}."
_DAPO_END = 'put your answer on its own line after "Answer:".'
GSM8K_PROTOCOL = (TOOL_PROTOCOL + "When you know the answer, reply without code and " + _BOXED_END,
                  NATIVE_TOOL_PROTOCOL + "When you know the answer, reply without a tool call and " + _BOXED_END)
DAPO_PROTOCOL = (TOOL_PROTOCOL + "When you know the answer, reply without code and " + _DAPO_END,
                 NATIVE_TOOL_PROTOCOL + "When you know the answer, reply without a tool call and " + _DAPO_END)
GSM8K_TOOL_TEMPLATE = "{question}\n\n{tool_protocol}"
DAPO_TOOL_TEMPLATE = DAPO_PREFIX + "{question}\n\n{tool_protocol}"


@dataclass(frozen=True, kw_only=True)
class PythonTool:
    """The interaction of the math tool tasks: run a turn's program, or end the episode at a final answer.

    A turn that commits to a final answer (the verdict of :class:`FinalAnswerVerifier` has ``extracted``)
    ends the episode with the verifier's score as reward; any program in that turn is not run. Otherwise the
    turn uses one of the problem's ``max_tool_calls`` (:class:`ToolRules`): its last ```` ```python ```` block
    (if any) runs in the sandbox and the reply is its stdout in an ```` ```output ```` block, at most
    ``output_chars`` characters (its start and end, the middle cut), with stderr's last ``error_lines`` lines
    when it failed. The turn after the last call must answer; a turn that does not ends the episode unsolved.

    Args:
        limits: the sandbox limits of one program run.
        isolation: ``"full"`` (bubblewrap; default) or ``"weak"`` (see ``docs/code_sandbox.md``).
        output_chars: the most characters of output a reply shows.
        error_lines: the last lines of stderr a failed run's reply shows.
        answer_hint: how the prompt asks for the final answer (repeated in replies).
        role: the chat role of the replies.

    Example:
        >>> tool = PythonTool(answer_hint="\\\\boxed{}", limits=SandboxLimits(wall_s=10.0))
        >>> problem = Problem("0", "6 x 7?", "42", {"max_tool_calls": 2})
        >>> history = History(problem, ({"role": "user", "content": "6 x 7?"},))
        >>> turn = tool.respond(history, Completion("```python\\nprint(6 * 7)\\n```"),
        ...                     VerifyResult(False, 0.0, None, "no_answer"))
        >>> print(turn.reply)
        ```output
        42
        ```
        You may run code 1 more time.
    """

    limits: SandboxLimits = field(default_factory=lambda: SandboxLimits(wall_s=10.0, max_output_bytes=1 << 16))
    isolation: str = "full"
    output_chars: int = 1000
    error_lines: int = 6
    answer_hint: str = "a final answer"
    role: str = "user"

    def __post_init__(self) -> None:
        _check_int("output_chars", self.output_chars, 80)
        _check_int("error_lines", self.error_lines, 1)

    def program(self, code: str) -> str:
        """Run a Python program in a sandbox (no files kept, no internet) and return what it printed.

        Args:
            code: the program; print() every value you need
        """
        return self.run(code)[0]

    def respond(self, history: History, action: Completion, verdict: VerifyResult) -> Turn:
        calls = int(history.problem.metadata["max_tool_calls"])
        left = calls - history.turn  # tool calls left, this turn's included
        if verdict.extracted is not None:
            return Turn("Final answer recorded.", float(verdict.score), done=True, solved=bool(verdict.correct),
                        role=self.role, info={"action": "answer", "tool_calls_left": left})
        if left <= 0:
            return Turn(f"No final answer: the episode is over (no code runs were left). Answer with {self.answer_hint}.",
                        0.0, done=True, role=self.role, info={"action": "none", "tool_calls_left": 0})
        code = _last_python_block(action.text)
        if code is None:
            reply = (f"No final answer and no complete ```python code block found: run code in a ```python block or "
                     f"give {self.answer_hint}.")
            info: dict[str, Any] = {"action": "none"}
        else:
            reply, info = self.run(code)
        left -= 1
        info["tool_calls_left"] = left
        reply += (f"\nYou may run code {left} more time{'s' if left > 1 else ''}." if left else
                  f"\nNo code runs left: give {self.answer_hint} now.")
        return Turn(reply, 0.0, role=self.role, info=info)

    def run(self, code: str) -> tuple[str, dict[str, Any]]:
        """Run a program in the sandbox: the reply (its output) and facts for the step info."""
        from dapo_env.verifiers import run_python

        run = run_python(code, limits=self.limits, isolation=self.isolation)
        shown = run.stdout
        if not run.ok and run.stderr.strip():
            shown += "\n".join(run.stderr.rstrip().splitlines()[-self.error_lines:]) + "\n"
        reply = f"```output\n{_cap(shown, self.output_chars)}```"
        if run.timed_out:
            reply += f"\nThe program did not finish within {self.limits.wall_s:g} s and was stopped."
        elif run.output_truncated:
            reply += "\nThe program printed too much and was stopped: print less."
        elif run.ok and not run.stdout.strip():
            reply += "\nThe program printed nothing: print() the values you need."
        return reply, {"action": "code", "exit_code": run.exit_code, "timed_out": run.timed_out}


def _last_python_block(text: str) -> str | None:
    from dapo_env.verifiers.code import extract_code

    return extract_code(text, require_fence=True)


def _cap(text: str, limit: int) -> str:
    """At most ``limit`` characters: the start and the end, the middle replaced by a note; ends with ``\\n``."""
    if len(text) > limit:
        half = limit // 2
        text = f"{text[:half]}\n... [{len(text) - 2 * half} characters cut] ...\n{text[-half:]}"
    return text if text.endswith("\n") or not text else text + "\n"


# --- the tasks ------------------------------------------------------------------------------------------
def python_tool_use(python: PythonTool) -> ToolUse:
    """The math tool tasks' interaction: the ``python`` tool in native formats, ``python`` itself (today's
    protocol) in the ``fenced`` format."""
    return ToolUse(tools=(tool(python.program, name="python"),), fenced=python, fenced_tool="python",
                   default_format="fenced")


_MBPP_VERIFIER = CodeVerifier()
_MBPP_FEEDBACK = CodeFeedback(verifier=_MBPP_VERIFIER)
MBPP_FEEDBACK = Task(
    name="MBPPFeedback",
    source=RulesSource(MBPP.source, FeedbackRules(), protocol=(FEEDBACK_SUFFIX, NATIVE_FEEDBACK_SUFFIX)),
    verifier=_MBPP_VERIFIER,
    prompt_template=MBPP_FEEDBACK_TEMPLATE,
    split=MBPP.split,
    description="Multi-turn MBPP: failing attempts get the failing tests' output, up to max_attempts "
                "(knobs: max_attempts, attempt_penalty, tool_format).",
    interaction=ToolUse(tools=(tool(_MBPP_FEEDBACK.run_tests, name="run_tests"),), fenced=_MBPP_FEEDBACK,
                        fenced_tool="run_tests", default_format="fenced", budget_knob="max_attempts"),
    reference_reader=MBPP.reference_reader, reference_columns=MBPP.reference_columns,
)
GSM8K_TOOL = Task(
    name="GSM8KTool",
    source=RulesSource(GSM8K.source, ToolRules(), protocol=GSM8K_PROTOCOL),
    # a turn without code commits as in GSM8K-v0; beside code only a box does
    verifier=FinalAnswerVerifier(MathVerifier(answer_format="auto"), with_code=MathVerifier(answer_format="boxed")),
    prompt_template=GSM8K_TOOL_TEMPLATE,
    split=GSM8K.split,
    description="Multi-turn GSM8K with a sandboxed Python tool; a final answer (boxed) ends the episode "
                "(knobs: max_tool_calls, tool_format).",
    interaction=python_tool_use(PythonTool(answer_hint="your final answer within \\boxed{}")),
    reference_reader=GSM8K.reference_reader,
)
DAPO_MATH_TOOL = Task(
    name="DAPOMathTool",
    source=RulesSource(DAPO_MATH.source, ToolRules(), protocol=DAPO_PROTOCOL),
    verifier=FinalAnswerVerifier(MathVerifier(answer_format="dapo")),
    prompt_template=DAPO_TOOL_TEMPLATE,
    split=DAPO_MATH.split,
    description="Multi-turn DAPO-Math-17k with a sandboxed Python tool; an 'Answer:' line ends the episode "
                "(knobs: max_tool_calls, tool_format).",
    interaction=python_tool_use(PythonTool(answer_hint='your answer on its own line after "Answer:"')),
    reference_reader=DAPO_MATH.reference_reader,
)



def program_feedback_task(base: Task, name: str) -> Task:
    """A program task (``CppPick-v0``, ``JSFunctions-v0``, or one of :func:`~dapo_env.tasks.program_tasks.program_task`)
    as a feedback task: its problems, its verifier, failing attempts answered with per-test feedback."""
    fence = getattr(base.verifier, "language", "python")
    interaction = CodeFeedback(verifier=base.verifier)
    protocol = (FEEDBACK_SUFFIX.replace("```python", f"```{fence}"),
                NATIVE_FEEDBACK_SUFFIX.replace("```python", f"```{fence}"))
    return Task(
        name=name, source=RulesSource(base.source, FeedbackRules(), protocol=protocol), verifier=base.verifier,
        prompt_template=base.prompt_template + "{tool_protocol}", split=base.split,
        description=f"Multi-turn {base.env_id}: failing attempts get per-test feedback (verdict, input, output), "
                    "up to max_attempts (knobs: max_attempts, attempt_penalty, tool_format, and the base task's).",
        interaction=ToolUse(tools=(tool(interaction.run_tests, name="run_tests"),), fenced=interaction,
                            fenced_tool="run_tests", default_format="fenced", budget_knob="max_attempts"))


CPP_PICK_FEEDBACK = program_feedback_task(CPP_PICK, "CppPickFeedback")
JS_FUNCTIONS_FEEDBACK = program_feedback_task(JS_FUNCTIONS, "JSFunctionsFeedback")

for _task in (MBPP_FEEDBACK, GSM8K_TOOL, DAPO_MATH_TOOL, CPP_PICK_FEEDBACK, JS_FUNCTIONS_FEEDBACK):
    register_task(_task)

__all__ = ["CPP_PICK_FEEDBACK", "CodeFeedback", "DAPO_MATH_TOOL", "JS_FUNCTIONS_FEEDBACK", "program_feedback_task", "DAPO_TOOL_TEMPLATE", "FEEDBACK_SUFFIX", "FeedbackRules",
           "FinalAnswerVerifier", "GSM8K_TOOL", "GSM8K_TOOL_TEMPLATE", "MBPP_FEEDBACK", "MBPP_FEEDBACK_TEMPLATE",
           "NATIVE_FEEDBACK_SUFFIX", "NATIVE_TOOL_PROTOCOL", "ProblemsWithRules", "PythonTool", "RulesSource", "TOOL_PROTOCOL",
           "ToolRules", "outside_code", "python_tool_use"]
