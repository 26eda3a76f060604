"""`ChatTokens`: token-in/token-out chat formatting for multi-turn episodes.

Re-tokenizing a conversation every turn drifts from the tokens the model actually sampled: chat templates
rewrite earlier turns (Qwen3's drops earlier ``<think>`` blocks), a BPE tokenizer merges differently across
a re-joined boundary, and the model's own end-of-turn token may not be the one the template writes. So
history is never re-rendered here. The prompt is rendered and tokenized once; each environment reply is
rendered after a fixed dummy conversation ``[user, assistant(marker), reply]`` and only the part after the
marker is kept, sliced at the token level (the whole rendering is tokenized, then the marker's prefix is
cut off, so tokenizers that add a prefix space or merge across boundaries still give the tokens the
template means). That delta begins with the template's end of the assistant turn (``<|im_end|>\\n``);
when the model ended its turn with a special token that the closer contains (the ``<|im_end|>`` it
sampled), the delta starts right after that token, so the sequence reads exactly like the template's
rendering of the conversation. When the model was cut at its token limit the whole closer is appended
as environment tokens, which closes the turn properly.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

_MARKER = "dapo-env-turn-marker"
_DUMMY_USER = {"role": "user", "content": "dapo-env-dummy-question"}
_CACHE_SIZE = 4096  # distinct replies kept rendered


class ChatTokens:
    """Render a multi-turn conversation incrementally into exact token ids with a tokenizer's chat template.

    Args:
        tokenizer: anything with ``apply_chat_template(messages, tokenize=False, add_generation_prompt=...,
            **kwargs) -> str`` and ``encode(text, add_special_tokens=False) -> list[int]`` (a ``transformers``
            tokenizer); ``decode`` and the special-token attributes are used when present.
        system_prompt: a system message rendered before the first user message.
        template_kwargs: extra keyword arguments for ``apply_chat_template`` (e.g. ``{"enable_thinking": False}``).
        stop_token_ids: token ids that end a model turn, on top of the tokenizer's special tokens (a model
            turn that ends with one of these, inside the template's end-of-turn text, is not closed twice).
        tools: tool specs (:class:`~dapo_env.types.ToolSpec`, or OpenAI-form dicts) rendered through the
            template's ``tools=`` argument in every rendering, so the model sees them the way it was trained
            to (:meth:`with_tools` derives a copy with other tools).

    Example:
        >>> class Tok:  # a toy character tokenizer with ChatML-style turns and one special token, "#"
        ...     def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=False):
        ...         text = "".join(f"<{m['role']}>{m['content']}#" for m in messages)
        ...         return text + ("<assistant>" if add_generation_prompt else "")
        ...     def encode(self, text, add_special_tokens=False):
        ...         return [ord(c) for c in text]
        ...     def decode(self, ids):
        ...         return "".join(map(chr, ids))
        ...     eos_token_id = ord("#")
        >>> chat = ChatTokens(Tok())
        >>> chat.prompt("Guess")[0]
        '<user>Guess#<assistant>'
        >>> chat.reply("higher", stop_token=ord("#"))[0]  # the model's "#" already closed its turn
        '<user>higher#<assistant>'
        >>> chat.reply("higher", stop_token=None)[0]      # cut at its limit: the env closes the turn
        '#<user>higher#<assistant>'
    """

    def __init__(
        self,
        tokenizer: Any,
        *,
        system_prompt: str | None = None,
        template_kwargs: Mapping[str, Any] | None = None,
        stop_token_ids: Sequence[int] = (),
        tools: Sequence[Any] = (),
    ) -> None:
        for method in ("apply_chat_template", "encode"):
            if not callable(getattr(tokenizer, method, None)):
                raise TypeError(
                    f"ChatTokens needs a tokenizer with apply_chat_template and encode (a transformers tokenizer "
                    f"with a chat template), got {type(tokenizer).__name__} without {method}")
        self.tokenizer = tokenizer
        self.system_prompt = system_prompt
        self.template_kwargs = dict(template_kwargs or {})
        self.stop_token_ids = frozenset(int(i) for i in stop_token_ids) | _special_ids(tokenizer)
        self.tools = tuple(tools)
        self._tools_kwargs = {"tools": [_tool_dict(t) for t in self.tools]} if self.tools else {}
        self._with_tools: dict[tuple[Any, ...], ChatTokens] = {}
        self._warned = False
        self._head: tuple[str, tuple[int, ...]] | None = None  # the last dummy prefix and its tokens
        self._replies: dict[tuple[tuple[str, str], ...], tuple[str, tuple[int, ...]]] = {}
        # the template's end of an assistant turn (e.g. "<|im_end|>\n"), as text and tokens
        self.closer_text, self.closer_ids = self._after_marker([], add_generation_prompt=False)

    @property
    def template(self) -> str | None:
        """The chat template's source text, when the tokenizer has one as a string (what ``tool_format="auto"``
        reads)."""
        template = getattr(self.tokenizer, "chat_template", None)
        return template if isinstance(template, str) else None

    def with_tools(self, tools: Sequence[Any]) -> ChatTokens:
        """This ChatTokens with ``tools`` rendered through the template (one copy per distinct tool list, kept)."""
        key = tuple(tools)
        if key == self.tools:
            return self
        if key not in self._with_tools:
            self._with_tools[key] = ChatTokens(self.tokenizer, system_prompt=self.system_prompt,
                                               template_kwargs=self.template_kwargs, stop_token_ids=self.stop_token_ids,
                                               tools=key)
        return self._with_tools[key]

    # -- rendering ---------------------------------------------------------------------------------
    def render(self, messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool) -> str:
        """The chat template's text for ``messages`` (the system prompt, if any, goes first; the tools, if any,
        through ``tools=``)."""
        system = [{"role": "system", "content": self.system_prompt}] if self.system_prompt is not None else []
        text = self.tokenizer.apply_chat_template(
            [*system, *messages], tokenize=False, add_generation_prompt=add_generation_prompt, **self._tools_kwargs,
            **self.template_kwargs)
        if not isinstance(text, str):
            raise TypeError(f"apply_chat_template(..., tokenize=False) returned {type(text).__name__}, expected str")
        return text

    def encode(self, text: str) -> tuple[int, ...]:
        """Token ids of ``text`` as is (no BOS/EOS added: the template writes the ones it wants)."""
        return tuple(int(i) for i in self.tokenizer.encode(text, add_special_tokens=False))

    def prompt(self, content: str) -> tuple[str, tuple[int, ...]]:
        """The first observation: the rendered text of ``[system?, user(content)]`` with the generation
        prompt, and its token ids (tokenized once; later turns are appended, never re-tokenized)."""
        text = self.render([{"role": "user", "content": content}], add_generation_prompt=True)
        return text, self.encode(text)

    def reply(self, content: str, *, role: str = "user", stop_token: int | None = None) -> tuple[str, tuple[int, ...]]:
        """The text and token ids to append after the model's turn so the model can read the reply.

        Args:
            content: the environment's reply.
            role: its chat role (``"user"``, or ``"tool"`` where the template renders one).
            stop_token: the last token the model sampled, when its turn ended with a stop token (``None``
                when it was cut at the token limit). If the template's end-of-turn text contains it, the
                delta starts after it (the model wrote it already); otherwise the whole closer is appended.
        """
        return self.replies([{"role": role, "content": content}], stop_token=stop_token)

    def replies(self, messages: Sequence[Mapping[str, str]], *, stop_token: int | None = None
                ) -> tuple[str, tuple[int, ...]]:
        """Like :meth:`reply` for several messages answering one turn (one ``tool`` message per call: templates
        group consecutive tool results, so they are rendered together)."""
        key = tuple((str(m["role"]), str(m["content"])) for m in messages)
        rendered = self._replies.get(key)  # replies repeat ("higher"): render each distinct one once
        if rendered is None:
            rendered = self._after_marker([dict(m) for m in messages], add_generation_prompt=True)
            if len(self._replies) >= _CACHE_SIZE:
                self._replies.clear()
            self._replies[key] = rendered
        text, ids = rendered
        drop = self._already_sampled(ids, stop_token)
        if not drop:
            return text, ids
        dropped = self._decode(ids[:drop])
        if dropped is not None and text.startswith(dropped):
            kept_text = text[len(dropped):]
        else:
            kept_text = self._decode(ids[drop:])
        return (kept_text if kept_text is not None else text), ids[drop:]

    # -- helpers -----------------------------------------------------------------------------------
    def _after_marker(self, after: list[dict[str, str]], *, add_generation_prompt: bool) -> tuple[str, tuple[int, ...]]:
        """Render ``[dummy user, assistant(marker), *after]`` and return what follows the marker, as text and
        as the token-level delta of the whole rendering."""
        full = self.render([_DUMMY_USER, {"role": "assistant", "content": _MARKER}, *after],
                           add_generation_prompt=add_generation_prompt)
        at = full.find(_MARKER)
        if at < 0:
            raise ValueError(
                "the chat template does not render an assistant message's content verbatim, so replies cannot be "
                "rendered incrementally; use a template that writes message['content'] as given")
        cut = at + len(_MARKER)
        head = full[:cut]
        cached = self._head
        if cached is None or cached[0] != head:  # the dummy prefix renders the same for every reply
            cached = self._head = (head, self.encode(head))
        head_ids, full_ids = cached[1], self.encode(full)
        if full_ids[: len(head_ids)] == head_ids:
            return full[cut:], full_ids[len(head_ids):]
        if not self._warned:  # the tokenizer merges across the boundary: tokenize the delta on its own
            self._warned = True
            warnings.warn("ChatTokens: the tokenizer merges tokens across the end of an assistant message; "
                          "replies are tokenized on their own", RuntimeWarning, stacklevel=3)
        return full[cut:], self.encode(full[cut:])

    def _already_sampled(self, ids: tuple[int, ...], stop_token: int | None) -> int:
        """How many leading tokens of a reply delta the model already sampled (0 or up to its stop token)."""
        if stop_token is None or stop_token not in self.stop_token_ids:
            return 0
        closer = 0  # the delta's leading tokens that are the template's end-of-assistant-turn text
        while closer < min(len(ids), len(self.closer_ids)) and ids[closer] == self.closer_ids[closer]:
            closer += 1
        region = ids[:closer]
        return region.index(stop_token) + 1 if stop_token in region else 0

    def _decode(self, ids: Sequence[int]) -> str | None:
        decode = getattr(self.tokenizer, "decode", None)
        if not callable(decode):
            return None
        return decode(list(ids))


def _tool_dict(spec: Any) -> dict[str, Any]:
    """A tool in the form chat templates take (``ToolSpec.to_openai()``; a dict is passed as is)."""
    from dapo_env.types import ToolSpec

    if isinstance(spec, ToolSpec):
        return spec.to_openai()
    if isinstance(spec, Mapping):
        return dict(spec)
    raise TypeError(f"ChatTokens tools must be ToolSpec objects or OpenAI-form dicts, got {type(spec).__name__}")


def _special_ids(tokenizer: Any) -> frozenset[int]:
    """The tokenizer's EOS and special/added-special token ids (what a model's turn can stop with)."""
    ids: set[int] = set()

    def add(value: Any) -> None:
        if isinstance(value, int) and not isinstance(value, bool):
            ids.add(value)
        elif isinstance(value, (list, tuple, set, frozenset)):
            for v in value:
                add(v)

    add(getattr(tokenizer, "eos_token_id", None))
    add(getattr(tokenizer, "all_special_ids", None))
    decoder = getattr(tokenizer, "added_tokens_decoder", None)
    if isinstance(decoder, Mapping):
        add([i for i, token in decoder.items() if getattr(token, "special", False)])
    return frozenset(ids)


__all__ = ["ChatTokens"]
