"""The DAPO trainer's configuration: one frozen dataclass with the paper's defaults, and named presets.

Every DAPO component is its own switch, so the paper's ablation (naive GRPO, + overlong filtering,
+ clip-higher, + soft overlong punishment, + token-level loss, + dynamic sampling) is a configuration
change. Defaults follow Yu et al. 2025 (DAPO), Section 3 and Table 1 / the released recipe.

A preset is an ALGORITHM (``dapo``, ``grpo``: the switches) applied on top of a SCALE (``paper``: the
paper's sizes for a real model; ``tiny``: the CPU default run's model, sizes, task and warm start). The
scale's task knobs (``task_kwargs``) belong to its task: choosing another task drops them.
Names that extend (loss aggregations, ratio levels, engines) are validated against their registries.

Example:
    >>> cfg = preset("grpo", max_steps=3)
    >>> (cfg.clip_low, cfg.clip_high, cfg.loss_agg, cfg.dynamic_sampling, cfg.max_response_tokens)
    (0.2, 0.2, 'seq-mean-token-mean', False, 20480)
    >>> preset("grpo", scale="tiny").max_response_tokens, preset("tiny", task="GSM8K-v0").task_kwargs
    (16, {})
"""

from __future__ import annotations

import dataclasses
import json
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Annotated, Any

from .settings import OneOf, Range, check_fields

LR_SCHEDULES = ("constant", "cosine", "linear")
PRECISIONS = ("fp32", "bf16")

Count = Annotated[int, Range(1)]
"""An integer >= 1 (a size or a number of steps that cannot be zero)."""
NonNegative = Annotated[int, Range(0)]
"""An integer >= 0 (0 usually switches the thing off)."""
Positive = Annotated[float, Range(0, low_open=True)]
"""A number > 0."""


# The registries a name field is checked against, imported when a config is validated (config needs no torch).
def _precisions() -> tuple[str, ...]:
    return PRECISIONS


def _lr_schedules() -> tuple[str, ...]:
    return LR_SCHEDULES


def _engines() -> list[str]:
    from .engines import engine_names

    return list(engine_names())


def _thread_splits() -> tuple[str, ...]:
    from .rollout.threads import THREAD_SPLITS

    return THREAD_SPLITS


def _packings() -> tuple[str, ...]:
    from .algo.batch import PACKINGS

    return PACKINGS


def _aggregations() -> list[str]:
    from .algo.losses import AGGREGATIONS

    return sorted(AGGREGATIONS)


def _ratio_levels() -> tuple[str, ...]:
    from .algo.losses import RATIO_LEVELS

    return tuple(RATIO_LEVELS)


def _advantages() -> list[str]:
    from .algo.losses import ADVANTAGES

    return sorted(ADVANTAGES)


def _policy_losses() -> list[str]:
    from .algo.losses import POLICY_LOSSES

    return sorted(POLICY_LOSSES)


