"""TRL's ``GRPOTrainer`` on a dapo-env multi-turn task, through TRL's own ``environment_factory``.

``trl_environment_factory(task)`` turns any multi-turn id into what TRL 1.16 expects: one environment per
rollout whose ``reset(**row)`` starts an episode and whose one tool plays a turn (here GuessNumber-v0's
``guess(number)``; MBPPFeedback-v0 offers ``run_tests(code)``, the math tool tasks ``python(code)``).
TRL drives the conversation: the model calls the tool, TRL feeds the reply back as a tool message, the
model calls again or answers; ``factory.reward`` plays the final message and returns the episode return.

Runs offline in a few minutes on a CPU: a tiny random Llama and a byte-level BPE tokenizer trained here on
the task's own text stand in for a real model, with the Qwen2.5 chat template (tool calls as
``<tool_call>{...}</tool_call>``, which TRL knows how to parse). A few supervised steps on scripted
bisection games teach the tiny model the tool-call format first (sampled at temperature 0.5 it then writes
well-formed calls), so the two GRPO steps really play multi-turn games through TRL's tool loop. For a real run swap in ``model="Qwen/Qwen2.5-0.5B-Instruct"`` (and drop the tokenizer
and the warm start). Needs the ``bench`` extra (``pip install "dapo-env[bench]"``, which pins TRL).

Run:
    python examples/trl_multiturn.py
    python examples/trl_multiturn.py --steps 2 --num-generations 4 --warm-steps 100 --temperature 0.5
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from typing import Any

from dapo_env.interop import trl_environment_factory
from dapo_env.tools import tool

TASK = "GuessNumber-v0"
SYSTEM = "You play a number guessing game with the guess tool."


def guess(number: str) -> str:
    """Submit one guess of the hidden number.

    Args:
        number: your guess, an integer from 1 to 16
    """
    return f"Answer: {number}"


GUESS = tool(guess)  # the turn tool: its return value is the turn's text


def bisection_game(factory: Any, target: int) -> list[tuple[str, str]]:
    """A scripted game through the environment's own tool: ``(assistant text, tool reply)`` per guess, as a
    Qwen-style model writes tool calls, bisecting [1, 16] until the reply is "correct"."""
    env = factory()
    problem_id = next(p.id for p in env.env.problems if p.answer == str(target))
    env.reset(problem_id=problem_id)
    turns, low, high = [], 1, 16
    while not env.done:
        guess = (low + high) // 2
        reply = env.guess(number=str(guess))
        call = json.dumps({"name": GUESS.name, "arguments": {"number": str(guess)}})
        turns.append((f"<tool_call>\n{call}\n</tool_call>", reply))
        low, high = (guess + 1, high) if reply.startswith("higher") else (low, guess - 1)
    return turns


def build_tokenizer(texts: list[str]) -> Any:
    """A byte-level BPE tokenizer trained on ``texts``, with ChatML special tokens and TRL's copy of the
    Qwen2.5 chat template (TRL recognises it and parses ``<tool_call>`` blocks)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    from trl.chat_template_utils import qwen2_5_chat_template

    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1200, special_tokens=special, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    backend.train_from_iterator(texts * 4, trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                  extra_special_tokens=["<|im_start|>"], padding_side="left", model_max_length=1024)
    tok.add_tokens(["<tool_call>", "</tool_call>"])  # single tokens, as in Qwen's own tokenizer
    tok.chat_template = qwen2_5_chat_template
    return tok


def tool_suffix_ids(tokenizer: Any, reply: str) -> list[int]:
    """The tokens TRL appends after a tool call: the tool message and the next assistant header, rendered after
    a dummy conversation and cut after its last end-of-turn token (as TRL 1.16's ``_get_tool_suffix_ids``)."""
    call = [{"type": "function", "function": {"name": GUESS.name, "arguments": {}}}]
    dummy = [{"role": "user", "content": "dummy"}, {"role": "assistant", "content": "", "tool_calls": call}]
    prefix = tokenizer.apply_chat_template(dummy, tokenize=True, return_dict=False)
    full = tokenizer.apply_chat_template(dummy + [{"role": "tool", "name": GUESS.name, "content": reply}],
                                         add_generation_prompt=True, tokenize=True, return_dict=False)
    prefix = prefix[:max(i for i, t in enumerate(prefix) if t == tokenizer.eos_token_id) + 1]
    return list(full[len(prefix):])


def supervised_example(tokenizer: Any, prompt: list[dict[str, str]], tools: list[Any],
                       game: list[tuple[str, str]], answer: str) -> tuple[Any, Any]:
    """A game as the token sequence TRL would build (prompt, sampled turns, tool suffixes, the final answer);
    labels are the sampled tokens, -100 elsewhere."""
    import torch

    ids = list(tokenizer.apply_chat_template(prompt, tools=tools, add_generation_prompt=True, tokenize=True,
                                             return_dict=False))
    labels = [-100] * len(ids)
    for text, reply in game + [(answer, None)]:
        sampled = tokenizer.encode(text, add_special_tokens=False) + [tokenizer.eos_token_id]
        ids, labels = ids + sampled, labels + sampled
        if reply is not None:
            suffix = tool_suffix_ids(tokenizer, reply)
            ids, labels = ids + suffix, labels + [-100] * len(suffix)
    return torch.tensor([ids]), torch.tensor([labels])


