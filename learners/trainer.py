"""The DAPO training loop (Yu et al. 2025, Algorithm 1), top to bottom, calling tested pieces.

One step (:meth:`Trainer.train_step`): sample a batch of informative groups from the task's group env
(``DynamicSampler``: generation, verification and reward shaping in the env layer), build the padded
sequence batch, group advantages, the old policy's log-probs, then :func:`~dapo_env.learners.update.update_policy`
(mini-batches, accumulation with global denominators, clipping, optimizer steps, a weight push to the
engine after each), then the step's metrics. The same loop runs on one process or on W data-parallel
ranks: a :class:`~dapo_env.learners.collective.Collective` supplies what differs.

Example:
    >>> from dapo_env.learners.config import preset
    >>> result = train(preset("tiny", max_steps=1, warmstart_steps=0, out_dir=tmp))  # doctest: +SKIP
    >>> result.metrics[-1]["step"]  # doctest: +SKIP
    1
"""

from __future__ import annotations

import json
import shutil
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from . import checkpoint as ckpt
from .batch import autocast_dtype, batch_logprobs, build_sequence_batch, logprob_mismatch
from .checkpoint import build_model
from .collective import Collective, LocalCollective
from .config import TrainConfig
from .engine import RolloutEngine, make_engine, weights_fingerprint
from .evaluation import evaluate, load_eval_problems
from .lora import adapter_state_dict, has_lora
from .losses import TurnRewards, get_advantage
from .metrics import MetricsLog, plot_metrics, progress_postfix, read_metrics, rollout_record, update_record
from .rollout import POLICY_STEP, chat_tokenizer, check_context, make_sampler, resolve_task
from .run_folder import eval_samples_path, write_eval_samples
from .sources import make_rollout_source
from .threads import LEARNER, ThreadBudget, mean_threads
from .update import behaviour_logprobs, derive_seed, lr_lambda, make_optimizer, param_drift, update_policy
from dapo_env.types import Group