def _is_corrections() -> list[str]:
    from .algo.losses import IS_CORRECTIONS

    return sorted(IS_CORRECTIONS)


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """Everything one training run needs. Defaults are the paper's (the ``dapo`` preset).

    Sizes: a step draws ``batch_size`` prompts' worth of informative groups of ``group_size``
    responses each; the update splits them into mini-batches of ``mini_batch_size`` groups (one
    optimizer step each, ``batch_size / mini_batch_size`` steps per rollout, like the paper's 512/32)
    and each mini-batch into micro-batches of ``micro_batch_size`` sequences for gradient accumulation.

    Overlong filtering is off by default: the paper's final recipe shapes too-long responses with the
    soft overlong punishment instead, and masking truncated samples as well would throw away exactly
    the samples the penalty teaches from. Turn it on for the ablation's "+overlong filtering" row.

    Example:
        >>> TrainConfig(max_steps=2).with_overrides({"group_size": 8}).group_size
        8
    """

    # --- run -------------------------------------------------------------------------------------
    name: str | None = None
    """run folder name (default: <task>-<preset>-s<seed>)"""
    out_dir: str = "runs"
    """parent folder of runs: the run's files go to <out_dir>/<name>/"""
    preset_name: str = "dapo"
    """which preset built this config (recorded in config.json; --preset chooses it)"""
    seed: Annotated[int, Range(0)] = 0
    """seed of the model init, sampling and data order"""
    max_steps: Count = 100
    """training steps, one rollout batch each"""
    device: str = "cpu"
    """torch device: cpu, cuda, cuda:1, ..."""
    engine: Annotated[str, OneOf(_engines)] = "hf"
    """rollout engine: hf (transformers, CPU/GPU), vllm (optional extra), vllm-server or auto (vllm where it can
    run)"""
    engine_options: Mapping[str, Any] = field(default_factory=dict)
    """keywords for the engine's constructor, e.g. {server_url: 'http://127.0.0.1:8000/v1'} for vllm-server"""
    num_threads: Annotated[int | None, Range(1, none="torch's choice")] = None
    """torch CPU threads (with a rollout worker: learner and worker together)"""
    num_threads_split: Annotated[str, OneOf(_thread_splits)] = "work-conserving"
    """with a rollout worker: work-conserving hands the idle side's threads to the busy one before each forward
    pass; static keeps fixed shares (learner ceil(T/2), worker floor(T/2))"""
    # On a CPU with AMX a SmolLM2-135M update ran 1.5x (SDPA) to 2x (eager attention) faster under bf16,
    # rollouts 1.3x (benchmarks/bench_precision.py).
    precision: Annotated[str, OneOf(_precisions)] = "fp32"
    """bf16: matmuls of the learner's forward/backward and of HF rollouts run under bfloat16 autocast (weights,
    optimizer state, log-softmax and loss stay fp32)"""
    # --- task and model --------------------------------------------------------------------------
    task: str = "Arithmetic-v0"
    """registered task id or name (e.g. GSM8K-v0; `dapo-env tasks` lists them), a spec file's path (MyMath.yaml),
    or a mixture 'GSM8K-v0:0.7,MyMath-v0:0.3' (each group from one task, drawn by weight)"""
    task_kwargs: Mapping[str, Any] = field(default_factory=dict)
    """the task's load options, e.g. {data_files: my.jsonl}; one at a time: --set data_files=my.jsonl"""
    train_split: str = "train"
    """split the training problems come from"""
    eval_split: str = "test"
    """split of the held-out problems (a split that reads the training rows is split off them: docs/tasks.md)"""
    verifier: str | Callable[..., Any] | None = None
    """your verifier as MODULE:FUNCTION, fn(response, reference) -> VerifyResult, bool or score in [0, 1],
    imported from the working directory first (default: the task's)"""
    prompt_template: str | None = None
    """replaces the task's prompt template: '{question}' and the rows' metadata fields (default: the task's)"""
    model: str | None = None
    """local Hugging Face model folder, never downloaded (default: a tiny random-init model built locally)"""
    tiny_hidden_size: Count = 128
    """the tiny model's hidden size"""
    tiny_layers: Count = 2
    """the tiny model's decoder layers"""
    tiny_heads: Count = 4
    """the tiny model's attention heads (must divide tiny_hidden_size)"""
    tiny_max_positions: Count = 256
    """the tiny model's context: prompt + response, or prompt + whole episode"""
    chat_template: bool = False
    """wrap prompts with the tokenizer's chat template (multi-turn tasks always do)"""
    # --- multi-turn episodes (tasks with an interaction, e.g. GuessNumber-v0; ignored for single-turn tasks) -----
    max_turns: Annotated[int | None, Range(1, none="no budget")] = None
    """truncate an episode after this many turns (default: the task ends it)"""
    max_episode_tokens: Annotated[int | None, Range(1, none="no budget")] = None
    """truncate an episode when its tokens after the prompt would leave no room for another turn; also the soft
    overlong penalty's L_max over the tokens the model sampled"""
    # --- LoRA (optional extra: pip install 'dapo-env[lora]'; docs/learner.md) -------------------------
    lora_rank: Annotated[int, Range(0, why="0 = full fine-tuning, e.g. 8 for a rank-8 adapter")] = 0
    """train a rank-R LoRA adapter on a frozen base (needs pip install 'dapo-env[lora]'); 0 = full fine-tuning"""
    lora_alpha: Positive = 32.0
    """scale of the adapter's update: lora_alpha / lora_rank"""
    lora_dropout: Annotated[float, Range(0, 1, high_open=True)] = 0.0
    """dropout on the adapter's input while training"""
    lora_target_modules: tuple[str, ...] | None = None
    """comma-separated module names the adapter wraps, e.g. q_proj,v_proj, or all-linear (default: the
    architecture's attention + MLP projections)"""
    # --- rollout ----------------------------------------------------------------------------------
    group_size: Annotated[int, Range(2, why="group-relative advantages need at least 2 responses")] = 16
    """G: responses per prompt"""
    batch_size: Count = 512
    """prompts (groups) per training step"""
    mini_batch_size: Count = 32
    """groups per optimizer step (must divide batch_size)"""
    micro_batch_size: Count = 16
    """sequences per forward/backward (gradient accumulation)"""
    packing: Annotated[str, OneOf(_packings, hint="docs/performance.md")] = "auto"
    """micro-batch layout: auto (pack where exact), off (pad to the batch), length (sort by length) or pack
    (concatenate sequences)"""
    gradient_checkpointing: bool = False
    """recompute the decoder's activations in the backward: less memory for long responses, ~1.3x work"""
    temperature: Annotated[float, Range(0, low_open=True, why="sampling needs a temperature > 0")] = 1.0
    """sampling temperature of the rollouts"""
    top_p: Annotated[float, Range(0, 1, low_open=True)] = 1.0
    """nucleus mass of the rollouts"""
    max_response_tokens: Count = 20480
    """response budget in tokens (the paper's L_max)"""
    # --- DAPO components ---------------------------------------------------------------------------
    clip_low: Annotated[float, Range(0, 1, high_open=True)] = 0.2
    """epsilon_low of the clipped surrogate"""
    clip_high: Annotated[float, Range(0, why="use clip_high=clip_low for symmetric clipping")] = 0.28
    """epsilon_high (clip-higher); equal to clip_low for symmetric clipping"""
    clip_c: Annotated[float | None, Range(1, low_open=True, none="off", why="dual clip needs a constant > 1")] = None
    """dual-clip constant for negative advantages"""
    loss_agg: Annotated[str, OneOf(_aggregations, "a registered aggregation",
                                   "losses.register_aggregation adds one")] = "token-mean"
    """loss aggregation: token-mean is DAPO's token-level loss (Eq. 12)"""
    ratio_level: Annotated[str, OneOf(_ratio_levels, hint="'sequence' is GSPO")] = "token"
    """importance ratio per token, or sequence (GSPO's length-normalised ratio)"""
    dynamic_sampling: bool = True
    """keep only groups with 0 < #correct < G"""
    # Side by side on the default run (3 seeds, 40 steps) held-out accuracy was within seed noise (0.58 vs 0.62)
    # with and without keep_surplus, and keeping generated ~20 % fewer samples. With an is_correction the
    # recomputed log-probs and its weight account for a carried group's staleness instead.
    keep_surplus: bool = True
    """carry informative groups beyond batch_size into the next batch, with the sampling engine's log-probs as
    the old policy's; false discards them (the paper's recipe)"""
    max_gen_rounds: Count = 10
    """generation rounds per step before giving up on a full batch"""
    difficulty_sampling: bool = False
    """draw prompts by their chance of an informative group (dapo_env.difficulty)"""
    overlong_penalty: bool = True
    """soft overlong punishment (DAPO Eq. 13)"""
    overlong_cache_length: NonNegative = 4096
    """L_cache: the penalty ramps over the last L_cache tokens"""
    overlong_penalty_factor: float = 1.0
    """the penalty at the budget's end"""
    overlong_filter: bool = False
    """mask truncated responses out of the loss"""
    reward_low: float = -1.0
    """reward of a wrong response"""
    reward_high: float = 1.0
    """reward of a correct response"""
    advantage: Annotated[str, OneOf(_advantages, "a registered advantage estimator",
                                    "losses.register_advantage adds one")] = "group"
    """advantage estimator: group is GRPO/DAPO's"""
    scale_adv_by_std: bool = True
    """GRPO's (r - mean) / std"""
    epochs_per_batch: Count = 1
    """passes over each rollout batch"""
    # --- policy loss, rollout correction, asynchronous rollouts (docs/losses.md, docs/DESIGN.md) ------
    loss: Annotated[str, OneOf(_policy_losses, "a registered policy loss", "losses.register_policy_loss adds one")] = (
        "ppo-clip")
    """policy loss: ppo-clip (DAPO's clipped surrogate) or cispo (MiniMax-M1's clipped IS weight)"""
    is_correction: Annotated[str | None, OneOf(_is_corrections, hint="or None to switch the rollout correction off")] = (
        None)
    """importance weights between the rollout engine and the learner: truncate or mask, per token or sequence
    (default: off)"""
    is_cap: Annotated[float, Range(1, low_open=True, why="weights are bounded by min(w, C) or kept in [1/C, C]")] = 2.0
    """bound C of is_correction: min(w, C) or keep [1/C, C]"""
    max_staleness: Annotated[int, Range(0, why="0 = synchronous")] = 0
    """generate in a worker process with weights up to K training steps old while the learner updates;
    0 = synchronous"""
    rollout_worker: bool = False
    """generate in a separate worker process (always so when max_staleness > 0)"""
    rollout_timeout_s: Annotated[float, Range(0, low_open=True, why="allow for the longest generation round")] = 600.0
    """seconds a worker may stay silent with work outstanding before it counts as hung"""
    # --- optimisation ---------------------------------------------------------------------------
    lr: Positive = 1e-6
    """learning rate"""
    warmup_steps: NonNegative = 20
    """linear warm-up, in optimizer steps"""
    lr_schedule: Annotated[str, OneOf(_lr_schedules)] = "constant"
    """learning-rate schedule after the warm-up"""
    weight_decay: float = 0.1
    """AdamW's weight decay"""
    adam_betas: tuple[float, float] = (0.9, 0.999)
    """AdamW's (beta1, beta2), e.g. 0.9,0.95"""
    adam_eps: float = 1e-8
    """AdamW's epsilon"""
    grad_clip: Positive = 1.0
    """gradient-norm clip"""
    # --- supervised warm start (the tiny default run) ---------------------------------------------
    warmstart_steps: NonNegative = 0
    """supervised steps on the task's answers before RL (0: none)"""
    warmstart_lr: Positive = 3e-3
    """the warm start's learning rate"""
    warmstart_batch_size: Count = 64
    """problems per warm-start step"""
    warmstart_target_accuracy: Annotated[float | None, Range(0, 1, low_open=True)] = None
    """stop the warm start once greedy train-probe accuracy reaches it (default: run all its steps)"""
    warmstart_response: str = "Answer: {answer}"
    """the warm start's target response: a template over answer and metadata"""
    # --- evaluation, logging, checkpoints ---------------------------------------------------------
    eval_every: NonNegative = 10
    """held-out evaluation every N steps; 0 disables (the first and last steps are always evaluated)"""
    eval_size: Count = 200
    """held-out problems (greedy decoding)"""
    eval_temperature: Annotated[float, Range(0, why="0 = greedy")] = 0.0
    """temperature of the held-out evaluation; 0 = greedy"""
    plot_every: NonNegative = 5
    """redraw curves.png every N steps; 0 disables"""
    report_every_eval: bool = True
    """rewrite report.html after each evaluation (cheap: ~0.03-0.2 s)"""
    checkpoint_every: NonNegative = 10
    """checkpoint every N steps; 0 disables"""
    keep_checkpoints: NonNegative = 2
    """checkpoints kept (older ones are deleted)"""
    progress: bool = True
    """show a progress bar"""

    def __post_init__(self) -> None:
        def need(ok: bool, name: str, msg: str) -> None:
            if not ok:
                raise ValueError(f"TrainConfig.{name}: {msg} (got {getattr(self, name)!r})")

        if isinstance(self.adam_betas, list):  # from YAML/JSON
            object.__setattr__(self, "adam_betas", tuple(self.adam_betas))
        self._normalise_lora_targets()
        check_fields(self)  # every field's type, range and registry name (settings.py)
        need(not self.overlong_penalty or self.max_episode_tokens is None
             or self.overlong_cache_length < self.max_episode_tokens, "overlong_cache_length",
             f"must be < max_episode_tokens={self.max_episode_tokens} (a multi-turn episode's penalty ramps over "
             "its last overlong_cache_length sampled tokens)")
        need(self.batch_size % self.mini_batch_size == 0, "mini_batch_size",
             f"must divide batch_size={self.batch_size}; pick a divisor")
        self._check_async()
        need(self.reward_high > self.reward_low, "reward_high", "must exceed reward_low")
        need(not self.overlong_penalty or self.overlong_cache_length < self.max_response_tokens
             or self.max_episode_tokens is not None, "overlong_cache_length",  # episodes: checked above
             f"must be < max_response_tokens={self.max_response_tokens} "
             "(the penalty ramps over the last overlong_cache_length tokens)")
        need(self.tiny_hidden_size % self.tiny_heads == 0, "tiny_heads", "must divide tiny_hidden_size")
        need(self.verifier is None or callable(self.verifier)
             or (isinstance(self.verifier, str) and ":" in self.verifier), "verifier",
             "pass a callable or a 'module:function' string")
        need("{answer}" in self.warmstart_response, "warmstart_response",
             "must contain {answer} (e.g. 'Answer: {answer}')")
        need(self.name is None or (bool(self.name) and "/" not in self.name), "name",
             "must be a non-empty folder name without '/'")
        need(isinstance(self.adam_betas, tuple) and len(self.adam_betas) == 2, "adam_betas",
             "must be a pair (beta1, beta2)")
        need(isinstance(self.task_kwargs, Mapping), "task_kwargs", "must map option names to values, e.g. "
             "{'data_files': 'my.jsonl'}")
        object.__setattr__(self, "task_kwargs", dict(self.task_kwargs))
        need(isinstance(self.engine_options, Mapping) and all(isinstance(k, str) for k in self.engine_options),
             "engine_options", "must map keyword names to values, e.g. {'server_url': 'http://127.0.0.1:8000/v1'}")
        object.__setattr__(self, "engine_options", dict(self.engine_options))
        self._check_lora()

    def _normalise_lora_targets(self) -> None:
        """``lora_target_modules`` given as a list or a comma-separated string becomes a tuple."""
        targets = self.lora_target_modules
        if isinstance(targets, str):
            targets = tuple(t.strip() for t in targets.split(",") if t.strip())
        elif isinstance(targets, (list, tuple)):
            targets = tuple(targets)
        object.__setattr__(self, "lora_target_modules", targets)

    def _check_lora(self) -> None:
        """The LoRA fields together (peft is not imported; ranges are checked with every field)."""
        targets = self.lora_target_modules
        if targets is not None and (not targets or not all(isinstance(t, str) and t for t in targets)):
            raise ValueError("TrainConfig.lora_target_modules: module names such as q_proj,v_proj, 'all-linear', or "
                             f"None for the architecture's default (got {self.lora_target_modules!r})")
        if self.lora_rank == 0 and (targets is not None or self.lora_dropout):
            raise ValueError("TrainConfig.lora_target_modules/lora_dropout: set lora_rank >= 1 to train a LoRA adapter "
                             "(lora_rank=0 is full fine-tuning)")

    @property
    def lora(self) -> Any:
        """The run's :class:`~dapo_env.learners.models.lora.LoraSettings`, or ``None`` for full fine-tuning.

        Example:
            >>> TrainConfig(lora_rank=8, lora_target_modules="q_proj,v_proj").lora.target_modules
            ('q_proj', 'v_proj')
            >>> TrainConfig().lora is None
            True
        """
        if not self.lora_rank:
            return None
        from .models.lora import LoraSettings

        return LoraSettings(rank=self.lora_rank, alpha=self.lora_alpha, dropout=self.lora_dropout,
                            target_modules=self.lora_target_modules)

    def _check_async(self) -> None:
        """The policy-loss, rollout-correction and asynchronous-rollout fields together."""

        def need(ok: bool, name: str, msg: str) -> None:
            if not ok:
                raise ValueError(f"TrainConfig.{name}: {msg} (got {getattr(self, name)!r})")

        need(self.loss != "cispo" or self.clip_c is None, "clip_c", "dual clip bounds the PPO surrogate; CISPO "
             "has no such term: set clip_c=None with loss='cispo'")
        worker = self.rollout_worker or self.max_staleness > 0
        need(not (worker and self.difficulty_sampling), "difficulty_sampling", "is not supported with a rollout worker "
             "yet (the worker's env sees the verdicts, the learner's draws the prompts): set max_staleness=0 and "
             "rollout_worker=false, or difficulty_sampling=false")
        need(not (worker and self.lora_rank), "lora_rank", "LoRA is not supported with a rollout worker yet (its "
             "engine copy is the base model): set max_staleness=0 and rollout_worker=false, or lora_rank=0")
        self._check_episodes(worker)

    def _check_episodes(self, worker: bool) -> None:
        """A multi-turn task's settings (the task is looked up in the registry; an unknown name is left to
        the trainer, which raises listing the known tasks)."""
        from dapo_env.tasks import get_task

        try:
            episodes = get_task(self.task).turns == "multi-turn"
        except (KeyError, ValueError):
            return
        if episodes and worker:
            raise ValueError(f"TrainConfig.rollout_worker: {self.task} is multi-turn and a rollout worker plays "
                             "single-turn rounds only for now: set max_staleness=0 and rollout_worker=false")
        if episodes and self.overlong_penalty and self.max_episode_tokens is None:
            raise ValueError(f"TrainConfig.max_episode_tokens: {self.task} is multi-turn, so the soft overlong penalty "
                             "needs the episode's token budget: set max_episode_tokens=N (or overlong_penalty=false)")

    @property
    def uses_rollout_worker(self) -> bool:
        """Generation runs in a separate worker process: ``rollout_worker`` or ``max_staleness > 0``."""
        return self.rollout_worker or self.max_staleness > 0

    # ----------------------------------------------------------------------------------------------
    @property
    def run_name(self) -> str:
        """The run's folder name: ``name`` or ``<task>-<preset>-s<seed>`` (a mixture's ``A-v0:0.7,B-v0:0.3`` written
        ``A-v0@0.7+B-v0@0.3``: no ``:`` or ``,`` in a folder name)."""
        task = self.task.replace(",", "+").replace(":", "@")
        return self.name or f"{task}-{self.preset_name}-s{self.seed}"

    @property
    def run_dir(self) -> Path:
        return Path(self.out_dir) / self.run_name

    def with_overrides(self, overrides: Mapping[str, Any]) -> TrainConfig:
        """A copy with ``overrides`` applied; unknown keys raise listing the valid ones."""
        return dataclasses.replace(self, **_checked(overrides))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (a callable verifier is recorded by its qualified name)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        if callable(self.verifier):
            fn = self.verifier
            out["verifier"] = f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', repr(fn))}"
        out["adam_betas"] = list(self.adam_betas)
        out["task_kwargs"] = dict(self.task_kwargs)
        out["engine_options"] = dict(self.engine_options)
        if self.lora_target_modules is not None:
            out["lora_target_modules"] = list(self.lora_target_modules)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrainConfig:
        """Rebuild from :meth:`to_dict` output (e.g. a run's ``config.json``). An older run's file is read as what it
        ran: a field it lacks takes its preset's value, except ``packing`` (``"off"``, the layout before the field
        existed), and ``tis_cap: C`` is ``is_correction="token-truncate"`` with ``is_cap=C``."""
        data = dict(data)
        data.setdefault("packing", "off")  # a run from before the packing field trained unpacked
        tis_cap = data.pop("tis_cap", None)
        if tis_cap is not None:
            data.update(is_correction="token-truncate", is_cap=tis_cap)
        base = preset(str(data.get("preset_name", "dapo")))
        return base.with_overrides(data)


