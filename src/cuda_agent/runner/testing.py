"""Run fixtures for tests and smoke runs of the trainer with a tiny random model.

``write_rewarded_episodes(run)`` writes, where the rft stage keeps what it collected, two
episodes: one rewarded (kept: rft fine-tunes on it) and one malformed (dropped; the value
stage fits both). A random tiny model earns no reward, so nothing it collects itself would be
kept, and the stages after collection would have nothing to train on.

``copy_builtin_tasks(folder, names)`` copies built-in tasks into a task directory, each taught
by the warm start as one short line (its compact CPU solution ``ModelNew = Model``), so that a
run's answer budget stays small.
"""

from __future__ import annotations

import json
import shutil
from importlib import resources
from pathlib import Path


def copy_builtin_tasks(folder: Path, names: tuple[str, ...], compact: bool = True) -> Path:
    """Copy the built-in tasks ``names`` into ``folder`` and return it; with ``compact`` each
    gets ``ModelNew = Model`` as its compact CPU solution (what the warm start teaches)."""
    builtin = Path(str(resources.files("cuda_agent.kernel_sandbox") / "builtin"))
    for name in names:
        shutil.copytree(builtin / name, folder / name)
        if compact:
            (folder / name / "solution_cpu_compact.py").write_text("ModelNew = Model\n")
    return folder


def write_rewarded_episodes(run: Path) -> Path:
    """Write ``run/rft/episodes.jsonl`` (a rewarded ``relu`` episode, a malformed ``silu``
    one) and return its path. A run resumed from ``run`` then finds rft's collection done."""
    from cuda_agent.agent import Episode, Turn, episode_to_json
    from cuda_agent.kernel_sandbox import EvalResult
    from cuda_agent.runner.checkpoint import write_text_atomic

    ok = EvalResult(status="ok", candidate_time_ms=1.0, eager_time_ms=1.0)
    good = Turn(0, (1, 2, 3), (40, 41, 42, 43), (-1.0,) * 4, "", "stop", "c", ok, 2.0, "fine")
    bad = Turn(0, (1, 2, 3), (50, 51), (-1.0,) * 2, "", "stop", None, None, -1.0, "", "malformed")
    episodes = [
        Episode("relu", 0, "full", (good,), "target"),
        Episode("silu", 1, "full", (bad,), "malformed"),
    ]
    path = run / "rft" / "episodes.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, "".join(json.dumps(episode_to_json(e)) + "\n" for e in episodes))
    return path
