"""How a policy decodes and scores: chosen once, at construction, and swapped by `shard()`.

`Policy.generate` and `Policy.token_logprobs` do not ask whether the policy is sharded; they
call the strategy they hold, which runs one of `LocalModel`'s operations (`_local_model.py`)
here or through the FSDP root:

| strategy            | set by                         | runs                                       |
|---------------------|--------------------------------|--------------------------------------------|
| `StaticDecoding`    | construction, kv_cache static  | our static-cache loop (`_decoding.py`)     |
| `GenerateDecoding`  | construction, kv_cache dynamic | transformers' `generate`                   |
| `ShardedDecoding`   | `shard()`                      | `generate` through the FSDP root's hooks   |
| `LocalScoring`      | construction                   | the chunked log-prob forward (`_scoring`)  |
| `ShardedScoring`    | `shard()`                      | the same, through the FSDP root's hooks    |

A process with nothing to do: unsharded, it does nothing. Sharded, every process must take
part in the other processes' weight gathers (and, for scoring, in the backward's gradient
reductions), so `generate` samples from a one-token prompt (`Decoding.collective`) and
`Scoring.idle` scores one token with weight 0.

The strategies keep no reference to the policy or its model (the `LocalModel` is passed to
each call), so dropping the last reference to a policy still frees its model at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import torch

from cuda_agent.policy._generation import DecodeRequest
from cuda_agent.policy._scoring import ScoringBatch, right_padded_batch
from cuda_agent.policy._sharding import ShardedRoot

if TYPE_CHECKING:
    from cuda_agent.policy._local_model import LocalModel

TensorPair = tuple[
    torch.Tensor, torch.Tensor
]  # (decoded tokens, log-probs) or (log-probs, entropies)


class Decoding(Protocol):
    # Whether a process with no prompts must still decode (sharded: the other processes'
    # weight gathers need it); `generate` then samples from a one-token prompt.
    collective: bool

    def decode(self, model: LocalModel, request: DecodeRequest) -> TensorPair:
        """([rows, T_new] token ids, [rows, T_new] sampler log-probs) of `request`."""
        ...


class Scoring(Protocol):
    def score(
        self, model: LocalModel, batch: ScoringBatch, with_entropy: bool, entropy_grad: bool = True
    ) -> TensorPair:
        """([N] log-probs, [N] entropies) of the N real response tokens of `batch` (the
        entropies without gradient unless `entropy_grad`)."""
        ...

    def idle(self, model: LocalModel, zeros: torch.Tensor) -> torch.Tensor:
        """What `token_logprobs` returns for a batch with no response token: `zeros`, kept in
        the autograd graph where the backward's collectives need this process."""
        ...


class StaticDecoding:
    collective = False

    def decode(self, model: LocalModel, request: DecodeRequest) -> TensorPair:
        return model.decode_static(request)


class GenerateDecoding:
    collective = False

    def decode(self, model: LocalModel, request: DecodeRequest) -> TensorPair:
        return model.decode_with_generate(request)


class ShardedDecoding:
    """transformers' `generate` (uncompiled), between the root's hooks: every layer is gathered
    at every step."""

    collective = True  # every process must take part in the other processes' weight gathers

    def __init__(self, root: ShardedRoot) -> None:
        self._root = root

    def decode(self, model: LocalModel, request: DecodeRequest) -> TensorPair:
        result: TensorPair = self._root.run(model.decode_with_generate, request)
        return result


class LocalScoring:
    def score(
        self, model: LocalModel, batch: ScoringBatch, with_entropy: bool, entropy_grad: bool = True
    ) -> TensorPair:
        return model.flat_logprobs(batch, with_entropy, entropy_grad)

    def idle(self, model: LocalModel, zeros: torch.Tensor) -> torch.Tensor:
        return zeros


class ShardedScoring:
    def __init__(self, root: ShardedRoot) -> None:
        self._root = root

    def score(
        self, model: LocalModel, batch: ScoringBatch, with_entropy: bool, entropy_grad: bool = True
    ) -> TensorPair:
        result: TensorPair = self._root.run(model.flat_logprobs, batch, with_entropy, entropy_grad)
        return result

    def idle(self, model: LocalModel, zeros: torch.Tensor) -> torch.Tensor:
        # Every process must take part in the forward's and the backward's collectives:
        # score one dummy token and keep it in the graph with weight 0.
        pad_id = model.pad_id
        dummy = right_padded_batch([[pad_id]], [[pad_id]], pad_id, model.device)
        logprobs_n, _ = self._root.run(model.flat_logprobs, dummy, False)
        return zeros + 0.0 * logprobs_n.sum()
