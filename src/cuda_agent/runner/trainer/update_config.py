"""The RL update's configuration: one frozen value per RL stage, the only one ``update.update``
reads.

::

    UpdateConfig
      advantage      GroupAdvantage  kind grpo | dr_grpo | rloo, turn_discount
                   | GaeAdvantage    lam, value_clip, critic_lr        (needs the critic)
      loss           LossConfig      eps_low, eps_high, aggregation, max_tokens,
                                     tis_max_weight, kl_coef
      guard          GuardConfig     max_ratio, min_ess, min_entropy, action
      micro_batch, updates_per_batch, temperature

The formulas they parametrise are ``rl_core``'s (``loss.py`` names each). ``TrainConfig`` keeps
the flat settings that the flags and presets name (``--advantage``, ``--gae-lambda``, ...);
each field here says in ``metadata["flag"]`` which one it is read from, and
``TrainConfig.update_config(stage)`` builds the value from them (``build``). A TOML file may
also write it as tables that map one to one onto these classes (``toml_names``)::

    [rl.advantage]       # kind, then the fields of GroupAdvantage or of GaeAdvantage
    kind = "gae"
    lam = 0.95
    [rl.loss]
    eps_high = 0.28
    [rl.guard]
    action = "stop"

``[rl_warmup.advantage]`` holds ``kind`` only (a group kind: the warm-up has no critic); the
rest of the update is shared with ``rl``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Literal

from cuda_agent.rl_core import AggregationMode

GroupKind = Literal["grpo", "dr_grpo", "rloo"]
AdvantageKind = Literal[GroupKind, "gae"]
GuardAction = Literal["skip", "stop"]
RLStage = Literal["rl", "rl_warmup"]


def _reads(flag: str) -> dict[str, str]:
    """A field's metadata: it is read from ``TrainConfig.<flag>`` (whose default it shares)."""
    return {"flag": flag}


@dataclass(frozen=True)
class GroupAdvantage:
    """Each turn's return ``G_k = sum_{j>=k} turn_discount^(j-k) r_j``, normalised against every
    turn of its group (``grpo``: ``(G - mean) / std``; ``dr_grpo``: ``G - mean``; ``rloo``: ``G``
    less the mean of the group's other turns), spread over the turn's tokens."""

    kind: GroupKind = field(default="grpo", metadata=_reads("advantage"))
    turn_discount: float = field(default=0.4, metadata=_reads("turn_discount"))

    needs_critic: ClassVar[bool] = False


@dataclass(frozen=True)
class GaeAdvantage:
    """PPO with the critic: ``A_t = sum_l (gamma lam)^l delta_{t+l}``,
    ``delta_t = r_t + gamma V_{t+1} - V_t`` over the policy's tokens, the turn rewards on each
    turn's last token; value targets ``A_t + V_t``, the value loss clipped at ``value_clip``
    around the old values; the critic learns at ``critic_lr`` (the value stage's rate too)."""

    lam: float = field(default=0.95, metadata=_reads("gae_lambda"))
    value_clip: float = field(default=0.2, metadata=_reads("value_clip"))
    critic_lr: float = field(default=1e-3, metadata=_reads("value_lr"))

    kind: ClassVar[Literal["gae"]] = "gae"
    gamma: ClassVar[float] = 1.0  # undiscounted within an episode
    needs_critic: ClassVar[bool] = True


Advantage = GroupAdvantage | GaeAdvantage


@dataclass(frozen=True)
class LossConfig:
    """The policy loss per token, aggregated over the whole update's counts::

    w = min(exp(old - sampler), tis_max_weight)
    l = w * ppo_clip(logp, old, A; eps_low, eps_high) [+ kl_coef * kl_k3(logp, ref)]

    ``max_tokens`` is the constant of ``seq-mean-token-sum-norm`` (the answer budget)."""

    eps_low: float = field(default=0.2, metadata=_reads("eps_low"))
    eps_high: float = field(default=0.28, metadata=_reads("eps_high"))
    aggregation: AggregationMode = field(default="token-mean", metadata=_reads("aggregation"))
    max_tokens: int = field(default=0, metadata=_reads("max_new_tokens"))
    tis_max_weight: float = field(default=2.0, metadata=_reads("tis_max_weight"))
    kl_coef: float = field(default=0.0, metadata=_reads("kl_coef"))


