"""``TrainConfig``: everything a training run needs, with the embedded CPU default."""

from __future__ import annotations

import json
import time
import tomllib
from dataclasses import asdict, dataclass, fields
from importlib import resources
from pathlib import Path
from typing import Any, Literal, get_args, get_origin, get_type_hints

from cuda_agent.agent.episode import History
from cuda_agent.rl_core import AggregationMode, LrSchedule

from .trainer.update_config import (
    AdvantageKind,
    GaeAdvantage,
    GroupAdvantage,
    GroupKind,
    GuardAction,
    GuardConfig,
    LossConfig,
    RLStage,
    UpdateConfig,
    build,
    toml_names,
)
from .trainer.update_config import (
    update_config as build_update_config,
)

Backend = Literal["auto", "cpu", "cuda"]  # kernel_sandbox.SandboxConfig's


def parse_set_samples(text: str, source: str, flag: str) -> dict[str, int]:
    """``SET=N[,SET=N...]`` read: a named part of ``source`` -> its samples. ValueError naming
    ``flag`` and what is amiss (not ``SET=N``, N not a positive integer, a set named twice or
    not among ``source``'s ``+``-joined parts, or the only set of a ``source`` of one, whose
    samples are the evaluation's own)."""
    out: dict[str, int] = {}
    sets = source.split("+") if source else []
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, equals, count = item.rpartition("=")
        if not equals or not name or not count.isdigit() or int(count) < 1:
            raise ValueError(f"{flag} takes SET=N[,SET=N...], N >= 1; not {item!r}")
        if name in out:
            raise ValueError(f"{flag} names {name} twice")
        if name not in sets:
            raise ValueError(
                f"{flag} names {name}, which is not one of the '+'-joined sets of the "
                f"evaluation's tasks ({source or 'none given'})"
            )
        if len(sets) < 2:  # (one set is one unlabelled part: the override would be unused)
            raise ValueError(
                f"{flag} gives one of several '+'-joined sets its own samples; {name} is the "
                "evaluation's only set: give its samples as the evaluation's samples instead"
            )
        out[name] = int(count)
    return out