@dataclass
class TrainResult:
    """What :func:`train` returns: the run folder, every metrics record, and the trained model."""

    run_dir: Path
    metrics: list[dict[str, Any]]
    model: Any = None
    tokenizer: Any = None
    eval_history: list[tuple[int, float]] = field(default_factory=list)

    @property
    def final_eval_accuracy(self) -> float | None:
        return self.eval_history[-1][1] if self.eval_history else None

    @property
    def initial_eval_accuracy(self) -> float | None:
        return self.eval_history[0][1] if self.eval_history else None


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped training after a step; a checkpoint of that step was written (the message says how to
    resume)."""

    def __init__(self, run_dir: Path, step: int, checkpoint: Path) -> None:
        self.run_dir, self.step, self.checkpoint = run_dir, step, checkpoint
        super().__init__(f"interrupted after step {step}; checkpoint {checkpoint}; resume with: "
                         f"dapo-env train --resume {run_dir}")


class Trainer:
    """Owns the model, optimizer, engine, sampler and run folder; :meth:`fit` runs the loop.

    Args:
        config: the run's settings (global sizes; each rank takes its share).
        model, tokenizer: a model to train (default: :func:`build_model`, or the checkpoint's on resume).
        engine: a :class:`RolloutEngine`; default ``make_engine(config.engine, ...)``.
        collective: data parallelism (default :class:`LocalCollective`: one process).
        resume: continue from the newest checkpoint in the run folder.
        overwrite: a fresh run replaces an existing run folder (otherwise a non-empty folder is refused).
        warm_start: a callable ``(model, tokenizer, task) -> dict`` run before training on a fresh run.

    Example:
        >>> trainer = Trainer(preset("tiny", max_steps=2))  # doctest: +SKIP
        >>> result = trainer.fit()  # doctest: +SKIP
    """

    def __init__(self, config: TrainConfig, *, model: Any = None, tokenizer: Any = None,
                 engine: RolloutEngine | None = None, collective: Collective | None = None, resume: bool = False,
                 overwrite: bool = False, warm_start: Callable[..., dict[str, Any]] | None = None) -> None:
        self.collective = collective = collective or LocalCollective()
        self.run_config = config  # the run's settings, as written to config.json
        self.cfg = cfg = collective.local_config(config)  # this rank's share (the same on one process)
        if cfg.num_threads:
            torch.set_num_threads(cfg.num_threads)
        self.run_dir, self.device = config.run_dir, torch.device(cfg.device)
        error = ckpt.check_run_dir(self.run_dir, resume=resume, overwrite=overwrite) if collective.is_main else None
        error = collective.broadcast(error)
        if error:
            raise (ValueError if resume and overwrite else FileNotFoundError if resume else FileExistsError)(error)
        latest = collective.broadcast(str(ckpt.latest_checkpoint(self.run_dir) or "") if resume else "")
        latest = Path(latest) if latest else None
        if latest is not None and not (latest / "trainer_state.pt").exists():
            raise FileNotFoundError(f"cannot read checkpoint {latest} from rank {collective.world.rank}: put the run "
                                    "folder on a filesystem every node mounts at the same path")
        try:
            self._build(model, tokenizer, engine, latest, warm_start)
        except BaseException:
            if latest is None and not resume and collective.is_main:  # a failed fresh run leaves no folder behind
                shutil.rmtree(self.run_dir, ignore_errors=True)
            raise

    def _build(self, model: Any, tokenizer: Any, engine: RolloutEngine | None, latest: Path | None,
               warm_start: Callable[..., dict[str, Any]] | None) -> None:
        cfg, collective, main = self.cfg, self.collective, self.collective.is_main
        self.task = resolve_task(cfg)
        self.eval_problems = load_eval_problems(self.task, split=cfg.eval_split, size=cfg.eval_size,
                                                task_kwargs=dict(cfg.task_kwargs))
        built_here = model is None
        if model is None:  # every rank builds the same model (the run's seed), then rank 0's weights win
            model, tokenizer = ckpt.load_model(latest) if latest is not None else build_model(self.run_config)
        elif latest is not None:
            ckpt.load_model_weights(model, latest)  # a model passed in continues from the checkpoint's weights
        if tokenizer is None:
            raise ValueError("pass the tokenizer together with the model")
        self.chat = chat_tokenizer(cfg, self.task, tokenizer)  # renders prompts (always for episodes)
        check_context(model, tokenizer, cfg, self.task, self.eval_problems[:8])
        model = model.to(self.device)
        if main:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            if latest is None:  # (re)starting from step 0, e.g. resuming a run killed before its first checkpoint
                (self.run_dir / "metrics.jsonl").unlink(missing_ok=True)
        warmed = latest is None and warm_start is not None and cfg.warmstart_steps > 0  # on rank 0, then broadcast
        if warmed and main:
            stats = warm_start(model, tokenizer, self.task)
            (self.run_dir / "warmstart.json").write_text(json.dumps(stats, indent=2))
        self._lora_base = ckpt.attach_lora(model, tokenizer, cfg, self.run_dir, latest, is_main=main,
                                           base_unchanged=not warmed and built_here)
        collective.broadcast_model(model)  # identical starting weights everywhere (rank 0's warm start included)
        self.model, self.rollout_model = collective.prepare(model)  # rollout_model holds the full weights
        self.tokenizer = tokenizer
        self.engine = engine if engine is not None else make_engine(
            cfg.engine, self.rollout_model, tokenizer, device=cfg.device, seed=cfg.seed,
            autocast_dtype=autocast_dtype(cfg.precision), **cfg.engine_options)
        self.optimizer, self.scheduler = make_optimizer(self.model, cfg)
        self.advantage = get_advantage(cfg.advantage)
        self.threads = learner_threads(cfg, self.model)
        self.source = make_rollout_source(cfg, self.task, self.engine, tokenizer=tokenizer, model=self.rollout_model,
                                          threads=self.threads)
        self.sampler = make_sampler(cfg, self.source)
        self.metrics_log = MetricsLog(self.run_dir / "metrics.jsonl") if main else None
        self.step, self.optimizer_steps, self._records = 0, 0, []
        self.eval_history: list[tuple[int, float]] = []
        self._stop_requested = False
        self._t_start, self._cpu_start = time.perf_counter(), time.process_time()
        if main:
            (self.run_dir / "config.json").write_text(json.dumps(self.run_config.to_dict(), indent=2, default=str))
        self.init_params = ckpt.init_reference(self.run_dir, self.rollout_model, fresh=latest is None) if main else {}
        if latest is not None:
            self._load(latest)
        self._push_weights()
        self._publish()

    def close(self) -> None:
        """Stop the rollout source (its verifier pool, worker process)."""
        self.source.close()

    # --- weights and checkpoints --------------------------------------------------------------------
    def _push_weights(self) -> None:
        """Send the learner's weights to the engine and check the engine now holds exactly them."""
        state = self.collective.full_state_dict(self.model)  # a collective under FSDP: every rank pushes
        if has_lora(self.rollout_model):  # adapter-only sync: the base is frozen and already in the engine
            adapter = adapter_state_dict(self.rollout_model)
            state = {name: state[name] for name in adapter}
        version = self.engine.weights_version
        self.engine.load_weights(state)
        held = self.engine.fingerprint(list(state)) if has_lora(self.rollout_model) else self.engine.fingerprint()
        if self.engine.weights_version != version + 1 or held != weights_fingerprint(state):
            raise RuntimeError("weight push to the rollout engine did not take effect: its fingerprint differs "
                               "from the learner's; check the engine's load_weights")

    def save(self) -> Path:
        """Write a checkpoint of the completed steps: every rank's sampler and RNG state, gathered to the
        main rank, which writes it atomically; then a barrier."""
        ranks = self.collective.gather({"sampler": self.sampler.state_dict(), "rng": ckpt.capture_rng_state()})
        optimizer = self.collective.optimizer_state_dict(self.model, self.optimizer)  # a collective under FSDP
        path = self.run_dir / "checkpoints" / f"step_{self.step:06d}"
        if self.collective.is_main:
            state = {"optimizer": optimizer, "scheduler": self.scheduler.state_dict(), "ranks": ranks,
                     "world_size": self.collective.world.world_size, "optimizer_steps": self.optimizer_steps,
                     "eval_history": self.eval_history, "config": self.run_config.to_dict()}
            path = ckpt.save_checkpoint(self.run_dir, self.step, model=self.rollout_model, tokenizer=self.tokenizer,
                                        trainer_state=state, keep=self.cfg.keep_checkpoints, base_model=self._lora_base)
        self.collective.barrier()
        return path

    def _load(self, checkpoint: Path) -> None:
        state = ckpt.load_trainer_state(checkpoint)
        world = self.collective.world.world_size
        if int(state.get("world_size", 1)) != world:
            raise ValueError(f"checkpoint {checkpoint} was written by {state.get('world_size', 1)} ranks; resume with "
                             f"the same total number of processes (now {world})")
        self.collective.load_optimizer_state_dict(self.model, self.optimizer, state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        mine = state["ranks"][self.collective.world.rank]
        self.sampler.load_state_dict(mine["sampler"])
        self.step, self.optimizer_steps = int(state["step"]), int(state["optimizer_steps"])
        self.eval_history = [tuple(x) for x in state.get("eval_history", [])]
        ckpt.restore_rng_state(mine["rng"])
        if self.metrics_log is not None:
            self.metrics_log.truncate_after(self.step)

    def _publish(self) -> None:
        """Hand the rollout source the weights of training step ``self.step`` (a no-op in-process)."""
        self.source.publish(self.step, self.collective.full_state_dict(self.model))

    def _balanced(self, groups: tuple[Group, ...]) -> tuple[Group, ...]:
        """Every rank keeps the same number of groups; a rank holding more defers the rest to its next batch."""
        keep = self.collective.agree_on_count(len(groups))
        self.sampler.defer(groups[keep:])
        return groups[:keep]

    # --- one step ----------------------------------------------------------------------------------------
    def train_step(self) -> dict[str, Any]:
        """Sample -> batch -> advantages -> old log-probs -> update -> record (one record, combined over ranks)."""
        cfg, t0 = self.cfg, time.perf_counter()
        weights_version = self.engine.weights_version  # fresh samples carry it; surplus groups an older one
        self._thread_counts()  # the evaluation's units since the last step are not this step's
        rollout = self.sampler.sample()
        groups = self._balanced(rollout.groups)
        deferred = len(rollout.groups) - len(groups)
        record = rollout_record(
            rollout.stats, groups, step=self.step + 1, batch_size=cfg.batch_size, rollout_s=time.perf_counter() - t0,
            deferred=deferred if deferred or self.collective.world.world_size > 1 else None,
            policy_steps=[info.get(POLICY_STEP) for g in groups for info in g.infos], max_staleness=cfg.max_staleness)
        update: dict[str, Any] = {}
        if groups:
            t1 = time.perf_counter()
            batch = build_sequence_batch(groups, pad_id=self._pad_id()).to(self.device)  # N = len(groups) * G rows
            rewards = torch.tensor([r for g in groups for r in g.rewards], dtype=torch.float32, device=self.device)
            advantages = self.advantage(rewards, batch.loss_mask, group_size=cfg.group_size,
                                        scale_by_std=cfg.scale_adv_by_std,
                                        turns=TurnRewards(batch.turn_rewards, batch.turn_mask, batch.token_turns))
            old_logp = self._old_logprobs(batch, groups)
            result = update_policy(self.model, self.optimizer, batch, advantages, cfg, key=(cfg.seed, self.step),
                                   old_logp=old_logp, scheduler=self.scheduler, collective=self.collective,
                                   on_optimizer_step=self._push_weights)
            self.optimizer_steps += result.optimizer_steps
            update = {**result.metrics, "update_s": time.perf_counter() - t1,
                      "trained_tokens": float(batch.loss_mask.sum()) * cfg.epochs_per_batch}
            record.update(logprob_mismatch(batch, result.old_logp, weights_version))
        record.update(update_record(
            update, lr=self.scheduler.get_last_lr()[0], optimizer_steps=self.optimizer_steps,
            drift=param_drift(self.rollout_model, self.init_params) if self.init_params else None,
            is_correction=cfg.is_correction is not None))
        self.step += 1
        self._publish()
        record.update(self._thread_counts(), **self._clock(t0))  # this step's units of work, then timing
        return self.collective.reduce_record(record)

    def _thread_counts(self) -> dict[str, float]:
        """Take the thread budget's counts since the last call: the learner's mean threads per unit of work
        (empty without a budget, or when no unit ran)."""
        mean = mean_threads(self.threads.take_counts()) if self.threads is not None else None
        return {} if mean is None else {"perf/learner_threads_mean": mean}

    def _old_logprobs(self, batch: Any, groups: tuple[Group, ...]) -> torch.Tensor | None:
        """The old policy's (N, R) log-probs. ``None`` when one optimizer step covers the whole batch: the
        update's own forward gives them. With ``keep_surplus=True`` and no ``is_correction``, a stale sample's (one
        from older weights) are the engine's at sampling time, the behaviour policy's (a batch of only such samples,
        the usual one of an asynchronous run, needs no forward pass for them); with an ``is_correction`` they are
        recomputed (the proximal policy's) and the correction's weight accounts for the staleness."""
        cfg = self.cfg
        stale = torch.tensor([info.get(POLICY_STEP, self.step) < self.step for g in groups for info in g.infos],
                             device=self.device)  # (N,)
        behaviour = cfg.keep_surplus and cfg.is_correction is None and bool(stale.any())  # else the IS weight corrects
        if (cfg.epochs_per_batch == 1 and len(groups) <= cfg.mini_batch_size and cfg.is_correction is None
                and not behaviour):
            return None
        if behaviour and bool((stale & batch.has_rollout_logprobs).all()):  # every row is the engine's: no pass
            return batch.rollout_logprobs.to(self.device, torch.float32, copy=True)  # = behaviour_logprobs(old, ...)
        old = batch_logprobs(self.model, batch, micro_batch_size=cfg.micro_batch_size, temperature=cfg.temperature,
                             precision=cfg.precision)
        return behaviour_logprobs(old, batch.rollout_logprobs, batch.has_rollout_logprobs, stale) if behaviour else old

    def _clock(self, t0: float) -> dict[str, float]:
        now = time.perf_counter()
        return {"time/step_s": now - t0, "time/elapsed_s": now - self._t_start,
                "time/cpu_s": time.process_time() - self._cpu_start}  # this process's CPU time (all threads)

    def _pad_id(self) -> int:
        pad = self.tokenizer.pad_token_id
        return int(pad) if pad is not None else int(self.tokenizer.eos_token_id)

    def evaluate(self) -> float:
        """Held-out accuracy on the first ``eval_size`` problems of ``eval_split`` (greedy unless
        ``eval_temperature > 0``, fixed seed); the main rank evaluates, writes the samples to
        ``eval/step_<N>.jsonl`` and tells the others."""
        cfg, accuracy = self.cfg, None
        if self.collective.is_main:
            result = evaluate(
                self.engine, self.task, self.eval_problems, max_response_tokens=cfg.max_response_tokens,
                temperature=cfg.eval_temperature,
                seed=derive_seed(self.run_config.seed, 2**31, 0) if cfg.eval_temperature > 0 else 0,
                tokenizer=self.chat,
                max_turns=cfg.max_turns, max_episode_tokens=cfg.max_episode_tokens)
            write_eval_samples(eval_samples_path(self.run_dir, self.step), result.records)  # what the report shows
            accuracy = result.accuracy
        accuracy = float(self.collective.broadcast(accuracy))
        self.eval_history.append((self.step, accuracy))
        return accuracy

    # --- the loop --------------------------------------------------------------------------------------
    @contextmanager
    def _stop_on_interrupt(self) -> Iterator[None]:
        """First Ctrl-C: finish this step, checkpoint and stop; a second one aborts at once."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = signal.getsignal(signal.SIGINT)

        def handler(signum: int, frame: Any) -> None:
            if self._stop_requested:
                raise KeyboardInterrupt
            self._stop_requested = True
            print("\nCtrl-C: stopping after this step with a checkpoint (Ctrl-C again to abort now)",
                  file=sys.stderr, flush=True)

        signal.signal(signal.SIGINT, handler)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)

    def _log(self, record: dict[str, Any]) -> None:
        self._records.append(record)
        if self.metrics_log is not None:
            self.metrics_log.write(record)

    def fit(self) -> TrainResult:
        """Run until ``max_steps``, evaluating, logging, plotting and checkpointing on the way.

        Ctrl-C finishes the current step, writes a checkpoint and raises :class:`TrainingInterrupted`.
        """
        cfg, main = self.cfg, self.collective.is_main
        bar = tqdm(total=cfg.max_steps, initial=self.step, desc=cfg.run_name, disable=not (cfg.progress and main),
                   dynamic_ncols=True)
        try:
            with self._stop_on_interrupt():
                if self.step == 0:
                    t = time.perf_counter()
                    self._log({"step": 0, "eval/accuracy": self.evaluate(), "time/eval_s": time.perf_counter() - t})
                    self._refresh_report()
                while self.step < cfg.max_steps:
                    record = self.train_step()
                    last = self.step == cfg.max_steps
                    if (cfg.eval_every and self.step % cfg.eval_every == 0) or last:
                        t = time.perf_counter()
                        record["eval/accuracy"] = self.evaluate()
                        record["time/eval_s"] = time.perf_counter() - t
                    self._log(record)
                    if "eval/accuracy" in record:
                        self._refresh_report()
                    bar.update(1)
                    bar.set_postfix(progress_postfix(record, self.eval_history))
                    if main and cfg.plot_every and (self.step % cfg.plot_every == 0 or last):
                        self.plot()
                    saved = cfg.checkpoint_every and (self.step % cfg.checkpoint_every == 0 or last)
                    if saved:
                        self.save()
                    if self.collective.any(self._stop_requested) and not last:
                        raise TrainingInterrupted(self.run_dir, self.step, self.save() if not saved else
                                                  self.run_dir / "checkpoints" / f"step_{self.step:06d}")
        finally:
            bar.close()
            self.close()
        metrics = read_metrics(self.metrics_log.path) if self.metrics_log is not None else list(self._records)
        return TrainResult(self.run_dir, metrics, self.model, self.tokenizer, list(self.eval_history))

    def _refresh_report(self) -> None:
        """Rewrite ``report.html`` after an evaluation (``report_every_eval``, main rank). The report is
        written atomically; a failed refresh is warned about (once per cause) and never stops training."""
        if not (self.cfg.report_every_eval and self.collective.is_main):
            return
        from .report import write_report

        try:
            write_report(self.run_dir)
        except Exception as err:  # noqa: BLE001 (a report is a view of the run, never a reason to stop it)
            warnings.warn(f"report.html not refreshed ({type(err).__name__}: {err}); `dapo-env report "
                          f"{self.run_dir}` retries", RuntimeWarning, stacklevel=2)

    def plot(self) -> Path:
        return plot_metrics(read_metrics(self.metrics_log.path), self.run_dir / "curves.png",
                            title=f"{self.cfg.run_name} ({self.cfg.preset_name})")


def learner_threads(cfg: TrainConfig, model: Any) -> ThreadBudget | None:
    """With a rollout worker, the :class:`~dapo_env.learners.threads.ThreadBudget` of ``cfg.num_threads``
    torch threads (``None``: torch's count now) that the learner shares with it, attached to the learner's
    ``model`` (each layer's forward and backward runs with the learner's threads of that moment); ``None`` without a worker (the learner keeps ``cfg.num_threads``). Rollout workers run on one
    process only (``collective.local_config`` refuses more), so ``model`` is the plain HF model."""
    if not cfg.uses_rollout_worker:
        return None
    budget = ThreadBudget(cfg.num_threads or torch.get_num_threads(), cfg.num_threads_split)
    budget.attach(model, LEARNER)
    return budget


def train(config: TrainConfig, *, resume: bool = False, overwrite: bool = False, **kwargs: Any) -> TrainResult:
    """Run one training job programmatically and return its metrics (what the CLI and benchmarks call).

    ``kwargs`` go to :class:`Trainer` (``model``, ``tokenizer``, ``engine``, ``collective``, ``warm_start``);
    without a ``warm_start`` the config's own (the tiny model's supervised warm start) is used.

    Example:
        >>> from dapo_env.learners.config import preset
        >>> res = train(preset("tiny", max_steps=2, out_dir="/tmp/runs"))  # doctest: +SKIP
        >>> res.final_eval_accuracy  # doctest: +SKIP
    """
    warm = kwargs.pop("warm_start", None)
    if warm is None and config.warmstart_steps > 0 and kwargs.get("model") is None and config.model is None:
        from .warmstart import warm_start_for

        warm = warm_start_for(config)
    return Trainer(config, resume=resume, overwrite=overwrite, warm_start=warm, **kwargs).fit()


__all__ = ["TrainResult", "Trainer", "TrainingInterrupted", "build_model", "check_context", "lr_lambda",
           "param_drift", "train"]  # the last four live in checkpoint, rollout and update: re-exported here
