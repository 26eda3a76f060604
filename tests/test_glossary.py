"""One glossary (docs/concepts/glossary.md), held to the code: every ``Type.attribute`` it names exists on that
type of ``dapo_env.types``, the names other pages used to disagree on are spelled as the code spells them, and
the design page points to it instead of keeping a second table."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import dapo_env.types as types

ROOT = Path(__file__).resolve().parents[1]
GLOSSARY = (ROOT / "docs" / "concepts" / "glossary.md").read_text()


def _attributes(cls: type) -> set[str]:
    fields = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
    return fields | {name for name in dir(cls) if not name.startswith("_")}


def test_every_type_attribute_the_glossary_names_exists() -> None:
    named = set(re.findall(r"`([A-Z]\w+)\.(\w+)`", GLOSSARY))
    checked = [(cls, attr) for cls, attr in named if isinstance(getattr(types, cls, None), type)]
    assert len(checked) >= 4, "the glossary should name the types' attributes it defines"
    missing = [f"{cls}.{attr}" for cls, attr in checked if attr not in _attributes(getattr(types, cls))]
    assert not missing, f"the glossary names attributes the code lacks: {missing}"


def test_the_glossary_can_catch_a_wrong_name() -> None:
    assert "policy_version" not in _attributes(types.Completion)  # the name the second glossary had wrong


def test_the_design_page_keeps_no_second_glossary() -> None:
    design = (ROOT / "docs" / "DESIGN.md").read_text()
    section = design.split("## Glossary", 1)[1].split("\n## ", 1)[0]
    assert "concepts/glossary.md" in section and "| --- |" not in section


def test_one_word_per_concept() -> None:
    assert "**round**" in GLOSSARY and "generation round**" not in GLOSSARY
    assert "`Completion.weights_version`" in GLOSSARY and "`Group.policy_step`" in GLOSSARY
