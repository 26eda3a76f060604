from __future__ import annotations

import json
from pathlib import Path

import pytest

from dapo_env.learners.config import ABLATION, TrainConfig, build_config, load_overrides, preset


def test_paper_defaults() -> None:
    cfg = TrainConfig()
    assert (cfg.clip_low, cfg.clip_high, cfg.group_size, cfg.loss_agg) == (0.2, 0.28, 16, "token-mean")
    assert cfg.dynamic_sampling and cfg.overlong_penalty and not cfg.overlong_filter
    assert (cfg.max_response_tokens, cfg.overlong_cache_length) == (20480, 4096)
    assert (cfg.reward_low, cfg.reward_high, cfg.temperature, cfg.top_p) == (-1.0, 1.0, 1.0, 1.0)
    assert (cfg.lr, cfg.grad_clip) == (1e-6, 1.0) and cfg.warmup_steps > 0


def test_grpo_preset_is_naive_grpo() -> None:
    cfg = preset("grpo")
    assert cfg.clip_high == cfg.clip_low == 0.2
    assert cfg.loss_agg == "seq-mean-token-mean"
    assert not cfg.dynamic_sampling and not cfg.overlong_penalty and not cfg.overlong_filter


def test_ablation_rows_are_valid_configs_ending_in_dapo() -> None:
    rows = [preset("grpo", **overrides) for _, overrides in ABLATION]
    last, dapo = rows[-1], preset("dapo")
    for field in ("clip_high", "loss_agg", "dynamic_sampling", "overlong_penalty"):
        assert getattr(last, field) == getattr(dapo, field)
    assert len({(r.overlong_filter, r.clip_high, r.overlong_penalty, r.loss_agg, r.dynamic_sampling)
                for r in rows}) == len(rows)


@pytest.mark.parametrize(("field", "value", "hint"), [
    ("group_size", 1, "at least 2"),
    ("mini_batch_size", 3, "divide batch_size"),
    ("loss_agg", "mean", "choose a registered aggregation"),
    ("ratio_level", "seq", "'sequence' is GSPO"),
    ("advantage", "gae", "registered advantage estimator"),
    ("engine", "sglang", "choose one of"),
    ("temperature", 0.0, "temperature > 0"),
    ("clip_c", 0.5, "> 1"),
    ("verifier", "nocolon", "module:function"),
    ("overlong_cache_length", 30000, "must be < max_response_tokens"),
])
def test_validation_names_field_and_fix(field: str, value: object, hint: str) -> None:
    with pytest.raises(ValueError, match=field) as info:
        TrainConfig(**{field: value})
    assert hint in str(info.value)


def test_unknown_override_lists_fields() -> None:
    with pytest.raises(ValueError, match="unknown TrainConfig field.*group_sise"):
        preset("dapo").with_overrides({"group_sise": 8})
    with pytest.raises(ValueError, match="choose one of"):
        preset("nope")


def test_yaml_toml_json_overrides(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text("preset: grpo\ngroup_size: 8\nadam_betas: [0.9, 0.95]\ntask_kwargs:\n  max_value: 9\n")
    (tmp_path / "c.toml").write_text('preset = "tiny"\nlr = 0.002\noverlong_filter = true\n')
    (tmp_path / "c.json").write_text(json.dumps({"clip_high": 0.3}))
    y = build_config("dapo", config_file=tmp_path / "c.yaml")
    assert (y.preset_name, y.group_size, y.adam_betas, y.task_kwargs["max_value"]) == ("grpo", 8, (0.9, 0.95), 9)
    t = build_config("dapo", config_file=tmp_path / "c.toml", overrides={"seed": 3})
    assert (t.preset_name, t.lr, t.overlong_filter, t.seed) == ("tiny", 0.002, True, 3)
    assert build_config("dapo", config_file=tmp_path / "c.json").clip_high == 0.3
    assert load_overrides(tmp_path / "c.toml")["lr"] == 0.002
    (tmp_path / "c.txt").write_text("x")
    with pytest.raises(ValueError, match="yaml"):
        load_overrides(tmp_path / "c.txt")


def test_round_trip_through_dict() -> None:
    cfg = preset("tiny", seed=5, verifier="os.path:exists")
    again = TrainConfig.from_dict(json.loads(json.dumps(cfg.to_dict())))
    assert again == cfg
    assert cfg.run_dir == Path("runs") / "Largest-v0-tiny-s5"


def test_wrong_type_names_the_field() -> None:
    with pytest.raises(ValueError, match="TrainConfig.lr: must be a number"):
        TrainConfig(lr="3e-4")  # type: ignore[arg-type]


def test_flags_override_the_config_file_and_task_knobs_follow_the_task(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text("preset: tiny\nlr: 0.002\ntask: Arithmetic-v0\n")
    cfg = build_config("dapo", config_file=tmp_path / "c.yaml", overrides={"lr": 0.003})
    assert (cfg.preset_name, cfg.lr, cfg.task, cfg.task_kwargs) == ("tiny", 0.003, "Arithmetic-v0", {})
    kept = preset("tiny", task="Largest-v0")  # the scale's own task keeps its knobs
    assert kept.task_kwargs == preset("tiny").task_kwargs
    assert preset("tiny", task="Sort-v0", task_kwargs={"max_count": 4}).task_kwargs == {"max_count": 4}
    with pytest.raises(ValueError, match="unknown TrainConfig field.*tiny_hiden"):
        preset("tiny", tiny_hiden=3)


def test_incompatible_settings_are_refused_by_the_config_naming_the_fix() -> None:
    from dapo_env.learners.algo.collective import World, shard_config

    with pytest.raises(ValueError, match="TrainConfig.rollout_worker: GuessNumber-v0 is multi-turn.*max_staleness=0"):
        preset("guess", rollout_worker=True)
    with pytest.raises(ValueError, match="TrainConfig.max_episode_tokens.*max_episode_tokens=N.*overlong_penalty=false"):
        preset("guess", max_episode_tokens=None)
    with pytest.raises(ValueError, match="under torchrun set max_staleness=0 and rollout_worker=false"):
        shard_config(preset("tiny", max_staleness=1), World(rank=0, world_size=2))
    assert shard_config(preset("tiny"), World(rank=1, world_size=2)).batch_size == 16


def test_an_older_config_with_tis_cap_loads_as_the_one_importance_sampling_path() -> None:
    old = {**preset("tiny").to_dict(), "tis_cap": 3.0}
    cfg = TrainConfig.from_dict(old)
    assert (cfg.is_correction, cfg.is_cap) == ("token-truncate", 3.0)
    assert TrainConfig.from_dict({**preset("tiny").to_dict(), "tis_cap": None}).is_correction is None
    with pytest.raises(ValueError, match="unknown TrainConfig field"):
        TrainConfig(max_steps=1).with_overrides({"tis_cap": 2.0})
