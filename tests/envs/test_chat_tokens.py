"""ChatTokens on its own: prompt and reply deltas, the end-of-turn token the model sampled, templates with and
without text after it, tool replies, and the errors and fallback for tokenizers it cannot slice."""

from __future__ import annotations

import doctest
import re

import pytest
from multiturn_helpers import CHATML, ROLE_LINES, bpe_chat_tokenizer, char_chat_tokenizer

import dapo_env.chat_tokens
from dapo_env import ChatTokens

# Llama-3 style: the assistant's turn ends with <|eot_id|> and nothing after it.
HEADERS = (
    "{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n{{ m['content'] }}<|eot_id|>"
    "{% endfor %}{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)

# Tool messages rendered as a user turn wrapped in tags (as Qwen's templates do).
CHATML_TOOLS = (
    "{% for m in messages %}{% if m['role'] == 'tool' %}<|im_start|>user\n<tool_response>\n{{ m['content'] }}\n"
    "</tool_response><|im_end|>\n{% else %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def test_the_module_docstrings_run() -> None:
    assert doctest.testmod(dapo_env.chat_tokens, optionflags=doctest.ELLIPSIS).failed == 0


def test_chatml_reply_after_the_sampled_im_end_keeps_the_newline_the_template_adds() -> None:
    tok = bpe_chat_tokenizer(CHATML)
    chat = ChatTokens(tok)
    assert chat.closer_text == "<|im_end|>\n"
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    text, ids = chat.reply("higher", stop_token=im_end)
    assert text == "\n<|im_start|>user\nhigher<|im_end|>\n<|im_start|>assistant\n"
    assert tok.decode(ids) == text and ids[0] != im_end
    cut_text, cut_ids = chat.reply("higher", stop_token=None)
    assert cut_text == "<|im_end|>" + text and cut_ids == (im_end,) + ids


def test_a_closer_with_text_before_the_end_token() -> None:
    """ROLE_LINES ends an assistant line with "\\n<eos>": a model that stops with <eos> (with or without the
    newline) has closed its turn; the delta starts after the closer."""
    tok = char_chat_tokenizer(ROLE_LINES)
    chat = ChatTokens(tok)
    assert chat.closer_text == "\n<eos>"
    text, ids = chat.reply("higher", stop_token=tok.eos_token_id)
    assert text == "user: higher\nassistant: " and tok.decode(ids) == text
    assert chat.reply("higher", stop_token=None)[0] == "\n<eos>user: higher\nassistant: "
    newline = tok.convert_tokens_to_ids("\n")
    assert chat.reply("higher", stop_token=newline)[0] == "\n<eos>user: higher\nassistant: "  # not a stop token


def test_a_template_with_nothing_after_the_end_token() -> None:
    tok = bpe_chat_tokenizer(HEADERS)
    eot = "<|eot_id|>"
    tok.add_special_tokens({"additional_special_tokens": ["<|start_header_id|>", "<|end_header_id|>", eot]})
    chat = ChatTokens(tok, stop_token_ids=[tok.convert_tokens_to_ids(eot)])
    assert chat.closer_text == eot
    text, _ = chat.reply("lower", stop_token=tok.convert_tokens_to_ids(eot))
    assert text == "<|start_header_id|>user<|end_header_id|>\n\nlower<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
    prompt_text, prompt_ids = chat.prompt("Guess.")
    assert tok.decode(prompt_ids) == prompt_text and prompt_text.endswith("assistant<|end_header_id|>\n\n")


def test_tool_replies_use_the_templates_tool_rendering() -> None:
    tok = bpe_chat_tokenizer(CHATML_TOOLS)
    chat = ChatTokens(tok)
    text, ids = chat.reply("42\n", role="tool", stop_token=tok.eos_token_id)
    assert text == "\n<|im_start|>user\n<tool_response>\n42\n\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    assert tok.decode(ids) == text


def test_special_ids_come_from_the_tokenizer() -> None:
    tok = bpe_chat_tokenizer(CHATML)
    chat = ChatTokens(tok)
    for token in ("<|im_end|>", "<|im_start|>", "<|endoftext|>"):
        assert tok.convert_tokens_to_ids(token) in chat.stop_token_ids


class _Toy:
    """A toy tokenizer whose encoding merges "r" + "\\n" into one token: slicing at a message boundary that
    falls inside the merge is impossible, so ChatTokens warns once and tokenizes the delta on its own."""

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=False):
        return "".join(f"{m['role']}|{m['content']}\n" for m in messages) + ("assistant|" if add_generation_prompt else "")

    def encode(self, text, add_special_tokens=False):
        return [1000 if piece == "r\n" else ord(piece) for piece in re.findall(r"r\n|.|\n", text, flags=re.DOTALL)]


def test_a_tokenizer_that_merges_across_the_boundary_falls_back_with_one_warning() -> None:
    with pytest.warns(RuntimeWarning, match="merges tokens across the end of an assistant message"):
        chat = ChatTokens(_Toy())
        text, ids = chat.reply("higher")
    assert text == "\nuser|higher\nassistant|" and ids == tuple(chat.encode(text))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        chat.reply("lower")  # warned once per ChatTokens


def test_errors_name_the_fix() -> None:
    with pytest.raises(TypeError, match="apply_chat_template and encode"):
        ChatTokens(object())

    class NoContent(_Toy):
        def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=False):
            return "".join(m["role"] for m in messages)

    with pytest.raises(ValueError, match="verbatim"):
        ChatTokens(NoContent())

    class Tokens(_Toy):
        def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=False):
            return [1, 2, 3]

    with pytest.raises(TypeError, match="expected str"):
        ChatTokens(Tokens())