@dataclass(frozen=True)
class TrainConfig:
    """A training run. Defaults are the embedded default: SmolLM2-135M on the CPU backend.

    Stages (``runner/stages``), each skipped at 0 steps:
    evaluate before (held-out and training tasks) -> warm start (supervised on reference
    solutions) -> [evaluate, with ``eval_after_warmstart``] -> single-turn RL warm-up ->
    trajectory collection and rejection fine-tuning ->
    value pre-training -> multi-turn agentic RL -> evaluate after.
    """

    out: str = ""  # empty = runs/<timestamp>
    model: str = "smollm2-135m-gguf"
    backend: Backend = "auto"  # sandbox backend
    # sandbox lanes per GPU (on the CPU backend, of the host): several check candidates at
    # once while timing stays alone on its device (0 = auto: from the cores and memory)
    lanes_per_gpu: int = 0
    # seconds a candidate's checks may take (the sandbox's correctness deadline; past it the
    # answer is judged ``timeout``), for the training answers and the run's evaluations alike.
    # A check holds the device's timing gate, so an answer that hangs there holds up every
    # timing on its GPU this long: on the H100 (2026-12-06) one answer timed out at 60 s in an
    # RL step and the 3 timings queued behind it took 60 s each; the other 253 correct answers
    # of the run took at most 13.4 s of a lane each, checks and timing together
    correctness_deadline_s: float = 60.0
    device: str = "auto"  # policy device
    tasks: str = ""  # training tasks: empty = the built-in training split; else a dir or file
    eval_tasks: str = ""  # held-out tasks: empty = the built-in held-out split; else a dir or file
    eval_limit: int = 0  # most held-out tasks evaluated (0 = all)
    # the training tasks' problem sizes: "full" (their module's), or "small" (each task's smaller
    # GPU variant where it has one: ``SMALL_SIZES`` in its file, ``small_sizes`` in an embedded
    # set's manifest): more of them fit beside each other in the sandbox's lanes.
    train_sizes: Literal["full", "small"] = "full"
    # the held-out tasks' problem sizes, the same choice: "small" evaluates the held-out
    # compositions at the sizes their training counterparts train at (KernelBench problems and
    # tasks without a smaller variant keep theirs)
    eval_sizes: Literal["full", "small"] = "full"
    # the KernelBench checkout of ``kernelbench-l1-subset`` (empty: $CUDA_AGENT_KERNELBENCH)
    kernelbench: str = ""
    eval_train: bool = True  # also evaluate the training tasks before and after
    eval_turns: int = 1
    # episodes per held-out task and their temperature (1 and 0: greedy); pass@1 is the mean
    # over them, each figure with its 95% bootstrap interval over tasks
    eval_samples: int = 1
    eval_temperature: float = 0.0
    # other sample counts for some named sets of ``eval_tasks``: "SET=N[,SET=N...]", e.g.
    # "kernelbench-l1-subset=1" (KernelBench's 6.4 GB inputs: each of its verdicts holds an
    # 80 GB GPU alone for seconds); the other sets get ``eval_samples``
    eval_set_samples: str = ""
    # an evaluation's tasks in this many micro-batches that take turns, one sampling while the
    # sandbox judges the other's answers (0: auto, 2 on the CUDA backend, where an H100
    # evaluation sampled for 62 s and then judged for 63 s; 1 on the CPU, where both share the
    # cores and one wide generate is cheapest per token)
    eval_micro_batches: int = 0
    # an evaluation's tasks judged this many at a time (a chunk: one batch of sampling, its
    # rows written as it ends, a deadline may stop between two); 0: each named set of
    # ``eval_tasks`` (``a+b``) as one chunk, e.g. the held-out compositions apart from the 23
    # KernelBench problems whose 6.4 GB inputs make theirs the longest
    eval_batch: int = 0
    # also evaluate after the warm start (``heldout_warmstart``): what RL adds to the warm start
    eval_after_warmstart: bool = False
    # evaluate before any training (``heldout_before``); off where the untrained model's score
    # is known (0 on every held-out set for the embedded model) and device time is short
    eval_before: bool = True
    # wall seconds the training stages may take in all (warm start to RL, across resumes; 0: no
    # limit): past it their remaining steps are skipped and the final evaluations still run
    train_budget_s: float = 0.0
    # Ray ([ray] table): the sandbox pool on a cluster's actors ("auto": the running cluster,
    # "local": a new one here; empty: no Ray), ``ray_sandbox_workers`` slot actors (0: one per
    # GPU, or per two CPUs), ``ray_rollout_workers`` actors collecting episodes (0: the trainer
    # samples itself)
    ray_address: str = ""
    ray_sandbox_workers: int = 0
    ray_rollout_workers: int = 0
    seed: int = 0
    # start from another run's trained weights (its directory: its final ``adapter/``, else its
    # last checkpoint; or an adapter directory) instead of the fresh LoRA adapter: one warm start
    # trained once, then RL and an SFT-only control both continue it. Read only when the run
    # starts (a resumed run continues from its own checkpoint); weights only (each stage's
    # optimizer starts afresh, as at any stage's start); the KL reference stays the base
    # model. The LoRA rank must be the same.
    init_from: str = ""
    # warm start (supervised)
    warmstart_steps: int = 24
    warmstart_lr: float = 3e-3
    warmstart_batch: int = 4
    # the warm start's learning rate over its steps: constant, or a cosine from warmstart_lr
    # down to warmstart_lr * warmstart_lr_floor at the last step (rl_core.scheduled_lr). On the
    # H200 (2026-12-05) a constant 3e-3 put a spike in the NLL at step 700 of 1,000 (0.02 ->
    # 6.8), and the weights a warm start ends on are what RL and its control start from.
    warmstart_schedule: LrSchedule = "constant"
    warmstart_lr_floor: float = 0.1
    # end the warm start once the median NLL per token of its last 20 steps is at or below
    # this (0: run every step). On the H100 (2026-12-05) 600 steps to 0.0001 left a policy of
    # one answer per prompt (token entropy 0.001 at T 1): RL's groups were one program each.
    warmstart_until_nll: float = 0.0
    # which reference solution the warm start teaches: compact (where a task has one) | primary
    # | compact+variants (the compact one and each variant: a reduction's warp-per-row layout
    # beside its block-per-row one, so that the policy keeps a choice for RL to settle)
    warmstart_solutions: Literal["compact", "primary", "compact+variants"] = "compact"
    # shared by the RL stages
    tasks_per_step: int = 3
    group_size: int = 4
    # answer budget in tokens; 0 = auto: fits the longest warm-start answer (budget.py)
    max_new_tokens: int = LossConfig.max_tokens
    temperature: float = 1.0
    repetition_stop: int = 0  # end answers in an exact loop: PolicyConfig.repetition_stop's window
    micro_batch: int = UpdateConfig.micro_batch
    eps_low: float = LossConfig.eps_low
    eps_high: float = LossConfig.eps_high
    max_grad_norm: float = 1.0
    aggregation: AggregationMode = LossConfig.aggregation  # rl_core.aggregate_loss mode
    # truncated importance weights against the sampler's log-probs
    tis_max_weight: float = LossConfig.tis_max_weight
    kl_coef: float = LossConfig.kl_coef  # k3 KL to the base model (0: off)
    # optimizer steps per rollout batch (PPO mini-batches)
    updates_per_batch: int = UpdateConfig.updates_per_batch
    # passes over each rollout batch (PPO epochs, GRPO's mu): samples cost the sandbox and the
    # sampler, a pass costs a forward and a backward; ratios are clipped against the sampling
    # policy across all of them
    ppo_epochs: int = UpdateConfig.epochs
    # single-turn RL warm-up
    rl_warmup_steps: int = 0
    rl_warmup_advantage: GroupKind = "grpo"
    # trajectory collection and rejection fine-tuning
    rft_tasks: int = 0  # training tasks whose episodes are collected (0: stage off)
    rft_samples: int = 2
    rft_turns: int = 2
    rft_steps: int = 2
    rft_lr: float = 1e-3
    rft_batch: int = 4
    # fine-tune only when at least this many episodes were kept (a few steps at rft_lr on one
    # episode over-fit it: on the H200, 2026-12-03, one kept episode of 24, then the held-out
    # pass@1 fell from 0.125 to 0.033 by the run's end)
    rft_min_kept: int = 1
    # value pre-training on the collected episodes
    value_steps: int = 0
    value_lr: float = GaeAdvantage.critic_lr
    # multi-turn agentic RL
    steps: int = 2
    lr: float = 2e-5
    turns: int = 1
    history: History = "full"
    # DAPO's dynamic sampling (rl_core.informative_groups), in both RL stages: a group whose
    # turn rewards are all equal carries no signal (its group advantages are zero; with GAE
    # only the critic's error), so it is left out of the update; a step with none updates nothing
    drop_uniform_groups: bool = False
    # identical answers to one task in one evaluation call share one verdict (the agent's
    # AgentConfig.share_verdicts), in rollouts and evaluations: one program, judged once
    share_verdicts: bool = True
    # the policy samples as a guest of the sandbox's device (AgentConfig.quiet_timing): no
    # sandbox timing runs beside the sampling on the same GPU (or, on the CPU backend, cores)
    quiet_timing: bool = True
    # the RL stages' turn reward: "milestone" (the reference system's -1 / 1 / 2 / 3: fail,
    # correct, faster than eager, faster than torch.compile) or "log_speedup"
    # (reward.log_speedup_reward: clip(ln speedup over eager, -1, 1) for a correct answer, -2
    # for a failed or malformed one). After a converged warm start most groups are all correct
    # and fast alike, one milestone value each, so dynamic sampling drops them (3 of 4 on the
    # H100, 2026-12-05); correct answers of different speed differ under log_speedup.
    rl_reward: Literal["milestone", "log_speedup"] = "milestone"
    # which training tasks an RL step takes: "uniform" (a seeded draw) or "signal" (weighted by
    # the chance their next group carries a signal, from their last groups: rl_core's
    # signal_weights; late in a run most groups of settled tasks are uniform and teach nothing)
    curriculum: Literal["uniform", "signal"] = "uniform"
    # The RL update's defaults are its typed configuration's (update_config.py), read from there.
    advantage: AdvantageKind = GroupAdvantage.kind  # the group kinds, or gae (with the critic)
    # credit across turns of the group advantages (Kevin's 0.4)
    turn_discount: float = GroupAdvantage.turn_discount
    gae_lambda: float = GaeAdvantage.lam
    value_clip: float = GaeAdvantage.value_clip
    # stability bounds, checked every update; guard_action: skip (the update) | stop (the run)
    guard_max_ratio: float = GuardConfig.max_ratio  # largest trainer / sampler importance ratio
    guard_min_ess: float = GuardConfig.min_ess  # effective sample size of the ratios
    guard_min_entropy: float = GuardConfig.min_entropy  # mean token entropy (0: unchecked)
    guard_action: GuardAction = GuardConfig.action
    # LoRA
    lora_rank: int = 16
    lora_alpha: int = 32
    # recompute each decoder layer's activations in the backward instead of keeping them: about
    # a third more compute for a fraction of the memory (benchmarks/results/2026-12-03-cpu-memory/),
    # for forwards of at least checkpoint_min_tokens tokens (rows x padded length; 0: all)
    gradient_checkpointing: bool = False
    checkpoint_min_tokens: int = 0

    def __post_init__(self) -> None:
        positive = ("tasks_per_step", "group_size", "micro_batch", "warmstart_batch",
                    "eval_turns", "eval_samples", "turns", "rft_samples", "rft_turns", "rft_batch",
                    "updates_per_batch", "ppo_epochs")  # fmt: skip
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be >= 1")
        counts = ("steps", "warmstart_steps", "eval_limit", "lora_rank", "max_new_tokens",
                  "rl_warmup_steps", "rft_tasks", "rft_steps", "rft_min_kept", "value_steps",
                  "ray_sandbox_workers", "ray_rollout_workers", "eval_micro_batches",
                  "eval_batch", "checkpoint_min_tokens", "kl_coef",
                  "repetition_stop")  # fmt: skip
        for name in counts:
            if getattr(self, name) < 0:
                raise ValueError(f"--{name.replace('_', '-')} must be >= 0")
        for name, allowed in _choices().items():
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f"--{name.replace('_', '-')} must be one of {', '.join(allowed)}, "
                    f"not {getattr(self, name)!r}"
                )
        self.set_samples()  # ValueError when malformed
        if self.warmstart_until_nll < 0:
            raise ValueError("--warmstart-until-nll must be >= 0 (0: run every warm-start step)")
        if not 0 <= self.warmstart_lr_floor <= 1:
            raise ValueError("--warmstart-lr-floor must be in [0, 1] (a fraction of the peak)")
        if not 0 <= self.eps_low < 1 or self.eps_high < 0:
            raise ValueError("--eps-low must be in [0, 1) and --eps-high >= 0")
        check_repetition_stop(self.repetition_stop)
        if self.train_budget_s < 0:
            raise ValueError("--train-budget-s must be >= 0 (0: no limit)")
        if not self.correctness_deadline_s > 0:
            raise ValueError("--correctness-deadline-s must be > 0")
        if self.kl_coef and not self.lora_rank:
            raise ValueError(
                "--kl-coef needs a LoRA policy (--lora-rank > 0): the KL reference is the base "
                "model with the adapter switched off"
            )
        if (self.ray_sandbox_workers or self.ray_rollout_workers) and not self.ray_address:
            raise ValueError(
                "--ray-sandbox-workers and --ray-rollout-workers need --ray-address "
                "('auto' for the running cluster, 'local' for a new one here)"
            )
        if self.update_config("rl").advantage.needs_critic and self.history != "full":
            raise ValueError("--advantage gae needs --history full (GAE runs over whole episodes)")

    def set_samples(self) -> dict[str, int]:
        """``eval_set_samples`` read: named set of ``eval_tasks`` -> samples (ValueError when
        malformed: ``task_sets.parse_set_samples``)."""
        return parse_set_samples(self.eval_set_samples, self.eval_tasks, "--eval-set-samples")

    def stage_units(self) -> dict[str, int]:
        """The steps each training stage is asked for, in the run's order (0: the stage is
        off). Every stage after ``warmstart`` samples the training tasks and judges them."""
        return {
            "warmstart": self.warmstart_steps,
            "rl_warmup": self.rl_warmup_steps,
            "rft": self.rft_steps if self.rft_tasks else 0,
            "value": self.value_steps,
            "rl": self.steps,
        }

    def update_config(self, stage: RLStage = "rl") -> UpdateConfig:
        """The RL update of ``stage`` (``rl`` or ``rl_warmup``) as one typed value."""
        return build_update_config(self, stage)

    @property
    def critic(self) -> GaeAdvantage:
        """The critic's settings: GAE's in the rl stage, and the value stage's."""
        advantage: GaeAdvantage = build(GaeAdvantage, self)
        return advantage

    @property
    def needs_critic(self) -> bool:
        return self.value_steps > 0 or (
            self.steps > 0 and self.update_config("rl").advantage.needs_critic
        )

    def out_dir(self) -> Path:
        return Path(self.out or time.strftime("runs/%Y%m%d-%H%M%S"))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, path: Path) -> TrainConfig:
        data = json.loads(path.read_text())
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def _choices() -> dict[str, tuple[str, ...]]:
    """The allowed values of each ``Literal`` field, read from its annotation."""
    hints = get_type_hints(TrainConfig)
    return {
        f.name: get_args(hints[f.name])
        for f in fields(TrainConfig)
        if get_origin(hints[f.name]) is Literal
    }


