"""Supervised warm start: teach a random-init model the answer format (and a little of the skill) on a
procedural task's train split, stopping as soon as its greedy accuracy on a probe set reaches a target.

The default run uses it so RL starts from a model that is right sometimes (held-out accuracy low but
not zero): a random-init model is never right, so every group would have zero advantage. Stopping on
a probe accuracy (train-split problems, never the held-out test split) rather than after a fixed step
count makes the starting accuracy land in the intended band whatever the seed.

A multi-turn task (one with an interaction, e.g. ``GuessNumber-v0``) is warm-started on whole episodes,
played through the chat template exactly as training plays them, in which every turn answers with another,
randomly drawn problem's reference response: the model learns the answer format at every turn (and to stop
after it) but no strategy, since its answers carry nothing of the episode's replies. The loss covers the
model's turns only (the trajectory's ``sampled_mask``).

Example:
    >>> from dapo_env.learners.models.tiny import build_tiny_model, build_tokenizer
    >>> from dapo_env.tasks import get_task
    >>> tok = build_tokenizer(); model = build_tiny_model(tok, seed=0)
    >>> stats = warm_start(model, tok, get_task("Arithmetic-v0"), steps=2, batch_size=8)
    >>> stats["steps"]
    2
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from dapo_env.types import Problem

#: A multi-turn warm start's per-turn target: ``(episode's problem, a randomly drawn other problem, turn index) ->
#: text``. Lets a target use the episode's own prompt (e.g. a tool call naming the asked key) while its answers
#: still come from another problem, so the warm start teaches formats, not the skill RL is to learn.
TurnResponse = Callable[[Problem, Problem, int], str]


def default_response(problem: Problem) -> str:
    """The target response: the DAPO answer line the math verifier reads, ``"Answer: 19"``."""
    return f"Answer: {problem.answer}"


def _batch(tokenizer: Any, rows: list[list[int]], labels: list[list[int]]) -> tuple[torch.Tensor, ...]:
    """Right-padded token rows, their attention mask and labels. Shapes (N, T)."""
    width = max(len(r) for r in rows)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    lab = torch.full((len(rows), width), -100, dtype=torch.long)
    att = torch.zeros((len(rows), width), dtype=torch.long)
    for i, (r, lb) in enumerate(zip(rows, labels)):
        ids[i, :len(r)] = torch.tensor(r)
        lab[i, :len(lb)] = torch.tensor(lb)
        att[i, :len(r)] = 1
    return ids, att, lab


def _turns(labels: list[int]) -> list[tuple[int, int]]:
    """The ``(start, end)`` spans of a row's labelled turns: maximal runs of labels other than -100."""
    spans, start = [], None
    for i, label in enumerate([*labels, -100]):
        if label != -100 and start is None:
            start = i
        elif label == -100 and start is not None:
            spans.append((start, i))
            start = None
    return spans


def turn_weights(labels: list[list[int]]) -> list[list[float]]:
    """Per-position loss weights for a batch of label rows in which every turn index weighs the same.

    A token of a row's ``t``-th labelled turn (a maximal run of labels other than -100) weighs
    ``1 / (the number of tokens in the batch's t-th turns)``: the batch's first turns together weigh 1, its
    second turns 1, and so on, however many and however long they are. The weight depends on the turn's index
    only, never on what the turn says: at a branch (a long tool call or a one-token answer, both as turn 0) every
    branch's tokens weigh the same, so the learned distribution over branches is the data's (a per-turn mean
    would shrink a long branch's share by its length).

    Example:
        >>> turn_weights([[-100, 5, 6, 7, -100, 9, 2], [-100, 3]])  # turn 0: 3 + 1 tokens; turn 1: 2
        [[0.0, 0.25, 0.25, 0.25, 0.0, 0.5, 0.5], [0.0, 0.25]]
    """
    spans = [_turns(row) for row in labels]
    lengths: dict[int, list[int]] = {}
    for row_spans in spans:
        for t, (start, end) in enumerate(row_spans):
            lengths.setdefault(t, []).append(end - start)
    weights = []
    for row, row_spans in zip(labels, spans):
        w = [0.0] * len(row)
        for t, (start, end) in enumerate(row_spans):
            w[start:end] = [1.0 / sum(lengths[t])] * (end - start)
        weights.append(w)
    return weights


