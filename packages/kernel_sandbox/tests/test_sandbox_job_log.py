"""The job log (``$CUDA_AGENT_JOB_LOG``): each job's moments written as they happen, so a run
killed before its verdicts came back still says which jobs waited for a lane and which ran
(CPU backend, real workers), and ``kernel-sandbox jobs`` reads it back."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest

from cuda_agent.kernel_sandbox import Deadlines, Sandbox, SandboxConfig, builtin_tasks
from cuda_agent.kernel_sandbox._parent.job_log import ENV, read_events, summarize

RELU = next(t for t in builtin_tasks() if t.name == "relu")
HANGS = (
    "import torch\nfrom torch import nn\n\n"
    "class ModelNew(nn.Module):\n"
    "    def forward(self, x):\n"
    "        while True:\n"
    "            pass\n"
)


def test_every_job_is_logged_with_its_verdict(tmp_path, monkeypatch):
    log = tmp_path / "jobs.jsonl"
    monkeypatch.setenv(ENV, str(log))
    config = SandboxConfig(backend="cpu", workers=1, repeats=3, timing_budget_s=0.2)
    jobs = [(RELU, RELU.solutions["cpu"]), (RELU, "import torch\n"), (RELU, "import os\n")]
    with Sandbox(config) as sandbox:
        results = sandbox.evaluate_many(jobs)
    events = read_events(log)
    ends = {e["job"]: e for e in events if e["event"] == "end"}
    assert len(ends) == 3
    # each verdict as the caller got it, in the log (matched by its wall time: one per job)
    assert sorted((e["status"], e["wall_s"]) for e in ends.values()) == sorted(
        (r.status, round(r.wall_seconds or 0.0, 4)) for r in results
    )
    found = summarize(events)
    assert (found["arrived"], found["ended"], found["waiting"], found["running"]) == (3, 3, [], [])
    assert found["statuses"] == {s: [r.status for r in results].count(s) for s in found["statuses"]}
    # the rejected one (static checks) never took a lane; the others did, on the one lane
    started = [e for e in events if e["event"] == "start"]
    assert len(started) == sum(r.status != "rejected" for r in results) >= 2
    assert {e["lane"] for e in started} == {"0.0"}
    for e in started:  # a job's moments in order
        moments = [x["t"] for x in events if x["job"] == e["job"]]
        assert moments == sorted(moments)
    # every job of the call arrived when it was asked for, before any ended (one lane, one
    # thread: the others waited in the pool's queue, and the log says they were waiting)
    kinds = [e["event"] for e in events]
    assert kinds.count("arrive") == 3 and kinds[: kinds.index("end")].count("arrive") == 3
    assert len({e["log"] for e in events}) == 1


def test_a_job_under_way_is_in_the_log_before_its_verdict(tmp_path, monkeypatch):
    # What a stalled call leaves: the log says which job runs, on which lane, for how long.
    log = tmp_path / "jobs.jsonl"
    monkeypatch.setenv(ENV, str(log))
    config = SandboxConfig(backend="cpu", workers=1, deadlines=Deadlines(correctness=20.0))
    with Sandbox(config) as sandbox:
        verdict = []
        job = threading.Thread(target=lambda: verdict.append(sandbox.evaluate(RELU, HANGS)))
        job.start()
        seen: dict = {}
        for _ in range(600):
            seen = summarize(read_events(log), now=time.monotonic()) if log.exists() else {}
            if seen.get("running") and seen["running"][0]["seconds"] > 1.0:
                break
            time.sleep(0.1)
        job.join()
    assert seen["running"][0]["task"] == "relu" and seen["running"][0]["lane"] == "0.0"
    assert seen["ended"] == 0 and seen["waiting"] == []
    assert verdict[0].status == "timeout"
    assert summarize(read_events(log))["statuses"] == {"timeout": 1}


def test_a_log_cut_by_a_kill_says_what_waited_and_what_ran(tmp_path):
    t0 = 100.0
    lines = [
        {"event": "arrive", "job": 1, "pid": 7, "task": "a", "t": t0},
        {"event": "start", "job": 1, "pid": 7, "task": "a", "t": t0 + 1, "lane": "0.0"},
        {"event": "arrive", "job": 2, "pid": 7, "task": "b", "t": t0 + 1},
        {"event": "arrive", "job": 3, "pid": 7, "task": "c", "t": t0 + 2},
        {"event": "start", "job": 3, "pid": 7, "task": "c", "t": t0 + 3, "lane": "0.1"},
        {"event": "alone", "job": 3, "pid": 7, "task": "c", "t": t0 + 5, "lane": "0.1"},
        {"event": "end", "job": 3, "pid": 7, "task": "c", "t": t0 + 9, "status": "ok",
         "wall_s": 7.0, "lane": "0.1", "rerun_alone": "out of memory beside other lanes"},
        # another sandbox's job 1 in the same file is another job
        {"event": "arrive", "job": 1, "pid": 8, "task": "d", "t": t0 + 9},
    ]  # fmt: skip
    log = tmp_path / "jobs.jsonl"
    log.write_text("".join(json.dumps(x) + "\n" for x in lines) + '{"event": "end", "jo')
    found = summarize(read_events(log), now=t0 + 21)
    assert (found["arrived"], found["started"], found["ended"]) == (4, 2, 1)
    assert found["reruns_alone"] == 1 and found["statuses"] == {"ok": 1}
    assert found["running"] == [{"task": "a", "lane": "0.0", "seconds": 20.0}]
    assert found["waiting"] == [
        {"task": "b", "lane": None, "seconds": 20.0},
        {"task": "d", "lane": None, "seconds": 12.0},
    ]
    assert found["lane_wait_s"] == {"median": 1.0, "max": 1.0}
    # judged at its last event when no time is given
    assert summarize(read_events(log))["running"][0]["seconds"] == 8.0


@pytest.mark.parametrize("as_json", [False, True])
def test_the_jobs_command_prints_the_summary(tmp_path, as_json):
    log = tmp_path / "jobs.jsonl"
    log.write_text(
        json.dumps({"event": "arrive", "job": 1, "pid": 1, "task": "row_max", "t": 1.0}) + "\n"
        + json.dumps({"event": "start", "job": 1, "pid": 1, "task": "row_max", "t": 2.0,
                      "lane": "0.3"}) + "\n"
        + json.dumps({"event": "arrive", "job": 2, "pid": 1, "task": "tanh", "t": 40.0}) + "\n"
    )  # fmt: skip
    args = ["jobs", str(log)] + (["--json"] if as_json else [])
    out = subprocess.run(
        [sys.executable, "-m", "cuda_agent.kernel_sandbox.cli", *args],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    if as_json:
        assert json.loads(out.stdout)["running"] == [
            {"task": "row_max", "lane": "0.3", "seconds": 38.0}
        ]
    else:
        assert "1 still running when the log stopped" in out.stdout
        assert "row_max on lane 0.3: 38.0 s" in out.stdout
        assert "1 still waiting for a lane" in out.stdout
    missing = subprocess.run(
        [sys.executable, "-m", "cuda_agent.kernel_sandbox.cli", "jobs", str(tmp_path / "no")],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert missing.returncode == 2 and "kernel-sandbox:" in missing.stderr