@dataclass(frozen=True)
class GuardConfig:
    """The bounds each update is checked against before it steps; out of them ``action`` skips
    the update or stops the run. ``min_entropy`` 0: unchecked."""

    max_ratio: float = field(default=20.0, metadata=_reads("guard_max_ratio"))
    min_ess: float = field(default=0.2, metadata=_reads("guard_min_ess"))
    min_entropy: float = field(default=0.0, metadata=_reads("guard_min_entropy"))
    action: GuardAction = field(default="skip", metadata=_reads("guard_action"))


@dataclass(frozen=True)
class UpdateConfig:
    advantage: Advantage = field(default_factory=GroupAdvantage)
    loss: LossConfig = field(default_factory=LossConfig)
    guard: GuardConfig = field(default_factory=GuardConfig)
    micro_batch: int = field(default=4, metadata=_reads("micro_batch"))
    updates_per_batch: int = field(
        default=1, metadata=_reads("updates_per_batch")
    )  # optimizer steps (PPO mini-batches)
    # the rollouts' sampling temperature: the update's log-probs (new, old, reference) are
    # those of softmax(logits / temperature), the distribution the sampler's came from (verl
    # divides the actor's logits the same way); greedy rollouts (0) are scored at 1
    temperature: float = field(default=1.0, metadata=_reads("temperature"))
    # passes over the batch (PPO's epochs; GRPO's mu, TRL's num_iterations): each pass goes
    # through the same mini-batches again, every pass's ratios against the policy that
    # sampled before the first (so the clip bounds how far the passes move it together)
    epochs: int = field(default=1, metadata=_reads("ppo_epochs"))

    @property
    def scoring_temperature(self) -> float:
        return self.temperature if self.temperature > 0 else 1.0


SECTIONS: dict[str, tuple[type, ...]] = {
    "advantage": (GroupAdvantage, GaeAdvantage),
    "loss": (LossConfig,),
    "guard": (GuardConfig,),
}


def _flag(cls: type, name: str, stage: RLStage) -> str:
    flag: str = next(f.metadata["flag"] for f in fields(cls) if f.name == name)
    return "rl_warmup_advantage" if stage == "rl_warmup" and flag == "advantage" else flag


def build(cls: type[Any], flat: Any, stage: RLStage = "rl") -> Any:
    """``cls`` with each field read from ``flat``'s attribute its metadata names."""
    return cls(**{f.name: getattr(flat, _flag(cls, f.name, stage)) for f in fields(cls)})


def update_config(flat: Any, stage: RLStage) -> UpdateConfig:
    """The update of ``stage`` from the flat settings ``flat`` (a ``TrainConfig``)."""
    kind = flat.rl_warmup_advantage if stage == "rl_warmup" else flat.advantage
    advantage = build(GaeAdvantage, flat) if kind == "gae" else build(GroupAdvantage, flat, stage)
    return UpdateConfig(
        advantage,
        build(LossConfig, flat),
        build(GuardConfig, flat),
        flat.micro_batch,
        flat.updates_per_batch,
        flat.temperature,
        flat.ppo_epochs,
    )


def toml_names(stage: RLStage, section: str, table: dict[str, Any]) -> dict[str, Any]:
    """A ``[<stage>.<section>]`` table's values under the flat names they set; ValueError for
    a key that is not a field of the section's class (or of the advantage ``kind`` given)."""
    if section not in SECTIONS:
        raise ValueError(
            f"[{stage}.{section}]: unknown table; known: {', '.join(f'[{stage}.{s}]' for s in SECTIONS)}"
        )
    classes = SECTIONS[section]
    if section == "advantage":
        if stage == "rl_warmup":
            classes = ()  # kind alone: turn_discount is the rl stage's ([rl.advantage])
        elif "kind" in table:
            classes = (GaeAdvantage,) if table["kind"] == "gae" else (GroupAdvantage,)
    known = {f.name: cls for cls in classes for f in fields(cls) if f.name != "kind"}
    if section == "advantage":
        known["kind"] = GroupAdvantage
    unknown = sorted(set(table) - set(known))
    if unknown:
        what = f"the advantage {table['kind']!r}" if "kind" in table else "this table"
        shared = " (the rest of the update is the rl stage's: [rl.advantage] and so on)"
        raise ValueError(
            f"[{stage}.{section}]: {', '.join(unknown)}: not a setting of {what}; known: "
            f"{', '.join(sorted(known))}{shared if stage == 'rl_warmup' else ''}"
        )
    return {_flag(known[k], k, stage): v for k, v in table.items()}
