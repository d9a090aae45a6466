"""Episodes as a loss reads them (collate), as rejection fine-tuning filters them, and on disk."""

import json

import torch

from cuda_agent.agent import (
    Episode,
    Turn,
    collate,
    drop_reason,
    episode_from_json,
    episode_to_json,
    rejection_filter,
)
from cuda_agent.kernel_sandbox import EvalResult

OK = EvalResult(status="ok", candidate_time_ms=1.0, eager_time_ms=2.0)
WRONG = EvalResult(status="incorrect", message="max abs error 3.0")


def turn(index, context, response, reward, result=OK, action="evaluate", finish="stop", code="c"):
    return Turn(index, tuple(context), tuple(response), tuple(-0.5 for _ in response), "text",
                finish, code, result, reward, "feedback", action)  # fmt: skip


def episode(turns, history="full", group=0, stop="max_turns"):
    return Episode("relu", group, history, tuple(turns), stop)


def test_full_history_is_one_row_cut_at_the_first_generated_token():
    e = episode([turn(0, [1, 2, 3], [10, 11], 0.5, WRONG), turn(1, [4, 5], [12], 2.0)])
    batch = collate([e])
    assert batch.prompt_ids == [[1, 2, 3]]
    assert batch.response_ids == [[10, 11, 4, 5, 12]]
    assert batch.loss_mask_bt.tolist() == [[True, True, False, False, True]]
    assert batch.turn_bt.tolist() == [[0, 0, -1, -1, 1]]
    assert batch.sampler_logprobs_bt.tolist() == [[-0.5, -0.5, 0.0, 0.0, -0.5]]
    torch.testing.assert_close(batch.turn_rewards_ek, torch.tensor([[0.5, 2.0]]))
    # a turn's value lands on that turn's tokens only
    spread = batch.per_row(torch.tensor([[7.0, 9.0]]))
    assert spread.tolist() == [[7.0, 7.0, 0.0, 0.0, 9.0]]


def test_last_k_history_is_a_row_per_turn_keeping_the_turn_number():
    e = episode([turn(0, [1, 2], [10], 0.5, WRONG), turn(1, [1, 2, 9], [12, 13], 2.0)], "last_k")
    short = episode([turn(0, [1], [20], 1.0)], "last_k", group=1)
    batch = collate([e, short])
    assert len(batch) == 3 and batch.width == 2
    assert batch.turn_bt.tolist() == [[0, -1], [1, 1], [0, -1]]
    assert batch.turn_mask_ek.tolist() == [[True, True], [True, False]]
    assert batch.per_row(torch.tensor([[1.0, 2.0], [3.0, 0.0]])).tolist() == [
        [1.0, 0.0], [2.0, 2.0], [3.0, 0.0]]  # fmt: skip
    part = batch.select([1])
    assert part.width == 2 and part.episode_of_row.tolist() == [0]


def test_rejection_filter_keeps_rewarded_episodes_and_names_why_the_rest_went():
    kept = episode([turn(0, [1], [2], 2.0)])
    looping = episode([turn(0, [1], [2], -1.0, WRONG), turn(1, [3], [4], -1.0, WRONG)])
    repeated = episode([turn(0, [1], [2], 2.0), turn(1, [3], [4], 2.0)], stop="repeated")
    malformed = episode([turn(0, [1], [2], -1.0, None, "malformed", code=None),
                         turn(1, [3], [4], 2.0)])  # fmt: skip
    cut = episode([turn(0, [1], [2], 2.0, finish="length")])
    poor = episode([turn(0, [1], [2], 0.0, WRONG)])
    report = rejection_filter([kept, looping, repeated, malformed, cut, poor])
    assert report.kept == [kept]
    assert report.dropped == {"looping": 2, "malformed": 1, "budget": 1, "error": 0,
                              "no_reward": 1}  # fmt: skip
    assert report.as_dict()["collected"] == 6
    # two different failures in a row are not a loop
    improving = episode([turn(0, [1], [2], -1.0, WRONG),
                         turn(1, [3], [4], -0.5, EvalResult(status="compile_error")),
                         turn(2, [5], [6], 2.0)])  # fmt: skip
    assert drop_reason(improving) is None


def test_an_episode_survives_json_with_its_tokens_rewards_and_verdicts():
    e = episode([turn(0, [1, 2], [10], 0.5, WRONG), turn(1, [4], [12], 2.0)], stop="target")
    back = episode_from_json(json.loads(json.dumps(episode_to_json(e))))
    assert back.sequences() == e.sequences()
    assert back.stop_reason == "target" and back.rewards == [0.5, 2.0]
    assert back.turns[0].result.status == "incorrect" and back.turns[1].result.correct
    assert back.turns[1].result.speedup_vs_eager == OK.speedup_vs_eager


def test_a_verdict_keeps_its_spreads_and_trials_on_disk_and_old_records_still_read():
    from cuda_agent.kernel_sandbox.result import TrialOutcome

    full = EvalResult(status="ok", candidate_time_ms=1.0, candidate_time_spread_ms=0.1,
                      eager_time_ms=2.0, eager_time_spread_ms=0.2,
                      trials=(TrialOutcome(seed=3, passed=True, max_abs_error=0.0,
                                           max_rel_error=0.0),))  # fmt: skip
    e = episode([turn(0, [1], [2], 2.0, full)])
    back = episode_from_json(json.loads(json.dumps(episode_to_json(e))))
    assert back.turns[0].result == full
    old = episode_to_json(e)
    old["turns"][0]["verdict"] = {"status": "ok", "message": "", "task": "", "backend": "",
                                  "flags": [], "candidate_time_ms": 1.0, "eager_time_ms": 2.0,
                                  "compile_time_ms": None}  # fmt: skip
    assert episode_from_json(old).turns[0].result.speedup_vs_eager == 2.0
