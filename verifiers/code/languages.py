"""The languages the code sandbox runs: one registry entry each (compile and run commands, file names, limits).

A :class:`Language` says how a program in it becomes a run: the file its source goes to, an optional
compile command (run once per program, inside the sandbox, under its own ``compile_limits``; its output
file is carried into every test run read-only), the run command, the fence tags that name it in a
response, and what its runtime needs beyond the caller's limits (V8 reserves far more address space than
it uses). Commands name their executable bare (found on ``PATH`` when first used, and required to lie
under ``/usr`` so the sandbox sees it) or as ``{python}`` (this interpreter, which the sandbox binds);
``{dir}`` is the working folder and ``{memory_mb}`` the run's memory limit.

Built in: ``python`` (this interpreter), ``cpp`` (Debian's ``g++``, C++17, ``-O2``) and ``javascript``
(Debian's ``nodejs``). Adding one is one :func:`register_language` call.

Example:
    >>> get_language("c++").name, get_language("js").name
    ('cpp', 'javascript')
    >>> language_of_tag("py3")
    'python'
"""

from __future__ import annotations

import functools
import os
import shutil
from dataclasses import dataclass, field

from .sandbox import SandboxLimits, interpreter

_PLACEHOLDERS = frozenset({"dir", "memory_mb", "python"})


@dataclass(frozen=True, kw_only=True)
class Language:
    """One language of the sandbox (a registry entry).

    Args:
        name: the registry name (``"cpp"``); a task's ``language`` option names it (or one of ``tags``).
        tags: the fence tags that name it in a response (```` ```cpp ````), lower case; the name is one.
        source_file: where the program's source goes in the working folder (``"main.cpp"``).
        run: the run command; ``{dir}/<file>`` names files of the working folder.
        compile: the compile command (empty: interpreted); it must write ``binary_file``.
        binary_file: what ``compile`` produces, carried into each run (``"main"``).
        compile_limits: the compile run's limits (its own time and memory, not the tests').
        address_space_extra_mb: added to the run's ``memory_mb`` as its address-space limit (V8's
            reservations); the heap itself is capped by the run command (``{memory_mb}``).
        min_memory_mb: the smallest ``memory_mb`` the runtime starts with (checked when a verifier is built).
        min_processes: the smallest ``max_processes`` it starts with (its own threads count: node with one
            V8 worker thread has four; without them it hangs).
        package: what to install when the executable is missing (shown in the error).
        comment: how a line comment starts (used to label sources).

    Example:
        >>> Language(name="sh", tags=("sh",), source_file="main.sh", run=("sh", "{dir}/main.sh")).compiled
        False
    """

    name: str
    tags: tuple[str, ...]
    source_file: str
    run: tuple[str, ...]
    compile: tuple[str, ...] = ()
    binary_file: str = ""
    compile_limits: SandboxLimits = field(default_factory=lambda: SandboxLimits(
        wall_s=20.0, cpu_s=20, memory_mb=1536, disk_mb=128, max_processes=8, max_output_bytes=1 << 16))
    address_space_extra_mb: int = 0
    min_memory_mb: int = 64
    min_processes: int = 1
    package: str = ""
    comment: str = "#"

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("_", "").isalnum():
            raise ValueError(f"Language.name must be a plain word like 'cpp', got {self.name!r}")
        object.__setattr__(self, "tags", tuple(dict.fromkeys(t.lower() for t in (self.name, *self.tags))))
        if not self.run:
            raise ValueError(f"Language {self.name!r} needs a run command")
        if bool(self.compile) != bool(self.binary_file):
            raise ValueError(f"Language {self.name!r}: a compile command and its binary_file go together")
        for part in (*self.run, *self.compile):
            for name in _fields(part):
                if name not in _PLACEHOLDERS:
                    raise ValueError(f"Language {self.name!r}: unknown placeholder {{{name}}} in {part!r}; "
                                     f"valid: {sorted(_PLACEHOLDERS)}")

    @property
    def compiled(self) -> bool:
        return bool(self.compile)

    def missing(self) -> str | None:
        """Why this language cannot run here (an executable is not installed, with the install command),
        or ``None``."""
        for command in (self.compile, self.run):
            if command and not command[0].startswith("{"):
                if _executable(command[0]) is None:
                    hint = f" (Debian/Ubuntu: `apt-get install {self.package}`)" if self.package else ""
                    return f"{command[0]} is not installed or not under /usr{hint}"
        return None

    def command(self, which: str, *, memory_mb: int) -> tuple[str, ...]:
        """The ``"run"`` or ``"compile"`` command ready for :func:`~.sandbox.run_command` (``{dir}`` stays)."""
        parts = self.run if which == "run" else self.compile
        filled = [part.replace("{memory_mb}", str(memory_mb)).replace("{python}", interpreter()) for part in parts]
        if not filled[0].startswith(("/", "{dir}")):
            path = _executable(filled[0])
            if path is None:
                raise RuntimeError(f"language {self.name!r}: {self.missing()}")
            filled[0] = path
        return tuple(filled)


