"""The RL update's typed configuration (``runner/trainer/update_config.py``): built from the flat
settings the flags and presets name, written alike as flat keys or as its own TOML tables, and
every choice checked with a message that names the setting."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from cuda_agent.runner import cli
from cuda_agent.runner.config import TrainConfig, presets, read_toml
from cuda_agent.runner.trainer.update_config import (
    GaeAdvantage,
    GroupAdvantage,
    GuardConfig,
    LossConfig,
    UpdateConfig,
)


def _toml(tmp_path: Path, text: str) -> dict:
    path = tmp_path / "settings.toml"
    path.write_text(text)
    return read_toml(str(path))


@pytest.mark.parametrize(
    "cls", [GroupAdvantage, GaeAdvantage, LossConfig, GuardConfig, UpdateConfig]
)
def test_each_field_reads_a_setting_with_the_same_default(cls):
    # TrainConfig's defaults are read from these classes (one place); this holds that every
    # field names a flat setting and that none of them was given a default of its own
    defaults = {f.name: f.default for f in dataclasses.fields(TrainConfig)}
    for field in dataclasses.fields(cls):
        if "flag" in field.metadata:
            assert field.default == defaults[field.metadata["flag"]], field.name


def test_the_stages_updates_from_the_flat_settings():
    config = TrainConfig(
        advantage="gae", gae_lambda=0.9, value_clip=0.1, value_lr=0.5, rl_warmup_advantage="rloo",
        turn_discount=0.3, eps_high=0.3, aggregation="seq-mean-token-sum-norm", max_new_tokens=64,
        kl_coef=0.0, guard_max_ratio=5.0, guard_action="stop", micro_batch=2, updates_per_batch=3,
    )  # fmt: skip
    rl = config.update_config("rl")
    assert rl == UpdateConfig(
        GaeAdvantage(lam=0.9, value_clip=0.1, critic_lr=0.5),
        LossConfig(eps_high=0.3, aggregation="seq-mean-token-sum-norm", max_tokens=64),
        GuardConfig(max_ratio=5.0, action="stop"),
        micro_batch=2,
        updates_per_batch=3,
    )
    assert rl.advantage.needs_critic and config.needs_critic
    warmup = config.update_config("rl_warmup")
    assert warmup.advantage == GroupAdvantage("rloo", turn_discount=0.3)
    assert not warmup.advantage.needs_critic and warmup.loss == rl.loss
    assert config.critic == rl.advantage
    assert not TrainConfig(value_steps=0).needs_critic


def test_the_update_tables_are_the_flat_keys(tmp_path):
    nested = _toml(
        tmp_path,
        '[rl.advantage]\nkind = "gae"\nlam = 0.9\nvalue_clip = 0.1\n'
        '[rl.loss]\neps_low = 0.1\naggregation = "seq-mean-token-mean"\n'
        '[rl.guard]\nmax_ratio = 5.0\naction = "stop"\n'
        '[rl_warmup.advantage]\nkind = "dr_grpo"\n',
    )
    flat = _toml(
        tmp_path,
        '[rl]\nadvantage = "gae"\ngae_lambda = 0.9\nvalue_clip = 0.1\neps_low = 0.1\n'
        'aggregation = "seq-mean-token-mean"\nguard_max_ratio = 5.0\nguard_action = "stop"\n'
        '[rl_warmup]\nadvantage = "dr_grpo"\n',
    )
    assert nested == flat
    assert TrainConfig(**nested).update_config().advantage == GaeAdvantage(lam=0.9, value_clip=0.1)


@pytest.mark.parametrize("name", presets())
def test_the_presets_read_as_before(name):
    config = TrainConfig(**read_toml(name))
    want = "grpo" if name == "cpu-default" else "gae"
    assert config.advantage == want and config.update_config().advantage.kind == want


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[rl.advantage]\nkind = "grpo"\nlam = 0.9\n',
            "lam: not a setting of the advantage 'grpo'",
        ),
        ("[rl_warmup.advantage]\nturn_discount = 0.3\n", "known: kind"),
        ("[rl.critic]\nlam = 0.9\n", "unknown table; known: [rl.advantage]"),
        ("[rl]\neps_low = 0.1\n[rl.loss]\neps_low = 0.2\n", "eps_low is set twice"),
        ('[rl.guard]\naction = "halt"\n', "--guard-action must be one of skip, stop, not 'halt'"),
        ('[rl.advantage]\nkind = "ppo"\n', "--advantage must be one of grpo, dr_grpo, rloo, gae"),
        ('[rl_warmup.advantage]\nkind = "gae"\n', "--rl-warmup-advantage must be one of grpo"),
        ('[rl.loss]\naggregation = "mean"\n', "--aggregation must be one of token-mean"),
        ('[train]\nbackend = "tpu"\n', "--backend must be one of auto, cpu, cuda, not 'tpu'"),
        ('[train]\nhistory = "some"\n', "--history must be one of full, last_k"),
    ],
)
def test_a_bad_update_setting_is_refused_by_name(tmp_path, text, message):
    with pytest.raises(ValueError) as caught:
        TrainConfig(**_toml(tmp_path, text))
    assert message in str(caught.value)


def test_the_flags_still_set_the_update():
    args = cli._parser().parse_args(
        ["train", "--advantage", "dr_grpo", "--turn-discount", "0.5", "--guard-action", "stop",
         "--eps-high", "0.3", "--rl-warmup-advantage", "rloo"]
    )  # fmt: skip
    config = cli._config(args)
    assert config.update_config().advantage == GroupAdvantage("dr_grpo", turn_discount=0.5)
    assert config.update_config().guard.action == "stop"
    assert config.update_config().loss.eps_high == 0.3
    assert config.update_config("rl_warmup").advantage.kind == "rloo"
    assert cli.main(["train", "--advantage", "ppo"]) == 2