def warm_start(model: Any, examples: list[Any], steps: int, lr: float = 3e-3) -> list[float]:
    """Supervised steps (Adam, one scripted game per step) so the tiny model writes well-formed tool calls;
    returns the losses."""
    import torch

    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    losses = []
    for step in range(steps):
        ids, labels = examples[step % len(examples)]
        loss = model(input_ids=ids, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def build(warm_steps: int, seed: int = 0) -> dict[str, Any]:
    """The factory, its dataset, the tokenizer and the warm-started tiny model."""
    from dapo_env.learners.models.tiny import build_tiny_model

    factory = trl_environment_factory(TASK, tool=GUESS, reward_map=(-1.0, 1.0), size=64, seed=seed)
    train = factory.dataset(limit=8, system_prompt=SYSTEM)
    prompt = list(train[0]["prompt"])
    tools = [getattr(factory(), GUESS.name)]  # TRL renders the tool's schema from the bound method
    games = {target: bisection_game(factory, target) for target in (11, 3, 16, 8, 6)}
    renderer = build_tokenizer(["x"])  # rendering text needs only the template
    texts = [renderer.apply_chat_template(prompt, tools=tools, add_generation_prompt=True, tokenize=False)]
    texts += [f"{text}<|im_end|>\n<|im_start|>user\n<tool_response>\n{reply}\n</tool_response><|im_end|>"
              for game in games.values() for text, reply in game]
    tokenizer = build_tokenizer(texts)
    model = build_tiny_model(tokenizer, hidden_size=64, layers=2, heads=2, max_positions=1024, seed=seed)
    examples = [supervised_example(tokenizer, prompt, tools, game, f"The number is {target}.")
                for target, game in games.items()]
    losses = warm_start(model, examples, warm_steps)
    return {"factory": factory, "train": train, "tokenizer": tokenizer, "model": model, "warm_losses": losses}


def train(parts: dict[str, Any], output_dir: str, steps: int, num_generations: int, temperature: float = 0.5,
          seed: int = 0) -> Any:
    """Two (``steps``) GRPOTrainer steps with DAPO's loss on the factory's environments."""
    from transformers import PrinterCallback
    from trl import GRPOConfig, GRPOTrainer

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    config = GRPOConfig(
        output_dir=output_dir, max_steps=steps, per_device_train_batch_size=num_generations,
        num_generations=num_generations, max_completion_length=192, max_tool_calling_iterations=6,
        temperature=temperature, learning_rate=1e-4, loss_type="dapo", epsilon=0.2, epsilon_high=0.28, beta=0.0,
        logging_steps=1, save_strategy="no", report_to="none", use_cpu=True, disable_tqdm=True, seed=seed, dataloader_num_workers=0)
    factory = parts["factory"]
    trainer = GRPOTrainer(model=parts["model"], reward_funcs=[factory.reward], args=config,
                          train_dataset=parts["train"], processing_class=parts["tokenizer"],
                          environment_factory=factory)
    trainer.remove_callback(PrinterCallback)  # the lines below print what matters
    trainer.train()
    return trainer


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--num-generations", type=int, default=4)
    parser.add_argument("--warm-steps", type=int, default=100, help="supervised steps on scripted games first")
    parser.add_argument("--temperature", type=float, default=0.5, help="GRPO sampling temperature")
    args = parser.parse_args(argv)

    parts = build(args.warm_steps)
    print(f"warm start: loss {parts['warm_losses'][0]:.2f} -> {parts['warm_losses'][-1]:.2f} "
          f"over {args.warm_steps} steps")
    with tempfile.TemporaryDirectory(prefix="trl_multiturn_example_") as output_dir:
        trainer = train(parts, output_dir, args.steps, args.num_generations, args.temperature)
    name = parts["factory"].reward.__name__
    logged = [entry for entry in trainer.state.log_history if f"rewards/{name}/mean" in entry]
    for entry in logged:
        print(f"step {entry['step']}: rewards/{name}/mean = {entry[f'rewards/{name}/mean']:+.3f}, "
              f"solved = {entry.get(f'rewards/{name}/solved', float('nan')):.2f}, "
              f"turns = {entry.get(f'rewards/{name}/turns', float('nan')):.2f}, "
              f"tool calls per rollout = {entry.get('tools/call_frequency', float('nan')):.2f}")
    print(f"trained {trainer.state.global_step} GRPOTrainer steps")
    return {"global_step": trainer.state.global_step, "logged": logged, "reward_name": name,
            "environments": list(trainer.environments or []), "warm_losses": parts["warm_losses"]}


if __name__ == "__main__":
    main()
