from __future__ import annotations

import pickle

import pytest
from gymnasium.vector.utils import (
    batch_space,
    concatenate,
    create_empty_array,
    create_shared_memory,
    iterate,
    read_from_shared_memory,
)

from dapo_env.spaces import UnicodeText


@pytest.mark.parametrize("text", ["", "Compute $\\frac{1}{2}$\n", "答案是 42 🙂", "a\tb\x00c", " " * 50])
def test_contains_any_unicode_string(text: str) -> None:
    assert UnicodeText(max_length=100).contains(text)


def test_rejects_non_strings_and_lengths_out_of_range() -> None:
    space = UnicodeText(max_length=5, min_length=2)
    assert not space.contains(b"abc")
    assert not space.contains(3)
    assert not space.contains("a")
    assert not space.contains("abcdef")
    assert space.contains("abcde")


def test_sample_is_seeded_printable_and_within_bounds() -> None:
    a, b = UnicodeText(max_length=30, seed=7), UnicodeText(max_length=30, seed=7)
    samples = [a.sample() for _ in range(50)]
    assert samples == [b.sample() for _ in range(50)]
    assert all(a.contains(s) and s.isprintable() for s in samples)
    assert any(not s.isascii() for s in samples)
    assert len(set(samples)) > 40


def test_invalid_arguments_say_what_to_fix() -> None:
    with pytest.raises(ValueError, match="max_length"):
        UnicodeText(max_length=1, min_length=3)
    with pytest.raises(ValueError, match="min_length"):
        UnicodeText(min_length=-1)
    with pytest.raises(ValueError, match="mask"):
        UnicodeText().sample(mask=1)


def test_equality_pickle_and_json() -> None:
    space = UnicodeText(max_length=9)
    assert space == UnicodeText(max_length=9) and space != UnicodeText(max_length=10)
    assert pickle.loads(pickle.dumps(space)) == space
    assert space.from_jsonable(space.to_jsonable(["x", "ü"])) == ["x", "ü"]


def test_vector_utils_batch_strings_as_tuples() -> None:
    space = UnicodeText(max_length=100, seed=0)
    batched = batch_space(space, 3)
    items = ["a b", "$x^2$", "答"]
    assert batched.contains(tuple(items))
    out = create_empty_array(space, 3)
    assert concatenate(space, items, out) == tuple(items)
    assert list(iterate(batched, tuple(items))) == items
    assert tuple(read_from_shared_memory(space, create_shared_memory(space, 3), 3)) == ("", "", "")
