"""The trivial-answer rule (the parent): decided once per task by a reference worker, kept in
memory and on disk, and applied to every evaluation of the task.

Before a task's first candidate is judged (per task, sizes, input distribution, tolerances,
GPU model and torch version), a reference worker tries answers that compute nothing against
its first trial draws (``_shared.trivial_rule``). Where none passes, nothing changes. Where one
passes, that output is judged at an atol scaled to the expected outputs' magnitude when every
trivial answer fails there (``scaled_tolerance``), and the task is refused when one still
passes (``refused``: the candidate is not run, and the result says which answers pass). The
rule is kept in memory and as JSON under ``$CUDA_AGENT_CACHE/trivial``, beside the baselines;
only the parent writes it, from a reference worker's answer, so no candidate can plant one.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from .._shared.compile import cache_dir
from .._shared.protocol import Job
from .._shared.trivial_rule import RULE_VERSION, TrivialRule, TrivialRuleRequest
from ..result import EvalResult, says_out_of_memory
from .pool import Worker, WorkerDied

DRAWS = 3  # plain trial draws the rule is decided on (the job's first ones)


class TrivialCache:
    """Each task's ``TrivialRule``, decided by a reference worker once per key (``key``), kept
    in memory and on disk. A rule that could not be decided (``unchecked``: the reference
    failed) is kept in memory only, so a broken task costs one try per sandbox; one that
    failed for want of GPU memory is not kept at all (the other lanes' jobs may have held it:
    on the H100, 2026-12-06, KernelBench's reductions were left unchecked so beside 3 lanes),
    and the task's next job decides again."""

    def __init__(self) -> None:
        self._memory: dict[str, TrivialRule] = {}
        self._lock = threading.Lock()
        self._deciding: dict[str, threading.Lock] = {}  # one decision per key at a time

    @staticmethod
    def request(job: Job) -> TrivialRuleRequest:
        """What the reference worker is asked for ``job``: its first ``DRAWS`` plain trial draws
        and its trials on other input distributions (a trivial answer that fails those fails
        the job already: heavy tails give ReLU on ``torch.rand`` inputs negative values)."""
        cfg = job.config
        trials = [c for c in job.checks if c.stage == "trial"]
        plain = [c for c in trials if c.distribution is None][:DRAWS]
        others = [c for c in trials if c.distribution is not None]
        return TrivialRuleRequest(
            task=job.task,
            task_digest=cfg.task_digest,
            sizes=job.sizes,
            model_seed=cfg.seed,
            device=cfg.device,
            draws=tuple((c.seed, c.distribution or cfg.distribution) for c in plain + others),
            atol=cfg.atol,
            rtol=cfg.rtol,
            dtype_tolerances=cfg.dtype_tolerances,
        )

    @staticmethod
    def key(request: TrivialRuleRequest, identity: Mapping[str, str]) -> str:
        fields = {k: v for k, v in request.to_json().items() if k != "task"}
        text = json.dumps(
            [RULE_VERSION, fields, identity.get("device"), identity.get("torch")], sort_keys=True
        )
        return hashlib.sha256(text.encode()).hexdigest()[:24]

    def get(self, job: Job, reference: Worker) -> TrivialRule:
        """The job's rule: kept, or decided now by ``reference``."""
        request = self.request(job)
        if not request.draws:
            return TrivialRule()  # no trial draws: nothing a trivial answer could pass
        if not reference.alive():
            reference.start()
        key = self.key(request, reference.identity)
        with self._lock:
            deciding = self._deciding.setdefault(key, threading.Lock())
        with deciding:
            return self._kept(key) or self._decide(request, reference, key)

    def _kept(self, key: str) -> TrivialRule | None:
        with self._lock:
            if key in self._memory:
                return self._memory[key]
        with contextlib.suppress(OSError, ValueError):
            found = TrivialRule.parse(
                json.loads((cache_dir("trivial") / f"{key}.json").read_text())
            )
            if found.rule != "unchecked":
                with self._lock:
                    self._memory[key] = found
                return found
        return None

    def _decide(self, request: TrivialRuleRequest, reference: Worker, key: str) -> TrivialRule:
        try:
            rule = TrivialRule.parse(reference.run(request.to_json()))
        except WorkerDied as death:
            rule = TrivialRule(reason=f"the reference worker failed: {death.reason}")
        if rule.rule != "unchecked":
            path = cache_dir("trivial") / f"{key}.json"
            staged = path.with_name(f".{key}.{os.getpid()}.{threading.get_ident()}.tmp")
            with contextlib.suppress(OSError):
                staged.write_text(json.dumps(rule.to_json()))
                os.replace(staged, path)
        if not (rule.rule == "unchecked" and says_out_of_memory(rule.reason or "")):
            with self._lock:
                self._memory[key] = rule
        return rule


def output_tolerances(rule: TrivialRule) -> list[list[float] | None] | None:
    """Per output, the (atol, rtol) it is judged at instead of the configured ones: the scaled
    atol for each output at which every trivial answer fails (None for the others)."""
    scaled = {o.output: [o.scaled_atol, o.rtol] for o in rule.outputs if not o.refused}
    if not scaled:
        return None
    return [scaled.get(i) for i in range(max(scaled) + 1)]


def refusal(rule: TrivialRule, task: str, backend: str) -> EvalResult:
    """The verdict on every candidate for a task a trivial answer passes whatever the tolerance:
    ``unjudged`` (the task's fault, not the candidate's), the rule and its findings in
    ``extra``."""
    refused = [o for o in rule.outputs if o.refused]
    lines = [
        f"output {o.output}: {_pass(o.still_passing)} at atol={o.atol:g}, "
        f"rtol={o.rtol:g}, and still at atol={o.scaled_atol:g} scaled to the expected "
        f"output's magnitude (RMS {o.magnitude:.3g})"
        for o in refused
    ]
    message = (
        "task refused (trivial-answer rule 'refused'): an answer that computes nothing passes "
        "its checks, so no verdict can tell a kernel from it; fix the task (validate_task "
        "says why):\n" + "\n".join(lines)
    )
    return EvalResult(
        status="unjudged",
        message=message,
        task=task,
        backend=backend,
        extra={**_extra(rule), "task_refused": True},
    )


def annotate(result: EvalResult, rule: TrivialRule, refusal_applied: bool = True) -> EvalResult:
    """``result`` with the rule that applied in ``extra`` (``trivial_answer_rule``, and the
    outputs concerned in ``trivial_answers``), and said in its message when it changed the
    judging. ``refusal_applied=False``: a task refused at these sizes was judged anyway
    (sizes the caller chose, as the property checks do)."""
    notes = []
    scaled = [o for o in rule.outputs if not o.refused]
    if scaled:
        outputs = "; ".join(
            f"output {o.output} at atol={o.scaled_atol:.3g} (RMS {o.magnitude:.3g}), since "
            f"{_pass(o.passing)} at atol={o.atol:g}"
            for o in scaled
        )
        notes.append(
            "judged at a tolerance scaled to the expected outputs' magnitude (trivial-answer "
            f"rule 'scaled_tolerance'): {outputs}"
        )
    if rule.rule == "refused" and not refusal_applied:
        notes.append(
            "a trivial answer passes this case whatever the tolerance (trivial-answer rule "
            "'refused', not applied to sizes the caller chose): a pass here proves little"
        )
    data: dict[str, Any] = {
        "extra": {**result.extra, **_extra(rule), "trivial_answer_applied": refusal_applied}
    }
    if notes:
        data["message"] = "\n".join([m for m in (result.message, *notes) if m])
    return replace(result, **data)


def _extra(rule: TrivialRule) -> dict[str, Any]:
    found: dict[str, Any] = {"trivial_answer_rule": rule.rule}
    if rule.outputs:
        found["trivial_answers"] = [o.to_json() for o in rule.outputs]
    if rule.reason is not None:
        found["trivial_answer_reason"] = rule.reason
    return found


def _pass(answers: tuple[str, ...]) -> str:
    """ "zeros passes", "zeros, constant pass"."""
    return ", ".join(answers) + (" passes" if len(answers) == 1 else " pass")