def _checked(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``overrides`` as TrainConfig fields: unknown keys raise listing the valid ones; a list for
    ``adam_betas`` (from YAML/JSON) becomes the pair it stands for."""
    known = {f.name for f in fields(TrainConfig)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(f"unknown TrainConfig field(s) {unknown}; valid fields: {sorted(known)}")
    clean = dict(overrides)
    if isinstance(clean.get("adam_betas"), list):
        clean["adam_betas"] = tuple(clean["adam_betas"])
    return clean


#: The switches of each algorithm, applied on top of a scale.
ALGORITHMS: dict[str, dict[str, Any]] = {
    "dapo": {},  # the TrainConfig defaults: clip-higher, token-level loss, dynamic sampling, soft overlong penalty
    # naive GRPO: symmetric clip, per-sequence loss averaging, no dynamic sampling, no overlong shaping
    "grpo": dict(clip_high=0.2, loss_agg="seq-mean-token-mean", dynamic_sampling=False, overlong_penalty=False,
                 overlong_filter=False),
}

#: Sizes, lengths, learning rate, model and task of each scale.
SCALES: dict[str, dict[str, Any]] = {
    "paper": {},  # the TrainConfig defaults: 512 prompts x 16 responses, L_max 20480, lr 1e-6 (a real --model)
    # DAPO on the CPU in minutes: a tiny random-init model warm-started on Largest-v0, then RL. The task is
    # Largest-v0 over 5-6 single digits with a uniformly drawn answer: held-out lists are new combinations of
    # seen digits, so the skill (compare, copy the largest) transfers to the test split, and no constant guess
    # scores (docs/tasks.md). Four optimizer steps per rollout batch (32 prompts in mini-batches of 8), so the
    # later ones are off-policy and clip-higher's ranges are active. The overlong penalty ramps over the last
    # 4 of 16 tokens (the answer line is 9 tokens + EOS). One torch thread: at this model size intra-op
    # threading does not pay. Measured numbers: docs/learner.md.
    "tiny": dict(
        task="Largest-v0",
        task_kwargs={"min_value": 0, "max_value": 9, "min_count": 5, "max_count": 6, "uniform_answer": True},
        max_steps=200, group_size=8, batch_size=32, mini_batch_size=8, micro_batch_size=64,
        max_response_tokens=16, overlong_cache_length=4, max_gen_rounds=2, lr=5e-4, warmup_steps=2,
        weight_decay=0.0, warmstart_steps=400, warmstart_lr=3e-3, warmstart_batch_size=64,
        warmstart_target_accuracy=0.2, tiny_hidden_size=128, tiny_layers=2, tiny_heads=4, eval_every=5,
        eval_size=200, checkpoint_every=10, plot_every=10, num_threads=1,
    ),
    # Multi-turn DAPO on the CPU: the tiny model learns to use GuessNumber's "higher"/"lower" replies. n=3, k=2:
    # bisection (2, then 1 or 3) always wins, while a policy that ignores the replies wins at most k/n = 2/3 of
    # the games, and a deterministic (greedy) one that ignores them 1/3 (it repeats its guess) or 2/3. The warm
    # start teaches the bare-number answer at every turn with guesses drawn independently of the replies (so it
    # teaches no strategy); DAPO then trains on whole episodes. The prompt is short on purpose: a random-init
    # model attends almost uniformly, and behind the task's own 233-character prompt the one reply word was
    # too faint a signal (the policy stayed reply-blind for 100+ steps); at ~60 tokens per episode it is read.
    # lr 1e-3 (or the "Answer: <n>" format at 2e-3) broke the stop token within 10 steps; at 5e-4 and 100 steps
    # one seed in three learned; at 3e-4 the replies are read after 80-160 steps in 4 of 5 seeds, so 400 steps
    # (~3 CPU-minutes). Measured: README.
    "guess": dict(
        task="GuessNumber-v0", task_kwargs={"n": 3, "k": 2}, prompt_template="Guess 1-{n}.",
        warmstart_response="{answer}", max_steps=400, group_size=8, batch_size=8, mini_batch_size=2,
        micro_batch_size=64, max_response_tokens=12, overlong_cache_length=4, max_episode_tokens=128,
        tiny_max_positions=256, max_gen_rounds=2, lr=3e-4, warmup_steps=2, weight_decay=0.0, warmstart_steps=25,
        warmstart_lr=3e-3, warmstart_batch_size=32, tiny_hidden_size=128, tiny_layers=2, tiny_heads=4,
        eval_every=5, eval_size=200, checkpoint_every=10, plot_every=10, num_threads=1,
    ),
}

#: Named presets: (algorithm, default scale). ``tiny`` is the CPU default run (DAPO at the tiny scale); ``guess``
#: the multi-turn one (DAPO on GuessNumber-v0 episodes at the tiny scale).
PRESETS: dict[str, tuple[str, str]] = {"dapo": ("dapo", "paper"), "grpo": ("grpo", "paper"), "tiny": ("dapo", "tiny"),
                                       "guess": ("dapo", "guess")}


def preset(name: str, /, *, scale: str | None = None, **overrides: Any) -> TrainConfig:
    """The preset ``name``'s algorithm on ``scale`` (default: the preset's own), with field overrides.

    The scale's ``task_kwargs`` and ``prompt_template`` belong to the scale's task: overriding ``task`` with
    another task without giving them drops them.

    Example:
        >>> preset("dapo").clip_high, preset("tiny").task, preset("grpo", scale="tiny").clip_high
        (0.28, 'Largest-v0', 0.2)
    """
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
    algorithm, default_scale = PRESETS[name]
    scale = default_scale if scale is None else scale
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; choose one of {sorted(SCALES)}")
    overrides = _checked(overrides)
    fields_ = {**SCALES[scale], **ALGORITHMS[algorithm], **overrides}
    base_task = SCALES[scale].get("task", TrainConfig.task)
    if fields_.get("task", base_task) != base_task:  # the scale's task knobs and prompt belong to its own task
        for name_, empty in (("task_kwargs", {}), ("prompt_template", None)):
            if name_ not in overrides:
                fields_[name_] = empty
    return TrainConfig(**{"preset_name": name, **fields_})


#: The paper's ablation (DAPO Table 1) as cumulative overrides on the ``grpo`` preset.
ABLATION: tuple[tuple[str, dict[str, Any]], ...] = (
    ("naive GRPO", {}),
    ("+ overlong filtering", {"overlong_filter": True}),
    ("+ clip-higher", {"overlong_filter": True, "clip_high": 0.28}),
    ("+ soft overlong punishment", {"overlong_filter": True, "clip_high": 0.28, "overlong_penalty": True}),
    ("+ token-level loss", {"overlong_filter": True, "clip_high": 0.28, "overlong_penalty": True,
                            "loss_agg": "token-mean"}),
    ("+ dynamic sampling (DAPO)", {"overlong_filter": True, "clip_high": 0.28, "overlong_penalty": True,
                                   "loss_agg": "token-mean", "dynamic_sampling": True}),
)


def load_overrides(path: str | Path) -> dict[str, Any]:
    """Read config overrides from a YAML (``.yaml``/``.yml``), TOML (``.toml``) or JSON file.

    A top-level ``preset`` key is kept in the result (the CLI applies it first).
    """
    path = Path(path)
    text = path.read_text()
    suffix = path.suffix.lower()
    if suffix in (".yaml", ".yml"):
        import yaml

        data = yaml.safe_load(text) or {}
    elif suffix == ".toml":
        data = tomllib.loads(text)
    elif suffix == ".json":
        data = json.loads(text)
    else:
        raise ValueError(f"config file {path}: use a .yaml, .yml, .toml or .json file")
    if not isinstance(data, dict):
        raise ValueError(f"config file {path} must hold a mapping of field: value, got {type(data).__name__}")
    return data


def build_config(preset_name: str = "dapo", *, scale: str | None = None, config_file: str | Path | None = None,
                 overrides: Mapping[str, Any] | None = None) -> TrainConfig:
    """Preset (on ``scale``), then the file's fields, then explicit overrides (later wins); unknown fields
    raise listing the valid ones."""
    file_data = load_overrides(config_file) if config_file else {}
    name = str(file_data.pop("preset", preset_name))
    return preset(name, scale=scale, **{**file_data, **dict(overrides or {})})  # later wins


__all__ = ["ABLATION", "ALGORITHMS", "PRECISIONS", "PRESETS", "SCALES", "TrainConfig", "build_config", "load_overrides",
           "preset"]
