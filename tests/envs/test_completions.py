"""dapo_env.completions: generated token ids -> Completion, with the learner engines' EOS conventions."""

from __future__ import annotations

import numpy as np
import pytest

from dapo_env import ReasoningEnv, completion_from_token_ids, completions_from_token_ids
from dapo_env.completions import eos_ids_of
from dapo_env.types import Completion

EOS, PAD = 2, 0


def test_hand_worked_rows() -> None:
    rows = [
        [5, 6, EOS, PAD, PAD],  # stopped: EOS counted, padding dropped
        [5, 9, 9, 9, 9],  # cut at the limit without EOS
        [5, 6, PAD, PAD, PAD],  # stopped early without EOS (a stop string), padded
        [EOS, EOS, PAD, PAD, PAD],  # an empty response that stopped at once
        [5, 7, 6, 7, EOS],  # an EOS exactly at the limit is a stop
    ]
    out = completions_from_token_ids(np.array(rows), max_response_tokens=5, eos_token_ids=[EOS, 7], pad_token_id=PAD,
                                     texts=["a", "b", "c", "", "d"], logprobs=[[-0.5] * 5] * 5)
    assert [(c.token_ids, c.num_tokens, c.finish_reason) for c in out] == [
        ((5, 6, EOS), 3, "stop"),
        ((5, 9, 9, 9, 9), 5, "length"),
        ((5, 6), 2, "stop"),
        ((EOS,), 1, "stop"),
        ((5, 7), 2, "stop"),  # 7 is an EOS id too: the first of ANY of them ends the response
    ]
    assert [len(c.logprobs or ()) for c in out] == [3, 5, 2, 1, 2]
    assert [c.text for c in out] == ["a", "b", "c", "", "d"]


def test_decoding_with_a_tokenizer_drops_the_eos_from_the_text() -> None:
    pytest.importorskip("torch")
    from dapo_env.learners.models.tiny import build_tokenizer

    tok = build_tokenizer()
    ids = tok("Answer: 4")["input_ids"]
    stopped = completion_from_token_ids(ids + [tok.eos_token_id, tok.pad_token_id], max_response_tokens=20, tokenizer=tok)
    assert stopped.text == "Answer: 4" and stopped.num_tokens == len(ids) + 1 and not stopped.truncated
    cut = completion_from_token_ids(ids[:5], max_response_tokens=5, tokenizer=tok, prompt_token_ids=np.array([1, 5]))
    assert cut.text == "Answer: 4"[:5] and cut.truncated and cut.prompt_token_ids == (1, 5)
    assert eos_ids_of(tok, eos_token_ids=[9]) == frozenset({tok.eos_token_id, 9})


def test_same_completions_as_the_learner_engine() -> None:
    torch = pytest.importorskip("torch")
    from dapo_env.learners.engines import HFEngine, SamplingParams
    from dapo_env.learners.models.tiny import build_tiny_model, build_tokenizer

    tok = build_tokenizer()
    stop_ids = tok.convert_tokens_to_ids(list("aeiou"))  # frequent stops, so both finish reasons occur
    engine = HFEngine(build_tiny_model(tok, seed=0), tok, eos_token_ids=stop_ids)
    max_response_tokens = 6
    groups = engine.generate(["Compute 1+1.", "Sort 3 1 2"], 8, SamplingParams(max_response_tokens=max_response_tokens, seed=0))
    ours = [c for group in groups for c in group]
    # the same ids as a padded (B, T) tensor, as a hand-written loop around model.generate would hold them
    padded = torch.full((len(ours), max_response_tokens), tok.pad_token_id)
    for row, c in enumerate(ours):
        padded[row, : len(c.token_ids)] = torch.tensor(c.token_ids)
    theirs = completions_from_token_ids(padded, max_response_tokens=max_response_tokens, tokenizer=tok, eos_token_ids=stop_ids)
    assert {c.finish_reason for c in ours} == {"stop", "length"}
    for a, b in zip(ours, theirs):
        assert (b.text, b.num_tokens, b.finish_reason, b.token_ids) == (a.text, a.num_tokens, a.finish_reason, a.token_ids)


def test_the_env_reads_length_and_truncation_from_it() -> None:
    env = ReasoningEnv("Arithmetic-v0", max_response_tokens=4, size=10)
    for ids, truncated in (([5, 6, EOS], False), ([5, 6, 7, 8], True)):
        env.reset(seed=0)
        completion = completion_from_token_ids(ids, max_response_tokens=4, eos_token_ids=EOS, text="Answer: 0")
        info = env.step(completion)[4]
        assert info["response_length"] == len(ids) and info["response_truncated"] is truncated


def test_errors_name_the_fix() -> None:
    with pytest.raises(ValueError, match="max_response_tokens must be a positive int"):
        completion_from_token_ids([1], max_response_tokens=0, eos_token_ids=EOS, text="")
    with pytest.raises(ValueError, match="tokenizer=.*text="):
        completion_from_token_ids([1], max_response_tokens=3, eos_token_ids=EOS)
    with pytest.raises(ValueError, match="no EOS id"):
        completion_from_token_ids([1], max_response_tokens=3, text="x")
    with pytest.raises(ValueError, match="only the response's ids"):
        completion_from_token_ids([1, 1, 1, 1], max_response_tokens=3, eos_token_ids=EOS, text="x")
    with pytest.raises(ValueError, match="one per generated id"):
        completion_from_token_ids([1, 1, EOS], max_response_tokens=3, eos_token_ids=EOS, text="x", logprobs=[0.0])
    with pytest.raises(ValueError, match="2 rows of token ids but 1 texts"):
        completions_from_token_ids([[1], [2]], max_response_tokens=3, eos_token_ids=EOS, texts=["x"])
    assert isinstance(completion_from_token_ids((), max_response_tokens=1, eos_token_ids=EOS, text=""), Completion)
