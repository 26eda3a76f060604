"""The reference of a program task: stdin/stdout tests, function-call tests, a checker (JSON-serialisable).

Example:
    >>> tests = ProgramTests.from_value({"inputs": ["1 2\\n"], "outputs": ["3\\n"]})
    >>> tests.io[0].output, ProgramTests.from_value(tests.to_json()) == tests
    ('3\\n', True)
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dapo_env.types import CodeTests, InvalidReference

@dataclass(frozen=True, kw_only=True)
class IOTest:
    """One stdin/stdout test.

    Args:
        input: what the program reads on stdin.
        output: the expected stdout (compared by the verifier's mode, or given to the checker).
        weight: its share in ``scoring="weighted"`` (> 0).
        time_limit_s: its own wall-clock limit (default: the verifier's ``time_limit_s``).
    """

    __test__ = False

    input: str = ""
    output: str = ""
    weight: float = 1.0
    time_limit_s: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.input, str) or not isinstance(self.output, str):
            raise InvalidReference("IOTest input and output must be strings")
        _check_weight(self.weight)
        check_time(self.time_limit_s, "IOTest.time_limit_s")


@dataclass(frozen=True, kw_only=True)
class CallTest:
    """One function test: a call expression in the task's language and the JSON value it must return.

    Args:
        call: e.g. ``"add(1, 2)"``.
        expected: a JSON value (numbers compare numerically: ``3 == 3.0``; booleans only with booleans).
        weight: its share in ``scoring="weighted"``.
    """

    __test__ = False

    call: str
    expected: Any = None
    weight: float = 1.0

    def __post_init__(self) -> None:
        if not isinstance(self.call, str) or not self.call.strip():
            raise InvalidReference("CallTest.call must be a non-empty expression such as 'add(1, 2)'")
        try:
            json.dumps(self.expected, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise InvalidReference(f"CallTest.expected must be a JSON value ({exc})") from None
        _check_weight(self.weight)


@dataclass(frozen=True, kw_only=True)
class ProgramTests:
    """The reference of a program task: stdin/stdout tests and/or function tests, and an optional checker.

    Args:
        io: the stdin/stdout tests (each run in its own sandboxed run).
        calls: the function tests (all in one run; Python and JavaScript).
        checker: this problem's checker source (in the verifier's ``checker_language``); overrides the
            verifier's own ``checker``.

    Example:
        >>> ProgramTests.from_value({"inputs": ["1\\n"], "outputs": ["2\\n"]}).io[0].output
        '2\\n'
    """

    io: tuple[IOTest, ...] = ()
    calls: tuple[CallTest, ...] = ()
    checker: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "io", tuple(self.io))
        object.__setattr__(self, "calls", tuple(self.calls))
        if not self.io and not self.calls:
            raise InvalidReference("ProgramTests needs at least one test: pass io=(IOTest(...),) or calls=(...)")
        if not isinstance(self.checker, str):
            raise InvalidReference("ProgramTests.checker must be the checker program's source (a string)")

    @property
    def num_tests(self) -> int:
        return len(self.io) + len(self.calls)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable form; :meth:`from_value` reads it back."""
        return {"io": [{"input": t.input, "output": t.output, "weight": t.weight, "time_limit_s": t.time_limit_s}
                       for t in self.io],
                "calls": [{"call": t.call, "expected": t.expected, "weight": t.weight} for t in self.calls],
                "checker": self.checker}

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON (how datasets exported for TRL and verl hold it; the verifier reads it back)."""
        return json.dumps(self.to_dict(), ensure_ascii=False)

    @classmethod
    def from_value(cls, value: Any) -> ProgramTests:
        """Read the tests from a ``ProgramTests``, :class:`CodeTests` (its stdio pairs), a dict or its JSON:
        ``{"io": [{"input", "output", "weight"?, "time_limit_s"?}...], "calls": [{"call", "expected"}...],
        "checker"?}``, or the APPS/TACO/CodeContests form ``{"inputs": [...], "outputs": [...]}``
        (``"input"``/``"output"`` too), or a list of ``[input, output]`` pairs."""
        if isinstance(value, ProgramTests):
            return value
        if isinstance(value, CodeTests):
            if value.tests:
                raise InvalidReference("ProgramVerifier runs stdin/stdout and call tests; Python asserts "
                                       "(CodeTests.tests) are CodeVerifier's")
            return cls(io=tuple(IOTest(input=i, output=o) for i, o in value.stdio))
        if isinstance(value, (str, bytes)):
            try:
                value = json.loads(value)
            except ValueError:
                raise InvalidReference("program tests given as a string must be JSON (see ProgramTests.from_value)") \
                    from None
        if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
            value = {"io": list(value)}
        if not isinstance(value, Mapping):
            raise InvalidReference(f"cannot read program tests from a {type(value).__name__}: pass ProgramTests, "
                                   "a dict {'io': [...], 'calls': [...]}, {'inputs': [...], 'outputs': [...]} or JSON")
        return cls(io=_io_tests(value), calls=_call_tests(value.get("calls") or ()),
                   checker=value.get("checker") or "")


def _io_tests(value: Mapping[str, Any]) -> tuple[IOTest, ...]:
    inputs, outputs = value.get("inputs", value.get("input")), value.get("outputs", value.get("output"))
    if inputs is not None or outputs is not None:
        if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs):
            raise InvalidReference("'inputs' and 'outputs' must be lists of the same length")
        weights = value.get("weights") or [1.0] * len(inputs)
        return tuple(IOTest(input=_text(i), output=_text(o), weight=float(w))
                     for i, o, w in zip(inputs, outputs, weights))
    tests = []
    for item in value.get("io") or value.get("tests") or ():
        if isinstance(item, Mapping):
            unknown = set(item) - {"input", "output", "weight", "time_limit_s"}
            if unknown:
                raise InvalidReference(f"unknown IOTest field(s) {sorted(unknown)}; valid: input, output, weight, "
                                       "time_limit_s")
            if "output" not in item:
                raise InvalidReference("an io test needs its expected 'output' (and usually an 'input')")
            tests.append(IOTest(input=_text(item.get("input", "")), output=_text(item.get("output", "")),
                                weight=item.get("weight", 1.0), time_limit_s=item.get("time_limit_s")))
        elif isinstance(item, Sequence) and len(item) == 2:
            tests.append(IOTest(input=_text(item[0]), output=_text(item[1])))
        else:
            raise InvalidReference(f"an io test must be {{'input', 'output'}} or an [input, output] pair, got {item!r}"[:200])
    return tuple(tests)


def _call_tests(items: Any) -> tuple[CallTest, ...]:
    tests = []
    for item in items:
        if isinstance(item, Mapping) and "call" in item:
            tests.append(CallTest(call=item["call"], expected=item.get("expected"), weight=item.get("weight", 1.0)))
        elif isinstance(item, Sequence) and not isinstance(item, str) and len(item) == 2:
            tests.append(CallTest(call=item[0], expected=item[1]))
        else:
            raise InvalidReference(f"a call test must be {{'call', 'expected'}} or a [call, expected] pair, got {item!r}"[:200])
    return tuple(tests)


def _text(value: Any) -> str:
    if isinstance(value, list):  # some datasets hold outputs as lists of lines
        return "\n".join(map(str, value)) + "\n"
    if not isinstance(value, str):
        raise InvalidReference(f"test input/output must be a string, got {type(value).__name__}")
    return value


def _check_weight(weight: Any) -> None:
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight) or weight <= 0:
        raise InvalidReference(f"a test's weight must be a number > 0, got {weight!r}")


def check_time(value: Any, name: str) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 600):
        raise ValueError(f"{name} must be None or seconds in (0, 600], got {value!r}")


__all__ = ["CallTest", "IOTest", "ProgramTests", "check_time"]
