"""Episodes collated into the typed batch a loss reads: padded tensors with masks.

One row per training sequence (``Episode.sequences``): in ``full`` history an episode is one
row, every turn back to back; in ``last_k`` history each turn is a row of its own. A row is split
where the policy's first token is: ``prompt_ids`` before it, ``response_ids`` from it on (answers,
and in ``full`` history the feedback between them), so that ``Policy.token_logprobs(prompt_ids,
response_ids)`` scores every generated token. Tensors are over response positions:

- ``loss_mask_bt``: True on tokens the policy generated;
- ``turn_bt``: the episode's turn number of each generated token, -1 elsewhere (in ``last_k``
  history a row's one turn keeps its number in the episode);
- ``sampler_logprobs_bt``: the sampler's log-probs, 0 elsewhere;
- per episode, ``turn_rewards_ek`` and ``turn_mask_ek``: each turn's reward, padded to the
  longest episode.

``select(rows)`` is a micro-batch: the same rows, re-padded to their own longest response.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from cuda_agent.rl_core import spread_turns_to_tokens

from .episode import Episode


@dataclass(frozen=True)
class _Row:
    prompt_ids: list[int]
    response_ids: list[int]
    loss_mask: list[int]
    turn: list[int]
    sampler_logprobs: list[float]
    episode: int


@dataclass(frozen=True)
class EpisodeBatch:
    rows: tuple[_Row, ...]
    groups: tuple[int, ...]  # each episode's group (episodes of a group share a prompt)
    turn_rewards_ek: torch.Tensor
    turn_mask_ek: torch.Tensor

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def prompt_ids(self) -> list[list[int]]:
        return [r.prompt_ids for r in self.rows]

    @property
    def response_ids(self) -> list[list[int]]:
        return [r.response_ids for r in self.rows]

    @property
    def episode_of_row(self) -> torch.Tensor:
        return torch.tensor([r.episode for r in self.rows], dtype=torch.long)

    @property
    def width(self) -> int:
        return max((len(r.response_ids) for r in self.rows), default=0)

    def _pad(self, values: Sequence[Sequence[float]], fill: float, dtype: torch.dtype):
        out = torch.full((len(values), self.width), fill, dtype=dtype)
        for i, row in enumerate(values):
            out[i, : len(row)] = torch.tensor(row, dtype=dtype)
        return out

    @property
    def loss_mask_bt(self) -> torch.Tensor:
        return self._pad([r.loss_mask for r in self.rows], 0, torch.bool)

    @property
    def turn_bt(self) -> torch.Tensor:
        return self._pad([r.turn for r in self.rows], -1, torch.long)

    @property
    def sampler_logprobs_bt(self) -> torch.Tensor:
        return self._pad([r.sampler_logprobs for r in self.rows], 0.0, torch.float32)

    def per_row(self, values_ek: torch.Tensor) -> torch.Tensor:
        """Per-episode, per-turn values ``[E, K]`` on each row's tokens ``[B, T]`` (0 outside
        the loss mask): a turn's advantage or return on every token of that turn
        (``rl_core.spread_turns_to_tokens`` over each row's episode; detached)."""
        device = values_ek.device
        rows_bk = values_ek[self.episode_of_row.to(device)]
        return spread_turns_to_tokens(
            rows_bk, self.turn_bt.to(device), self.loss_mask_bt.to(device)
        )

    def select(self, rows: Sequence[int]) -> EpisodeBatch:
        return EpisodeBatch(
            tuple(self.rows[i] for i in rows), self.groups, self.turn_rewards_ek, self.turn_mask_ek
        )


def collate(episodes: Sequence[Episode]) -> EpisodeBatch:
    """The training rows of ``episodes`` (episodes without a generated token give none)."""
    rows: list[_Row] = []
    for e, episode in enumerate(episodes):
        first_turn = 0
        for seq in episode.sequences():
            generated = [i for i, m in enumerate(seq.loss_mask) if m]
            offset = first_turn if episode.history == "last_k" else 0
            first_turn += 1
            if not generated:
                continue
            cut = generated[0]
            rows.append(
                _Row(
                    prompt_ids=seq.token_ids[:cut],
                    response_ids=seq.token_ids[cut:],
                    loss_mask=seq.loss_mask[cut:],
                    turn=[t + offset if t >= 0 else -1 for t in seq.turn_index[cut:]],
                    sampler_logprobs=seq.sampler_logprobs[cut:],
                    episode=e,
                )
            )
    most = max((len(e.turns) for e in episodes), default=0)
    rewards = torch.zeros(len(episodes), most)
    mask = torch.zeros(len(episodes), most, dtype=torch.bool)
    for e, episode in enumerate(episodes):
        k = len(episode.turns)
        rewards[e, :k] = torch.tensor(episode.rewards, dtype=torch.float32)
        mask[e, :k] = True
    return EpisodeBatch(tuple(rows), tuple(e.group for e in episodes), rewards, mask)
