"""Helpers for the multi-turn tests: tokenizers with chat templates built offline, scripted policies, and a
scripted engine that emits token ids and records every context it was given."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from dapo_env import Completion, TurnRequest

# ChatML (Qwen2.5-style): the assistant's turn ends with <|im_end|>, and the template adds "\n" after it.
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# A Qwen3-style template that REWRITES earlier turns: an assistant message before the last user message loses
# its <think>...</think> block; `enable_thinking=False` adds an empty think block to the generation prompt.
THINK_DROPPING = (
    "{%- set ns = namespace(last_user=-1) -%}"
    "{%- for m in messages -%}{%- if m['role'] == 'user' -%}{%- set ns.last_user = loop.index0 -%}{%- endif -%}"
    "{%- endfor -%}"
    "{%- for m in messages -%}"
    "{%- set content = m['content'] -%}"
    "{%- if m['role'] == 'assistant' and loop.index0 < ns.last_user and '</think>' in content -%}"
    "{%- set content = content.split('</think>')[-1].lstrip('\n') -%}"
    "{%- endif -%}"
    "{{- '<|im_start|>' + m['role'] + '\n' + content + '<|im_end|>\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}"
    "{%- if enable_thinking is defined and not enable_thinking -%}{{- '<think>\n\n</think>\n\n' -}}{%- endif -%}"
    "{%- endif -%}"
)

# The tiny default model's style: BOS, "role: content" lines, EOS after an assistant line: the closer after
# the assistant's content is "\n<eos>" (two tokens, the first not a special token).
ROLE_LINES = (
    "{{ bos_token }}{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n"
    "{% if m['role'] == 'assistant' %}{{ eos_token }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)

_CORPUS = [
    "I am thinking of an integer from 1 to 16. Find it in at most 5 guesses. After each guess I answer "
    '"higher" (my number is larger), "lower" (it is smaller) or "correct". Give one guess per turn as '
    '"Answer: <integer>".',
    "<think>\nlow=1 high=16 so the middle is 8\n</think>\n\nAnswer: 8",
    "higher\nlower\ncorrect\nuser\nassistant\nsystem\n\n",
    "no guess found: answer with \"Answer: <integer>\", an integer from 1 to 16",
    "Compute 12+7. Answer: 19 Answer: 12 Answer: 4 Answer: 14 Answer: 15 Answer: 13 Answer: 11",
]


SAMPLES = Path(__file__).resolve().parents[2] / "examples" / "data"
# The multi-turn ids whose problems come from a dataset: the shipped samples make them run offline.
OFFLINE_DATA = {
    "MBPPFeedback-v0": {"data_files": str(SAMPLES / "mbpp_sample.jsonl")},
    "GSM8KTool-v0": {"data_files": str(SAMPLES / "gsm8k_sample.jsonl")},
    "DAPOMathTool-v0": {"data_files": str(SAMPLES / "dapo_math_17k_sample.jsonl")},
}


def offline_kwargs(env_id: str) -> dict[str, Any]:
    """``gym.make`` keywords that load ``env_id`` offline (none for procedural ids)."""
    return dict(OFFLINE_DATA.get(env_id, {}))


def bpe_chat_tokenizer(template: str) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer trained here on a small corpus (merges across spaces, digits and newlines),
    with ChatML special tokens and ``template`` as its chat template."""
    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=special, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    backend.train_from_iterator(_CORPUS * 20, trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                  extra_special_tokens=["<|im_start|>"])
    tok.chat_template = template
    return tok


def char_chat_tokenizer(template: str = ROLE_LINES) -> PreTrainedTokenizerFast:
    """A character-level tokenizer (one token per character) with <bos>/<eos> and ``template``."""
    chars = sorted({c for text in _CORPUS for c in text} | set("0123456789:+-=<>/_ \n") |
                   set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"))
    vocab = {"<pad>": 0, "<bos>": 1, "<eos>": 2, "<unk>": 3}
    for c in chars:
        vocab.setdefault(c, len(vocab))
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    backend.decoder = decoders.Fuse()
    backend.add_special_tokens(["<pad>", "<bos>", "<eos>", "<unk>"])
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>",
                                  unk_token="<unk>", clean_up_tokenization_spaces=False)
    tok.chat_template = template
    return tok


