"""Whose failure a failed reference is (the parent): a candidate the reference failed to judge
(``unjudged``, ``_parent.broker.compose``) is judged once more with both of its lane's workers
started afresh and the device alone, whatever they held given back (on an 80 GB H100,
2026-12-05, a reference worker held 20 GiB after releasing its caches, and 54 of 152 held-out
answers were judged the candidate's ``runtime_error`` for the reference's out-of-memory).
Unjudged again, the reference alone, in a fresh worker with the candidate's process gone,
computes the draw it failed on: if it can, the candidate's process made it fail (it took the
GPU's memory, say) and the verdict is the candidate's ``runtime_error``; if it cannot, it stays
``unjudged`` (the task cannot run here), never the candidate's failure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from .._shared.protocol import ExpectedRequest, Job
from ..result import EvalResult, first_line, with_extra
from .lanes import Lane, LanePool
from .pool import Worker, WorkerDied


def judge_again(
    run: Callable[[Job], EvalResult], job: Job, lane: Lane, lanes: LanePool, first: EvalResult
) -> EvalResult:
    """``first`` (unjudged) judged again on ``lane`` by ``run`` (module docstring), the
    outcome said in ``extra["judged_again"]``."""
    alone = replace(job, config=replace(job.config, device_alone=True))
    reason = first_line(first.message)
    with lanes.exclusive(lane), lane.hold.alone():
        lane.candidate.kill()
        lane.reference.kill()
        again = run(alone)
        if again.status != "unjudged":
            return with_extra(again, judged_again=f"the reference failed first: {reason}")
        lane.candidate.kill()
        lane.reference.kill()
        failure = probe(job, again.extra.get("reference_failed_check"), lane.reference)
    if failure is None:
        return replace(
            again,
            status="runtime_error",
            message="the reference failed beside this candidate and not without it (its "
            "worker alone computed the same inputs' outputs): the candidate's process made "
            f"it fail. {again.message}",
            extra={**again.extra, "judged_again": "the reference ran alone"},
        )
    return with_extra(again, judged_again=f"the reference failed alone too: {failure[:300]}")


def probe(job: Job, index: object, reference: Worker) -> str | None:
    """None when ``reference`` computes the expected outputs of ``job``'s check ``index``;
    else why it could not."""
    if not isinstance(index, int) or not 0 <= index < len(job.checks):
        return "no failed check was recorded"
    try:
        answer = reference.run(ExpectedRequest(**vars(job.draw(job.checks[index]))).to_json())
    except WorkerDied as death:
        return f"the reference worker failed: {death.reason}"
    if answer.get("ok") is True:
        return None
    return str(answer.get("reference_failed") or "the reference worker gave no answer")