def check_repetition_stop(window: int) -> None:
    """``--repetition-stop``'s rule, for train and eval before any model loads (the policy's
    ``PolicyConfig.repetition_stop`` holds it too): 0 (off) or a window of at least 8 tokens."""
    if window != 0 and window < 8:
        raise ValueError("--repetition-stop must be 0 (off) or >= 8 (tokens)")


def presets() -> list[str]:
    """Names of the shipped presets (``cuda_agent/runner/presets/<name>.toml``)."""
    root = resources.files("cuda_agent.runner") / "presets"
    return sorted(p.name.removesuffix(".toml") for p in root.iterdir() if p.name.endswith(".toml"))


def read_toml(source: str) -> dict[str, Any]:
    """The settings of a preset name or a TOML file: ``{field: value}``, checked by name.

    A file holds ``field = value`` lines (the option names with ``_``), optionally under a
    ``[train]`` table, or under a stage's table whose name prefixes them (``[rft] steps = 2``
    is ``rft_steps``; ``[rl]`` holds the multi-turn RL options without a prefix). The RL
    update may also be written as the tables of its typed value, ``[rl.advantage]``,
    ``[rl.loss]``, ``[rl.guard]`` and ``[rl_warmup.advantage]`` (``update_config.py``). Unknown
    names, and a setting given twice in one file, are refused.
    """
    path = Path(source)
    if path.suffix == ".toml" or path.exists():
        if not path.is_file():
            raise ValueError(f"config file {source} does not exist")
        text, label = path.read_text(), str(path)
    elif source in presets():
        preset = resources.files("cuda_agent.runner") / "presets" / f"{source}.toml"
        text, label = preset.read_text(), f"preset {source!r}"
    else:
        raise ValueError(
            f"{source!r} is neither a TOML file nor a preset; presets: {', '.join(presets())}"
        )
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{label} is not valid TOML: {exc}") from exc
    data = _flat(data, label)
    known = {f.name: f for f in fields(TrainConfig)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ValueError(
            f"{label}: unknown settings {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )
    for name, value in data.items():
        expected = type(known[name].default)
        if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
            if expected is float and isinstance(value, int) and not isinstance(value, bool):
                data[name] = float(value)
                continue
            raise ValueError(
                f"{label}: {name} must be {expected.__name__}, not {type(value).__name__}"
            )
    return data


def _flat(data: dict[str, Any], label: str) -> dict[str, Any]:
    """A TOML document's settings under their ``TrainConfig`` names (see ``read_toml``)."""
    pairs: list[tuple[str, Any]] = []
    for key, value in data.items():
        if key == "train" and isinstance(value, dict):
            pairs += value.items()  # [train]: option names as they are
        elif isinstance(value, dict):
            # a stage's table: [rft] steps = 2 is rft_steps; [rl] holds the unprefixed RL options
            prefix = "" if key == "rl" else f"{key}_"
            for name, setting in value.items():
                if key in ("rl", "rl_warmup") and isinstance(setting, dict):
                    stage: RLStage = "rl" if key == "rl" else "rl_warmup"
                    try:  # [rl.loss] and the like: the tables of the typed update
                        pairs += toml_names(stage, name, setting).items()
                    except ValueError as exc:
                        raise ValueError(f"{label}: {exc}") from None
                else:
                    pairs.append((f"{prefix}{name}", setting))
        else:
            pairs.append((key, value))
    flat: dict[str, Any] = {}
    for name, value in pairs:
        if name in flat:
            raise ValueError(f"{label}: {name} is set twice")
        flat[name] = value
    return flat