def replies_of(messages: Sequence[dict[str, str]]) -> list[str]:
    """The environment's replies in a conversation (every user message after the prompt)."""
    users = [m["content"] for m in messages if m["role"] in ("user", "tool")]
    return users[1:]


class Bisection:
    """Bisects [1, n] from the replies so far; optionally thinks out loud in a <think> block."""

    def __init__(self, n: int = 16, think: bool = False) -> None:
        self.n, self.think = n, think

    def guess(self, guesses: Sequence[int], replies: Sequence[str]) -> int:
        low, high = 1, self.n
        for g, reply in zip(guesses, replies):
            if reply == "higher":
                low = g + 1
            elif reply == "lower":
                high = g - 1
        return (low + high) // 2

    def text(self, guesses: Sequence[int], replies: Sequence[str]) -> str:
        g = self.guess(guesses, replies)
        return f"<think>\nturn {len(guesses)}: the middle is {g}\n</think>\n\nAnswer: {g}" if self.think else f"Answer: {g}"


def guesses_in(messages: Sequence[dict[str, str]]) -> list[int]:
    return [int(re.findall(r"Answer: (-?\d+)", m["content"])[-1]) for m in messages if m["role"] == "assistant"]


class ScriptedEngine:
    """A stand-in for a rollout engine: for each request, writes the policy's text as token ids followed by the
    end-of-turn token, with made-up log-probs, and records the exact context it was asked to continue."""

    def __init__(self, tokenizer: Any, policy: Callable[[TurnRequest], str], *, stop_id: int | None = None,
                 cut_turns: Sequence[int] = ()) -> None:
        self.tokenizer, self.policy = tokenizer, policy
        self.stop_id = tokenizer.eos_token_id if stop_id is None else stop_id
        self.cut_turns = set(cut_turns)  # turns the engine "cuts at its limit": no stop token, finish "length"
        self.contexts: dict[tuple[str, int], tuple[int, ...]] = {}
        self.sampled: dict[tuple[str, int], tuple[tuple[int, ...], tuple[float, ...]]] = {}
        self.calls: list[list[str]] = []

    def __call__(self, requests: list[TurnRequest]) -> list[Completion]:
        self.calls.append([r.key for r in requests])
        return [self.turn(r) for r in requests]

    def turn(self, request: TurnRequest) -> Completion:
        assert request.context_token_ids is not None
        text = self.policy(request)
        cut = request.turn in self.cut_turns
        ids = tuple(self.tokenizer.encode(text, add_special_tokens=False)) + (() if cut else (self.stop_id,))
        logprobs = tuple(-0.01 * (k + 1) - 0.001 * request.turn for k in range(len(ids)))
        self.contexts[(request.key, request.turn)] = request.context_token_ids
        self.sampled[(request.key, request.turn)] = (ids, logprobs)
        return Completion(text, num_tokens=len(ids), finish_reason="length" if cut else "stop", token_ids=ids,
                          logprobs=logprobs)


def bisection_policy(n: int = 16, think: bool = False) -> Callable[[TurnRequest], str]:
    """A request -> text policy that bisects from the conversation in the request."""
    bisect = Bisection(n, think)

    def policy(request: TurnRequest) -> str:
        messages = [m for m in request.messages if m["role"] != "system"]
        return bisect.text(guesses_in(messages), replies_of(messages))

    return policy


def learner_view(traj: Any) -> list[tuple[tuple[int, ...], int, float]]:
    """What a learner builds from a trajectory: for every sampled token, (the tokens before it, the token,
    its engine log-prob)."""
    sequence = traj.prompt_token_ids + traj.token_ids
    start = len(traj.prompt_token_ids)
    return [(sequence[:start + p], traj.token_ids[p], traj.logprobs[p])
            for p, m in enumerate(traj.sampled_mask) if m == 1]


def engine_view(engine: ScriptedEngine, key: str, turns: int) -> list[tuple[tuple[int, ...], int, float]]:
    """The same triples from the engine's side: its context for each turn, extended by what it sampled."""
    out = []
    for t in range(turns):
        context = engine.contexts[(key, t)]
        ids, logprobs = engine.sampled[(key, t)]
        out += [(context + ids[:k], ids[k], logprobs[k]) for k in range(len(ids))]
    return out