def _fields(part: str) -> list[str]:
    names, rest = [], part
    while "{" in rest:
        rest = rest.split("{", 1)[1]
        names.append(rest.split("}", 1)[0])
    return names


@functools.lru_cache(maxsize=None)
def _executable(name: str) -> str | None:
    """The absolute path of an executable the sandbox can see (under ``/usr``), or None."""
    found = shutil.which(name, path="/usr/local/bin:/usr/bin:/bin")
    if found is None:
        return None
    real = os.path.realpath(found)
    return found if real.startswith("/usr/") or found.startswith("/usr/") else None


_REGISTRY: dict[str, Language] = {}


def register_language(language: Language, *, replace: bool = False) -> Language:
    """Add a language to the registry (its name and every tag then find it)."""
    if not isinstance(language, Language):
        raise TypeError(f"register_language takes a Language, got {type(language).__name__}")
    if language.name in _REGISTRY and not replace:
        raise ValueError(f"language {language.name!r} is already registered; pass replace=True to replace it")
    for tag in language.tags:
        owner = language_of_tag(tag)
        if owner is not None and owner != language.name:
            raise ValueError(f"fence tag {tag!r} already names language {owner!r}")
    _REGISTRY[language.name] = language
    return language


def language_of_tag(tag: str) -> str | None:
    """The registered language a fence tag (or name) names, or None."""
    tag = tag.lower()
    return next((lang.name for lang in _REGISTRY.values() if tag in lang.tags), None)


def get_language(name: str) -> Language:
    """A registered language by name or fence tag; a clear error lists the registered ones."""
    found = language_of_tag(name) if isinstance(name, str) else None
    if found is None:
        raise ValueError(f"unknown language {name!r}; registered: {sorted(_REGISTRY)} "
                         "(add one with dapo_env.verifiers.code.languages.register_language)")
    return _REGISTRY[found]


def languages() -> tuple[str, ...]:
    """The registered languages' names."""
    return tuple(sorted(_REGISTRY))


PYTHON = register_language(Language(
    name="python", tags=("py", "python3", "py3"), source_file="main.py", run=("{python}", "-I", "{dir}/main.py")))
CPP = register_language(Language(
    name="cpp", tags=("c++", "cxx", "cc"), source_file="main.cpp", binary_file="main", package="g++",
    compile=("g++", "-std=c++17", "-O2", "-pipe", "-fmax-errors=3", "-fno-diagnostics-color", "-o", "{dir}/main",
             "{dir}/main.cpp"),
    run=("{dir}/main",), comment="//"))
JAVASCRIPT = register_language(Language(
    name="javascript", tags=("js", "node", "nodejs"), source_file="main.js", package="nodejs",
    run=("node", "--max-old-space-size={memory_mb}", "--v8-pool-size=1", "{dir}/main.js"),
    address_space_extra_mb=1024, min_memory_mb=128, min_processes=4, comment="//"))

__all__ = ["CPP", "JAVASCRIPT", "PYTHON", "Language", "get_language", "language_of_tag", "languages",
           "register_language"]
