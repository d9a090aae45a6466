"""The sandbox a training run judges in (``runner.train.sandbox_config``): what the run's
settings ask of it."""

from __future__ import annotations

import pytest

from cuda_agent.kernel_sandbox import Deadlines
from cuda_agent.runner.cli import _config, _parser
from cuda_agent.runner.train import sandbox_config


def _train_config(*flags: str):
    return _config(_parser().parse_args(["train", "--backend", "cpu", *flags]))


def test_the_correctness_deadline_flag_reaches_the_sandbox_and_nothing_else_moves():
    # A hanging answer holds up every timing on its device for the correctness deadline: a
    # run may ask for a shorter one than the sandbox's 60 s.
    default = sandbox_config(_train_config())
    assert default.deadlines == Deadlines()
    short = sandbox_config(_train_config("--correctness-deadline-s", "15"))
    assert short.deadlines.correctness == 15.0
    assert short.deadlines.timing == Deadlines().timing  # the other phases keep theirs
    assert short.backend == "cpu" and short.lanes_per_gpu == default.lanes_per_gpu


@pytest.mark.parametrize("value", ["0", "-3"])
def test_a_deadline_that_is_not_positive_is_refused_by_name(value):
    with pytest.raises(ValueError, match="--correctness-deadline-s must be > 0"):
        _train_config("--correctness-deadline-s", value)
