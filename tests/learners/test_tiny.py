from __future__ import annotations

import pytest
import torch

from dapo_env.learners.models.tiny import (
    DEFAULT_ALPHABET,
    build_tiny_model,
    build_tokenizer,
    load_tiny,
    num_parameters,
    save_tiny,
)


def test_char_tokenizer_round_trip_and_specials() -> None:
    tok = build_tokenizer()
    text = "What is 12+7? Answer: 19\n"
    ids = tok(text)["input_ids"]
    assert len(ids) == len(text)  # one token per character, no BOS/EOS added
    assert tok.decode(ids) == text
    assert (tok.pad_token_id, tok.bos_token_id, tok.eos_token_id) == (0, 1, 2)
    assert len(tok) == 4 + len(set(DEFAULT_ALPHABET))
    assert tok.decode([tok.bos_token_id, *ids, tok.eos_token_id], skip_special_tokens=True) == text


def test_corpus_vocabulary_and_unknown_characters() -> None:
    tok = build_tokenizer(["ab", "ba c"])
    assert tok("abc")["input_ids"] == [4, 5, 7]
    assert tok("z")["input_ids"] == [tok.unk_token_id]
    with pytest.raises(ValueError, match="non-empty"):
        build_tokenizer("")


def test_chat_template() -> None:
    tok = build_tokenizer()
    text = tok.apply_chat_template(
        [{"role": "user", "content": "1+1?"}], tokenize=False, add_generation_prompt=True
    )
    assert text == "<bos>user: 1+1?\nassistant: "


def test_chat_template_renders_openai_tool_calls_as_the_hermes_text_the_model_wrote() -> None:
    from dapo_env.tools import format_tool_call, to_openai_messages

    tok = build_tokenizer()
    written = format_tool_call("hermes", [("lookup", {"key": "a"}), ("lookup", {"key": "b"})])
    episode = [{"role": "user", "content": "Keys a, b?"}, {"role": "assistant", "content": written},
               {"role": "tool", "content": "3"}, {"role": "tool", "content": "4"}]
    wire = to_openai_messages(episode, "hermes")
    assert wire[1]["content"] is None and len(wire[1]["tool_calls"]) == 2
    render = lambda msgs: tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)  # noqa: E731
    assert render(wire) == render(episode) == f"<bos>user: Keys a, b?\nassistant: {written}\n<eos>tool: 3\ntool: 4\nassistant: "
    # the transformers form (arguments as a dict, no "function" wrapper) and text beside the calls
    hf = [{"role": "assistant", "content": "Looking.", "tool_calls": [{"name": "lookup", "arguments": {"key": "a"}}]}]
    assert render(hf) == ('<bos>assistant: Looking.\n<tool_call>\n{"name": "lookup", "arguments": {"key": "a"}}\n'
                          '</tool_call>\n<eos>assistant: ')
    parts = [{"role": "user", "content": [{"type": "text", "text": "1+"}, {"type": "image_url"}, {"type": "text", "text": "1?"}]}]
    assert render(parts) == "<bos>user: 1+1?\nassistant: "


def test_model_shape_and_validation() -> None:
    tok = build_tokenizer()
    model = build_tiny_model(tok, hidden_size=64, layers=2, heads=2, seed=0)
    assert model.config.head_dim == 32
    assert model.config.vocab_size == len(tok)
    assert 50_000 < num_parameters(model) < 3_000_000
    out = model(torch.tensor([[1, 5, 6]])).logits
    assert out.shape == (1, 3, len(tok))
    with pytest.raises(ValueError, match="head dim"):
        build_tiny_model(tok, hidden_size=64, heads=4)
    with pytest.raises(ValueError, match="divisible"):
        build_tiny_model(tok, hidden_size=64, heads=3)


def test_seeded_init_is_reproducible_and_leaves_global_rng() -> None:
    tok = build_tokenizer()
    state = torch.random.get_rng_state()
    a = build_tiny_model(tok, seed=3)
    assert torch.equal(state, torch.random.get_rng_state())
    b = build_tiny_model(tok, seed=3)
    c = build_tiny_model(tok, seed=4)
    wa, wb, wc = (m.model.embed_tokens.weight for m in (a, b, c))
    assert torch.equal(wa, wb) and not torch.equal(wa, wc)


def test_save_load_round_trip(tmp_path) -> None:
    tok = build_tokenizer()
    model = build_tiny_model(tok, seed=0)
    save_tiny(model, tok, tmp_path / "tiny")
    model2, tok2 = load_tiny(tmp_path / "tiny")
    text = "3*4=12"
    assert tok2(text)["input_ids"] == tok(text)["input_ids"]
    assert tok2.eos_token_id == tok.eos_token_id and tok2.pad_token_id == tok.pad_token_id
    assert tok2.chat_template == tok.chat_template
    x = torch.tensor([[1, 5, 6, 7, 8]])
    torch.testing.assert_close(model(x).logits, model2(x).logits, rtol=0, atol=0)