def _loss(model: torch.nn.Module, ids: torch.Tensor, att: torch.Tensor, lab: torch.Tensor,
          weights: torch.Tensor | None) -> torch.Tensor:
    """Next-token cross-entropy: the mean over labelled tokens, or with ``weights`` (N, T) their weighted mean."""
    if weights is None:
        return model(input_ids=ids, attention_mask=att, labels=lab).loss
    logits = model(input_ids=ids, attention_mask=att).logits[:, :-1].float()
    target, w = lab[:, 1:], weights[:, 1:]
    ce = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.clamp(min=0).reshape(-1),
                                           reduction="none").view_as(w)
    return (ce * w).sum() / w.sum()


def _rows(tokenizer: Any, task: Any, chosen: list[Problem], others: list[Problem],
          response_fn: Callable[[Problem], str], chat: Any, max_turns: int | None,
          max_episode_tokens: int | None,
          turn_response: TurnResponse | None = None) -> tuple[list[list[int]], list[list[int]]]:
    """Token rows and labels (-100 where no loss): (prompt, response + EOS) per problem; for a multi-turn task
    (``chat`` given) one whole episode per problem, whose i-th turn answers ``response_fn(others[i])`` (or
    ``turn_response(problem, others[i], i)`` when given)."""
    if chat is None:
        rows, labels = [], []
        for p in chosen:
            p_ids = tokenizer(task.format_prompt(p), add_special_tokens=True)["input_ids"]
            t_ids = tokenizer(response_fn(p), add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
            rows.append(p_ids + t_ids)
            labels.append([-100] * len(p_ids) + t_ids)
        return rows, labels
    from dapo_env.multiturn import Episode
    from dapo_env.types import Completion

    rows, labels = [], []
    answers = iter(others)
    for p in chosen:
        episode = Episode(task, p, chat=chat, max_turns=max_turns, max_episode_tokens=max_episode_tokens)
        turn = 0
        while not episode.done:
            other = next(answers)
            text = response_fn(other) if turn_response is None else turn_response(p, other, turn)
            turn += 1
            ids = chat.encode(text) + (int(tokenizer.eos_token_id),)
            episode.advance(Completion(text, token_ids=ids), task.verifier(text, p.answer))
        t = episode.trajectory()
        rows.append(list(t.prompt_token_ids) + list(t.token_ids))
        labels.append([-100] * len(t.prompt_token_ids) + [i if m else -100 for i, m in zip(t.token_ids, t.sampled_mask)])
    return rows, labels


def warm_start(model: torch.nn.Module, tokenizer: Any, task: Any, *, steps: int = 200, lr: float = 3e-3,
               batch_size: int = 64, seed: int = 0, target_accuracy: float | None = None,
               check_every: int = 2, probe_size: int = 128, max_response_tokens: int = 16,
               task_kwargs: dict[str, Any] | None = None,
               response_fn: Callable[[Problem], str] = default_response, max_turns: int | None = None,
               max_episode_tokens: int | None = None, turn_response: TurnResponse | None = None,
               weighting: str = "token") -> dict[str, Any]:
    """Fine-tune ``model`` in place on (prompt, correct response) pairs of ``task``'s train split.

    Args:
        model, tokenizer: the causal LM and its tokenizer.
        task: a :class:`~dapo_env.tasks.Task` (its verifier grades the probe set).
        steps: the most optimizer steps.
        lr: AdamW learning rate (constant).
        batch_size: examples per step.
        seed: picks the examples (a local numpy Generator).
        target_accuracy: stop once greedy accuracy on ``probe_size`` train-split problems reaches it
            (checked every ``check_every`` steps: a fast-learning task can gain 15 points of probe
            accuracy in 5 steps, so checking every 2 keeps the start inside the intended band);
            ``None`` runs all ``steps``.
        max_response_tokens: response budget for the probe.
        task_kwargs: passed to ``task.load``.
        response_fn: the target response of a problem.
        max_turns, max_episode_tokens: a multi-turn task's episode budgets (as in training).
        turn_response: a multi-turn task's per-turn target (:data:`TurnResponse`), used instead of
            ``response_fn`` of a random other problem.
        weighting: ``"token"`` (every labelled token weighs the same: the mean over the batch's tokens) or
            ``"turn"`` (every turn index weighs the same, :func:`turn_weights`). In an episode whose first turn is
            a 50-token tool call and whose answer is one token, ``"token"`` gives the answer 1/50 of the episode's
            loss, too little for the tiny model to learn to read the tool's reply (its answer loss stays at
            ln(n_values) for 400 steps); ``"turn"`` gives the answers (the second turns) as much weight as the first turns.

    Returns:
        ``{"steps", "final_loss", "probe_accuracy", "seconds"}``.
    """
    from .engines import HFEngine
    from .evaluation import evaluate

    if weighting not in ("token", "turn"):
        raise ValueError(f"weighting must be 'token' or 'turn', got {weighting!r}")
    t0 = time.perf_counter()
    problems = task.load(split="train", **(task_kwargs or {}))
    rng = np.random.default_rng([seed, 7919])
    probe_idx = rng.choice(len(problems), size=min(probe_size, len(problems)), replace=False)
    probe = [problems[int(i)] for i in probe_idx]
    engine = HFEngine(model, tokenizer)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    chat = None
    if getattr(task, "turns", "single-turn") == "multi-turn":
        from dapo_env.chat_tokens import ChatTokens

        chat = ChatTokens(tokenizer)

    def probe_accuracy() -> float:
        return evaluate(engine, task, probe, max_response_tokens=max_response_tokens, tokenizer=tokenizer if chat
                        else None, max_turns=max_turns, max_episode_tokens=max_episode_tokens).accuracy

    loss_value, acc, done = float("nan"), None, 0
    for step in range(steps):
        if target_accuracy is not None and step % check_every == 0 and step > 0:
            acc = probe_accuracy()
            if acc >= target_accuracy:
                break
        idx = rng.integers(len(problems), size=batch_size)
        chosen = [problems[int(i)] for i in idx]
        others = [problems[int(i)] for i in rng.integers(len(problems), size=batch_size * 64)] if chat else []
        rows, labels = _rows(tokenizer, task, chosen, others, response_fn, chat, max_turns, max_episode_tokens,
                             turn_response)
        ids, att, lab = _batch(tokenizer, rows, labels)
        weights = None
        if weighting == "turn":
            weights = torch.zeros(lab.shape, dtype=torch.float32)
            for i, row_weights in enumerate(turn_weights(labels)):
                weights[i, :len(row_weights)] = torch.tensor(row_weights)
        model.train()
        loss = _loss(model, ids, att, lab, weights)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        loss_value, done = float(loss.detach()), step + 1
    if acc is None or done == steps:
        acc = probe_accuracy()
    model.eval()
    return {"steps": done, "final_loss": loss_value, "probe_accuracy": acc, "seconds": time.perf_counter() - t0}


def warm_start_for(cfg: Any) -> Callable[[torch.nn.Module, Any, Any], dict[str, Any]]:
    """The warm start a :class:`~dapo_env.learners.config.TrainConfig` asks for, as the trainer's hook."""

    def run(model: torch.nn.Module, tokenizer: Any, task: Any) -> dict[str, Any]:
        return warm_start(model, tokenizer, task, steps=cfg.warmstart_steps, lr=cfg.warmstart_lr,
                          batch_size=cfg.warmstart_batch_size, seed=cfg.seed,
                          target_accuracy=cfg.warmstart_target_accuracy,
                          max_response_tokens=cfg.max_response_tokens, task_kwargs=dict(cfg.task_kwargs),
                          max_turns=cfg.max_turns, max_episode_tokens=cfg.max_episode_tokens,
                          response_fn=lambda p: cfg.warmstart_response.format(**{**p.metadata, "answer": p.answer}))

    return run


__all__ = ["TurnResponse", "default_response", "turn_weights", "warm_start", "warm_start_for"]
