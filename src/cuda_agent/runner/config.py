"""``TrainConfig``: everything a training run needs, with the embedded CPU default."""

from __future__ import annotations

import json
import time
import tomllib
from dataclasses import asdict, dataclass, fields
from importlib import resources
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class TrainConfig:
    """A training run. Defaults are the embedded default: SmolLM2-135M on the CPU backend.

    Stages: evaluate (before) -> warm start (supervised on reference solutions, the reference
    system's rejection fine-tuning in miniature) -> ``steps`` RL steps -> evaluate (after).
    """

    out: str = ""  # empty = runs/<timestamp>
    model: str = "smollm2-135m-gguf"
    backend: str = "auto"  # sandbox backend: auto | cpu | cuda
    device: str = "auto"  # policy device
    tasks: str = ""  # empty = the built-in task suite; else a directory or a task file
    seed: int = 0
    # warm start (supervised)
    warmstart_steps: int = 24
    warmstart_lr: float = 3e-3
    warmstart_batch: int = 4
    # which reference solution the warm start teaches: compact (where a task has one) | primary
    warmstart_solutions: str = "compact"
    # RL
    steps: int = 2
    tasks_per_step: int = 3
    group_size: int = 4
    # answer budget in tokens; 0 = auto: fits the longest warm-start answer (budget.py)
    max_new_tokens: int = 0
    temperature: float = 1.0
    lr: float = 2e-5
    micro_batch: int = 4
    eps_low: float = 0.2
    eps_high: float = 0.28
    max_grad_norm: float = 1.0
    # LoRA
    lora_rank: int = 16
    lora_alpha: int = 32
    # evaluation before / after (greedy, one answer per task)
    eval_tasks: int = 0  # 0 = all tasks

    def __post_init__(self) -> None:
        positive = (
            "tasks_per_step",
            "group_size",
            "micro_batch",
            "warmstart_batch",
        )
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be >= 1")
        for name in ("steps", "warmstart_steps", "eval_tasks", "lora_rank", "max_new_tokens"):
            if getattr(self, name) < 0:
                raise ValueError(f"--{name.replace('_', '-')} must be >= 0")
        if self.warmstart_solutions not in ("compact", "primary"):
            raise ValueError("--warmstart-solutions must be compact or primary")
        if self.backend not in ("auto", "cpu", "cuda"):
            raise ValueError("--backend must be auto, cpu or cuda")
        if not 0 <= self.eps_low < 1 or self.eps_high < 0:
            raise ValueError("--eps-low must be in [0, 1) and --eps-high >= 0")

    def out_dir(self) -> Path:
        return Path(self.out or time.strftime("runs/%Y%m%d-%H%M%S"))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, path: Path) -> TrainConfig:
        data = json.loads(path.read_text())
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def presets() -> list[str]:
    """Names of the shipped presets (``cuda_agent/runner/presets/<name>.toml``)."""
    root = resources.files("cuda_agent.runner") / "presets"
    return sorted(p.name.removesuffix(".toml") for p in root.iterdir() if p.name.endswith(".toml"))


def read_toml(source: str) -> dict[str, Any]:
    """The settings of a preset name or a TOML file: ``{field: value}``, checked by name.

    A file holds ``field = value`` lines (the option names with ``_``), optionally under a
    ``[train]`` table. Unknown names are refused with the list of known ones.
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
    data = data.get("train", data)
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
