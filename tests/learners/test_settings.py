"""Settings in one place: every ``TrainConfig`` field has a generated ``train`` flag and every flag a field, each
read as its field's type; one validator checks every count and range; older runs' ``config.json`` still load."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from dapo_env.learners.cli import build_parser, config_from_args
from dapo_env.learners.cli_settings import NOT_FLAGS, flag_for
from dapo_env.learners.config import TrainConfig, preset
from dapo_env.learners.settings import field_specs

HERE = Path(__file__).parent
#: ``train`` flags that are not TrainConfig fields: how to build the config, not what it holds.
COMMAND_FLAGS = {"help", "preset", "config", "resume", "overwrite", "server_url", "weight_sync", "set", "fsdp", "debug"}


def _train_parser() -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
    return sub.choices["train"]


def test_every_field_has_a_flag_and_every_flag_a_field() -> None:
    flags = {a.dest: a.option_strings for a in _train_parser()._actions if a.option_strings}  # noqa: SLF001
    fields = set(field_specs(TrainConfig)) - NOT_FLAGS
    assert fields - set(flags) == set(), "TrainConfig fields without a train flag"
    assert set(flags) - fields - COMMAND_FLAGS == set(), "train flags that set no TrainConfig field"
    for name in fields:
        assert set(flag_for(name)) <= set(flags[name]), f"{name}: flag spelled {flags[name]}"
        assert field_specs(TrainConfig)[name].help, f"TrainConfig.{name} has no docstring (its flag's help)"


def test_flags_are_read_as_their_fields_types() -> None:
    args = _train_parser().parse_args([
        "--packing", "off", "--no-dynamic-sampling", "--adam-betas", "0.9,0.95", "--num-threads", "none",
        "--task-kwargs", "{max_value: 5}", "--lr", "3e-4", "--run-name", "r", "--no-progress", "--max-steps", "7",
        "--lora-target-modules", "q_proj,v_proj", "--lora-rank", "4", "--clip-c", "3"])
    cfg, _ = config_from_args(args)
    assert (cfg.packing, cfg.dynamic_sampling, cfg.adam_betas, cfg.num_threads) == ("off", False, (0.9, 0.95), None)
    assert (cfg.task_kwargs, cfg.lr, cfg.name, cfg.progress, cfg.max_steps) == ({"max_value": 5}, 3e-4, "r", False, 7)
    assert (cfg.lora_target_modules, cfg.lora_rank, cfg.clip_c) == (("q_proj", "v_proj"), 4, 3.0)
    with pytest.raises(SystemExit):  # argparse: an integer field refuses a word, naming the field
        _train_parser().parse_args(["--max-steps", "many"])


def _outside(spec) -> object:  # noqa: ANN001
    """A value just outside a field's range."""
    bound = spec.range.low if spec.range.low is not None else spec.range.high
    below = spec.range.low is not None
    if spec.kind == "int":
        return int(bound) - 1 if below else int(bound) + 1
    step = 0.0 if (spec.range.low_open if below else spec.range.high_open) else 0.5
    return bound - step if below else bound + step


@pytest.mark.parametrize("name", [n for n, s in field_specs(TrainConfig).items() if s.range is not None])
def test_one_validator_refuses_every_count_and_range(name: str) -> None:
    spec = field_specs(TrainConfig)[name]
    with pytest.raises(ValueError, match=rf"^TrainConfig\.{name}: must be ") as err:
        TrainConfig(**{name: _outside(spec)})
    assert "\n" not in str(err.value)
    if spec.kind == "int":
        with pytest.raises(ValueError, match=rf"^TrainConfig\.{name}: must be an integer"):
            TrainConfig(**{name: True})  # a boolean is not a count


def test_older_runs_config_files_still_load() -> None:
    written = json.loads((HERE / "old_configs" / "tiny_lora_main_20cb5be.json").read_text())
    cfg = TrainConfig.from_dict(written)
    assert (cfg.preset_name, cfg.seed, cfg.lora_rank, cfg.lora_target_modules) == ("tiny", 3, 8, ("q_proj", "v_proj"))
    assert cfg == preset("tiny", seed=3, lora_rank=8, lora_alpha=16, lora_target_modules="q_proj,v_proj", packing="off")
    assert TrainConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    # an older run still: no packing, keep_surplus, LoRA or thread fields yet, the IS cap as tis_cap
    newer = {"packing", "gradient_checkpointing", "keep_surplus", "num_threads_split", "lora_rank", "lora_alpha",
             "lora_dropout", "lora_target_modules", "is_correction", "is_cap", "rollout_timeout_s"}
    old = {k: v for k, v in preset("tiny").to_dict().items() if k not in newer} | {"tis_cap": 2.0}
    cfg = TrainConfig.from_dict(json.loads(json.dumps(old)))
    assert (cfg.packing, cfg.is_correction, cfg.is_cap, cfg.keep_surplus) == ("off", "token-truncate", 2.0, True)
