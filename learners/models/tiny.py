"""A tiny character-level tokenizer and a random-init Llama model, built locally (no downloads).

Used by tests, the tiny default training run and the CPU benchmarks. Both round-trip through
``save_pretrained`` / ``from_pretrained`` so ``--model PATH`` (and vLLM) can load the folder.

Example:
    >>> tok = build_tokenizer()
    >>> model = build_tiny_model(tok, hidden_size=64, layers=2, heads=2, seed=0)
    >>> tok.decode(tok("1+2=3")["input_ids"])
    '1+2=3'
"""

from __future__ import annotations

import string
from collections.abc import Iterable
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders
from tokenizers.models import BPE
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

BOS, EOS, PAD, UNK = "<bos>", "<eos>", "<pad>", "<unk>"
SPECIAL_TOKENS = (PAD, BOS, EOS, UNK)  # ids 0, 1, 2, 3

#: Printable ASCII (digits, letters, punctuation, space, newline): enough for procedural maths prompts.
DEFAULT_ALPHABET = string.digits + string.ascii_letters + string.punctuation + " \n"

#: A minimal chat template: ``<bos>`` then ``role: content`` lines, and ``assistant:`` to prompt a reply. Tools
#: given through ``apply_chat_template(..., tools=...)`` are rendered compactly (a character-level model pays
#: for every character) as one first line, ``tools: lookup(key), run_tests(code)``: each tool's name and its
#: parameters' names; without tools the rendering is unchanged. A model answers with a call in any native
#: format (``tool_format="llama3"`` is the shortest) and tool results come back as ``tool: ...`` lines. An
#: assistant message in the OpenAI form (``content: None`` and ``tool_calls``, as a chat server receives earlier
#: turns) renders its calls in the Hermes form (``<tool_call>`` JSON ``</tool_call>``, what ``format_tool_call``
#: writes), so a served tiny model that calls in Hermes sees the text it wrote; Hermes because vLLM's ``hermes``
#: parser needs no special token (``llama3_json`` needs ``<|python_tag|>`` in the vocabulary). Content given as
#: OpenAI parts renders its text parts.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% if tools %}tools: "
    "{% for t in tools %}{% set f = t['function'] if t['function'] is defined else t %}"
    "{{ f['name'] }}({{ (f['parameters']['properties'] if f['parameters'] is defined and f['parameters']['properties'] "
    "is defined else {}) | list | join(', ') }}){% if not loop.last %}, {% endif %}{% endfor %}{{ '\\n' }}{% endif %}"
    "{% for message in messages %}"
    "{{ message['role'] }}: {% if message['content'] is string %}{{ message['content'] }}"
    "{% elif message['content'] is iterable and message['content'] is not mapping %}"
    "{% for part in message['content'] %}{% if part is mapping and part['type'] == 'text' %}{{ part['text'] }}"
    "{% endif %}{% endfor %}{% endif %}"
    "{% if message['tool_calls'] is defined and message['tool_calls'] %}"
    "{% if message['content'] is string and message['content'] %}{{ '\\n' }}{% endif %}"
    "{% for c in message['tool_calls'] %}{% set f = c['function'] if c['function'] is defined else c %}"
    "{{ '<tool_call>\\n' }}{\"name\": {{ f['name'] | tojson }}, \"arguments\": "
    "{% if f['arguments'] is string %}{{ f['arguments'] }}{% else %}{{ f['arguments'] | tojson }}{% endif %}}"
    "{{ '\\n</tool_call>' }}{% if not loop.last %}{{ '\\n' }}{% endif %}{% endfor %}{% endif %}{{ '\\n' }}"
    "{% if message['role'] == 'assistant' %}{{ eos_token }}{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)


