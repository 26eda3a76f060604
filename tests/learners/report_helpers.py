"""Shared helpers for the report tests: a run folder with every kind of content, and an HTML reader."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from dapo_env.learners.config import preset
from dapo_env.learners.run.run_folder import (
    EvalSample,
    eval_samples_path,
    eval_summary_path,
    write_eval_samples,
)

EMPTY_STEPS = (25, 26, 33)
HOSTILE = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2"></pre></article>&amp;'
HOSTILE_KEY = "is/</script><script>window.pwned = 3</script>"
REASONS = ("not_equal", "no_answer", "truncated_answer")


def record(step: int) -> dict[str, Any]:
    """A metrics record with the keys the trainer writes; an empty batch on :data:`EMPTY_STEPS`
    (0.0 for reward and accuracy, as the trainer writes today)."""
    t = step / 40
    rec: dict[str, Any] = {
        "step": step, "reward/mean": 0.2 + 0.5 * t, "rollout/accuracy": 0.4 + 0.4 * t,
        "rollout/accuracy_before_filter": 0.3 + 0.6 * t, "rollout/zero_adv_share": 0.2 + 0.7 * t,
        "rollout/rounds": 1 + step % 2, "rollout/samples_generated": 512, "rollout/num_groups": 32 - step // 2,
        "rollout/partial": 0.0, "response/length_mean": 10 + t, "response/length_max": 16,
        "response/truncation_rate": 0.05 * (1 - t), "policy/entropy": 0.33 - 0.3 * t,
        "policy/clip_frac_high": 0.002 * (step % 3), "policy/clip_frac_low": 0.004 * (step % 4),
        "policy/approx_kl": 1e-3 * (1 + step % 5), "policy/logprob_mismatch_mean": 2e-7,
        "policy/logprob_mismatch_max": 2e-6, "policy/drift_from_init": 0.01 * step, "loss/policy": 0.01,
        "optim/grad_norm": 0.2, "optim/lr": 5e-4, "optim/steps": 4 * step, "time/step_s": 0.5,
        "async/staleness_mean": step % 3 / 2, "is/ratio_max": 1.0 + step % 4 / 10,
    }
    if step in EMPTY_STEPS:
        rec.update({"reward/mean": 0.0, "rollout/accuracy": 0.0, "rollout/num_groups": 0, "rollout/partial": 1.0,
                    "policy/entropy": None, "policy/clip_frac_high": None, "policy/clip_frac_low": None,
                    "loss/policy": None, "optim/grad_norm": None, "is/ratio_max": None})
        for k in ("policy/logprob_mismatch_mean", "policy/logprob_mismatch_max"):
            rec.pop(k)
    if step % 10 == 0:
        rec["eval/accuracy"] = 0.1 + 0.02 * step
    return rec


def samples(step: int, n: int = 10, *, right: int = 4, hostile: bool = False) -> list[EvalSample]:
    """``n`` samples of which the first ``right`` are correct; wrong ones cycle through :data:`REASONS`."""
    out = []
    for i in range(n):
        ok = i < right
        reason = "equal:numeric" if ok else REASONS[i % len(REASONS)]
        text = f"Answer: {i % 10}"
        if hostile and i in (0, right):
            text = HOSTILE
        out.append(EvalSample(problem_id=f"test-{i}", prompt=f"Largest of {i} 3 {step % 10}?", completion=text,
                              extracted=str(i % 10), correct=ok, reason=reason, tokens=10 + i,
                              finish_reason="length" if reason == "truncated_answer" else "stop",
                              answer=str(i % 10) if ok else "9"))
    return out


def make_run(root: Path, *, steps: int = 40, eval_steps: tuple[int, ...] = (0, 20, 40), hostile: bool = False,
             summary: bool = False, name: str = "demo") -> Path:
    """A run folder: config.json, warmstart.json, metrics.jsonl (steps 0..``steps``) and eval files."""
    run = root / name
    run.mkdir(parents=True)
    cfg = preset("tiny", name=name, max_steps=steps).to_dict()
    if hostile:  # config.json is a file anyone can edit: its strings are untrusted too
        cfg["name"] = f"{name} {HOSTILE}"
    (run / "config.json").write_text(json.dumps(cfg, indent=2))
    (run / "warmstart.json").write_text(json.dumps({"steps": 28, "probe_accuracy": 0.265625}))
    recs = [{"step": 0, "eval/accuracy": 0.1}] + [record(s) for s in range(1, steps + 1)]
    if hostile:
        recs[5][HOSTILE_KEY] = 0.5
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    for s in eval_steps:
        write_eval_samples(eval_samples_path(run, s), samples(s, right=2 + s // 10, hostile=hostile))
    if summary:
        eval_summary_path(run, steps).write_text(json.dumps({
            "step": steps, "task": "Largest-v0", "split": "test", "problems": 200, "n": 8,
            "metrics": {"greedy": 0.93, "pass@1": {"value": 0.8125, "ci95": [0.78, 0.84]},
                        "pass@8": {"value": 0.985, "ci95": [0.96, 1.0]}, "avg@8": 0.8125,
                        "maj@8": {"value": 0.95, "ci95": [0.92, 0.97]}}}))
    return run


class Page(HTMLParser):
    """Every element of an HTML page with its attributes and ancestors, and every text node.

    ``elements``: ``(tag, attrs, ancestors)`` where ancestors are ``(tag, attrs)`` from the root.
    """

    VOID = {"meta", "link", "br", "img", "input", "hr", "path", "circle", "line", "source"}

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, dict[str, str]]] = []
        self.elements: list[tuple[str, dict[str, str], tuple[tuple[str, dict[str, str]], ...]]] = []
        self.texts: list[tuple[str, tuple[tuple[str, dict[str, str]], ...]]] = []
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        self.elements.append((tag, a, tuple(self.stack)))
        if tag not in self.VOID:
            self.stack.append((tag, a))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, {k: v or "" for k, v in attrs}, tuple(self.stack)))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        self.texts.append((data, tuple(self.stack)))

    def find(self, tag: str, *, inside: str | None = None, **attrs: str) -> list[dict[str, str]]:
        """Attributes of every ``tag`` element whose attributes include ``attrs`` (``class_`` for
        class), optionally inside the element with id ``inside``."""
        want = {k.rstrip("_"): v for k, v in attrs.items()}
        return [a for t, a, anc in self.elements
                if t == tag and all(a.get(k) == v for k, v in want.items())
                and (inside is None or any(x.get("id") == inside for _, x in anc))]

    def text(self, *, inside_tag: str | None = None, class_: str | None = None) -> str:
        """Concatenated text, optionally only inside elements of ``inside_tag`` (with class ``class_``)."""
        def keep(anc: tuple[tuple[str, dict[str, str]], ...]) -> bool:
            return inside_tag is None or any(t == inside_tag and (class_ is None or class_ in a.get("class", "").split())
                                             for t, a in anc)
        return "".join(d for d, anc in self.texts if keep(anc))
