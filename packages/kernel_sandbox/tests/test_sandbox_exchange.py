"""The exchange of a trial's outputs between the workers: what the candidate worker writes is
read back as it was, and a forged description is refused, never interpreted."""

from __future__ import annotations

import os

import pytest
import torch

from cuda_agent.kernel_sandbox._shared.exchange import (
    ExchangeError,
    create,
    read_outputs,
    write_outputs,
)


@pytest.fixture
def exchange():
    fd = create(1 << 20)
    yield fd
    os.close(fd)


def test_outputs_come_back_as_they_were_written(exchange):
    outputs = [
        torch.randn(3, 5),
        torch.arange(7, dtype=torch.int64),
        torch.zeros(0),
        torch.tensor(True),
    ]
    meta = write_outputs(exchange, outputs)
    assert all(m["offset"] % 64 == 0 for m in meta)
    back = read_outputs(exchange, meta, torch.device("cpu"))
    for a, b in zip(outputs, back, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


def test_forged_descriptions_are_refused(exchange):
    meta = write_outputs(exchange, [torch.randn(16)])
    forged = [
        [{**meta[0], "offset": 3}],  # unaligned
        [{**meta[0], "shape": [1 << 30]}],  # past the end of the file
        [{**meta[0], "dtype": "object"}],
        [{**meta[0], "device": "cuda:0"}],
        [{**meta[0], "shape": [-4]}],
        "not a list",
    ]
    for bad in forged:
        with pytest.raises(ExchangeError):
            read_outputs(exchange, bad, torch.device("cpu"))
    with pytest.raises(ExchangeError, match="gone"):  # a device buffer this process never made
        read_outputs(exchange, [{**meta[0], "where": "device", "token": "x"}], torch.device("cpu"))


def test_outputs_larger_than_the_exchange_are_refused(exchange):
    with pytest.raises(ExchangeError, match="more than"):
        write_outputs(exchange, [torch.zeros(1 << 19)])  # 2 MiB into 1 MiB