def build_tokenizer(
    alphabet: str | Iterable[str] = DEFAULT_ALPHABET,
    *,
    model_max_length: int = 512,
) -> PreTrainedTokenizerFast:
    """Build a character-level tokenizer (one token per character) wrapped for ``transformers``.

    It is a BPE model with single characters as its vocabulary and no merges, so any string made of
    the alphabet encodes to exactly one token per character; other characters map to ``<unk>``.
    Special tokens: ``<pad>`` = 0, ``<bos>`` = 1, ``<eos>`` = 2, ``<unk>`` = 3. Encoding does not add
    BOS/EOS (the chat template adds BOS); decoding concatenates characters.

    Args:
        alphabet: the characters, or a corpus (any iterable of strings) whose distinct characters become
            the vocabulary, in first-seen order.
        model_max_length: the longest input the tokenizer reports (match the model's positions).

    Returns:
        A ``PreTrainedTokenizerFast`` with bos/eos/pad/unk tokens and :data:`CHAT_TEMPLATE`.

    Example:
        >>> tok = build_tokenizer("0123456789+=")
        >>> tok("12+3")["input_ids"]
        [5, 6, 14, 7]
    """
    chars: list[str] = []
    for piece in [alphabet] if isinstance(alphabet, str) else alphabet:
        for ch in piece:
            if ch not in chars:
                chars.append(ch)
    if not chars:
        raise ValueError("build_tokenizer needs a non-empty alphabet or corpus")
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    for ch in chars:
        vocab.setdefault(ch, len(vocab))
    backend = Tokenizer(BPE(vocab=vocab, merges=[], unk_token=UNK))
    backend.decoder = decoders.Fuse()
    backend.add_special_tokens(list(SPECIAL_TOKENS))
    tok = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        unk_token=UNK,
        model_max_length=model_max_length,
        padding_side="left",
        clean_up_tokenization_spaces=False,
    )
    tok.chat_template = CHAT_TEMPLATE
    return tok


def build_tiny_model(
    tokenizer: PreTrainedTokenizerFast,
    *,
    hidden_size: int = 64,
    layers: int = 2,
    heads: int = 2,
    kv_heads: int | None = None,
    intermediate_size: int | None = None,
    max_positions: int = 512,
    tie_embeddings: bool = True,
    seed: int = 0,
) -> LlamaForCausalLM:
    """A random-init ``LlamaForCausalLM`` sized to ``tokenizer`` (fp32, on CPU).

    Head dimension ``hidden_size // heads`` must be at least 32 (vLLM's CPU attention kernel rejects 16).
    The defaults give about 0.14M parameters with the default alphabet; ``hidden_size=128, layers=4,
    heads=4`` about 0.8M.

    Args:
        tokenizer: provides the vocabulary size and the bos/eos/pad ids.
        hidden_size: model width.
        layers: number of decoder layers.
        heads: attention heads (``hidden_size`` must divide by it).
        kv_heads: key/value heads (grouped-query attention); defaults to ``heads``.
        intermediate_size: MLP width; defaults to ``4 * hidden_size``.
        max_positions: the context length (prompt + response).
        tie_embeddings: share the input embedding and the lm_head.
        seed: initialisation seed (a local ``torch.Generator`` state; global RNG untouched).

    Example:
        >>> tok = build_tokenizer()
        >>> build_tiny_model(tok, seed=1).config.head_dim
        32
    """
    if hidden_size % heads:
        raise ValueError(f"hidden_size={hidden_size} must be divisible by heads={heads}")
    head_dim = hidden_size // heads
    if head_dim < 32:
        raise ValueError(
            f"head dim hidden_size/heads = {head_dim} < 32: vLLM's CPU kernel rejects it; "
            "use fewer heads or a larger hidden_size"
        )
    kv = heads if kv_heads is None else kv_heads
    if heads % kv:
        raise ValueError(f"heads={heads} must be divisible by kv_heads={kv}")
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size or 4 * hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        head_dim=head_dim,
        max_position_embeddings=max_positions,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=tie_embeddings,
        rope_theta=10000.0,
        torch_dtype="float32",
    )
    # Initialise under a forked RNG so the global torch seed is neither read nor changed.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    return model


def save_tiny(model: LlamaForCausalLM, tokenizer: PreTrainedTokenizerFast, path: str | Path) -> Path:
    """Save model and tokenizer into one folder loadable by ``from_pretrained`` / ``--model PATH``."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def load_tiny(path: str | Path) -> tuple[LlamaForCausalLM, PreTrainedTokenizerFast]:
    """Load what :func:`save_tiny` wrote (plain ``from_pretrained`` calls; no network)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(path))
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32)
    return model, tok


def num_parameters(model: torch.nn.Module) -> int:
    """Distinct trainable parameters (tied weights counted once)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


__all__ = [
    "BOS",
    "CHAT_TEMPLATE",
    "DEFAULT_ALPHABET",
    "EOS",
    "PAD",
    "UNK",
    "build_tiny_model",
    "build_tokenizer",
    "load_tiny",
    "num_parameters",
    "save_tiny",
]
