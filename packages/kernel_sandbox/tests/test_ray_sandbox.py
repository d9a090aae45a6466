"""The sandbox on a local Ray cluster started here (``ray.init(num_cpus=2)``, real actors, the CPU
backend): the same verdicts as the local pool, a slot actor killed mid-job, more jobs than
slots, and a copy of the sandbox used from another Ray process."""

from __future__ import annotations

import threading
import time
import tomllib
from pathlib import Path

import pytest

from cuda_agent.kernel_sandbox import (
    STARTER_SUITE,
    Deadlines,
    RaySandbox,
    Sandbox,
    SandboxConfig,
    builtin_tasks,
)

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.ray

REDTEAM = Path(__file__).resolve().parents[1] / "redteam"
CASES = tomllib.loads((REDTEAM / "cases.toml").read_text())["case"]
# Cases a worker judges at run time (static checks off), one of each way a candidate fails.
RUNTIME_CASES = ("forged_result", "segfault", "os_exit", "huge_output", "python_decoy")
TASKS = {t.name: t for t in builtin_tasks()}


def _config(**kw) -> SandboxConfig:
    base = dict(
        backend="cpu",
        workers=2,
        repeats=3,
        timing_budget_s=0.3,
        deadlines=Deadlines(load=60.0, correctness=10.0, timing=20.0),
    )
    return SandboxConfig(**{**base, **kw})  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def cluster():
    # no GPU in the cluster even on a GPU host (Ray would count the host's): the CPU backend's
    # tests, and the refusal of backend="cuda" below, hold everywhere
    ray.init(num_cpus=2, num_gpus=0, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


# Two sandboxes of one slot each: the cluster's two CPUs (a slot actor takes one).
@pytest.fixture(scope="module")
def ray_sandbox(cluster):
    with Sandbox(_config(workers=1, ray_address="auto")) as sandbox:
        yield sandbox


@pytest.fixture(scope="module")
def runtime_only(cluster):
    with Sandbox(_config(workers=1, static_checks=False, ray_address="auto")) as sandbox:
        yield sandbox


def _verdict(result) -> tuple[str, tuple[str, ...], bool]:
    return result.status, tuple(sorted(result.flags)), result.correct


def test_a_config_with_an_address_gives_a_ray_sandbox_with_the_clusters_slots(ray_sandbox):
    assert isinstance(ray_sandbox, RaySandbox)
    assert ray_sandbox.backend == "cpu" and ray_sandbox.config.workers == 1
    assert len(ray_sandbox.actors()) == 1


def test_verdicts_equal_the_local_pools_on_the_starter_suite(ray_sandbox):
    tasks = [TASKS[name] for name in STARTER_SUITE]
    broken = tasks[0].solutions["cpu"].replace("ModelNew", "NotTheModel")
    jobs = [(t, t.solutions["cpu"]) for t in tasks] + [(tasks[0], broken)]
    with Sandbox(_config(workers=1)) as local:
        expected = [_verdict(r) for r in local.evaluate_many(jobs)]
    got = ray_sandbox.evaluate_many(jobs)
    assert [_verdict(r) for r in got] == expected
    assert [r.task for r in got] == [t.name for t, _ in jobs]  # input order
    assert expected[-1][0] != "ok"  # the broken one really is judged so
    assert all(r.candidate_time_ms for r in got[:-1]), "timed on the actors"


@pytest.mark.parametrize(
    "case",
    [c for c in CASES if c["name"] in RUNTIME_CASES],
    ids=lambda c: c["name"],
)
def test_red_team_verdicts_at_run_time_equal_the_local_pools(runtime_only, case, tmp_path):
    source = (REDTEAM / "cases" / f"{case['name']}.py").read_text()
    source = source.replace("__TARGET__", str(tmp_path / "planted.txt"))
    task = TASKS[case["task"]]
    with Sandbox(_config(static_checks=False, workers=1)) as local:
        expected = local.evaluate(task, source)
    got = runtime_only.evaluate(task, source)
    honest = runtime_only.evaluate(task, task.solutions["cpu"])
    assert got.status == expected.status == case.get("runtime_status", case["status"])
    assert set(got.flags) == set(expected.flags)
    assert honest.status == "ok", "the actor's slot survives the hostile candidate"


def test_static_refusals_come_back_the_same(ray_sandbox):
    relu = TASKS["relu"]
    source = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n"
    got = ray_sandbox.evaluate(relu, source)
    with Sandbox(_config(workers=1)) as local:
        expected = local.evaluate(relu, source)
    assert _verdict(got) == _verdict(expected) and got.status == "rejected"
    assert got.message == expected.message


def test_more_jobs_than_slots_are_all_answered_once_in_order(ray_sandbox):
    names = ["relu", "silu", "row_sum", "add_mul", "scale_shift_relu", "relu", "silu"]
    jobs = [(TASKS[n], TASKS[n].solutions["cpu"]) for n in names]
    results = ray_sandbox.evaluate_many(jobs)
    assert [r.task for r in results] == names
    assert all(r.status == "ok" for r in results), [(r.task, r.message) for r in results]


SLOW_RELU = '''
import time
import torch
from torch import nn
from cuda_agent.kernel_sandbox.launch import cpu_kernel

relu = cpu_kernel(r"""
void relu(float* out, const float* x, long n) {
    for (long i = 0; i < n; ++i) out[i] = x[i] > 0.f ? x[i] : 0.f;
}
""", "relu")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        time.sleep(4.0)  # long enough to be killed mid-job

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        relu(out, x, x.numel())
        return out
'''


def test_a_slot_actor_killed_mid_job_is_replaced_and_no_job_is_lost(runtime_only):
    relu = TASKS["relu"]
    sandbox = runtime_only
    deaths_before = len(sandbox.stats()["deaths"])
    sandbox.warm_up()
    (actor,) = sandbox.actors()
    results: list = []
    runner = threading.Thread(
        target=lambda: results.extend(
            sandbox.evaluate_many([(relu, SLOW_RELU), (relu, relu.solutions["cpu"])])
        )
    )
    runner.start()
    time.sleep(2.5)  # the first job is in its candidate's __init__
    ray.kill(actor, no_restart=True)
    runner.join(timeout=300)
    assert not runner.is_alive()
    assert [r.status for r in results] == ["ok", "ok"], [r.message for r in results]
    deaths = results[0].extra["ray"]["actor_deaths"]
    assert len(deaths) == 1 and "died mid-job" in deaths[0]
    assert "ray" not in results[1].extra  # not run twice: answered once, on its own slot
    (fresh,) = sandbox.actors()
    assert fresh != actor
    assert sandbox.evaluate(relu, relu.solutions["cpu"]).status == "ok"
    assert len(sandbox.stats()["deaths"]) == deaths_before + 1


def test_a_copy_in_another_ray_process_shares_the_slots(ray_sandbox):
    @ray.remote(num_cpus=0)
    def judge(sandbox, task):
        return sandbox.evaluate(task, task.solutions["cpu"]).status

    relu = TASKS["relu"]
    assert ray.get(judge.remote(ray_sandbox, relu)) == "ok"
    assert ray_sandbox.evaluate(relu, relu.solutions["cpu"]).status == "ok"  # still open


def test_evaluate_async_gives_the_same_verdict(ray_sandbox):
    import asyncio

    relu = TASKS["relu"]

    async def both():
        return await asyncio.gather(
            ray_sandbox.evaluate_async(relu, relu.solutions["cpu"]),
            ray_sandbox.evaluate_async(relu, "not python ("),
        )

    good, bad = asyncio.run(both())
    assert good.status == "ok"
    assert _verdict(bad) == _verdict(ray_sandbox.evaluate(relu, "not python ("))
    assert bad.status != "ok"


def test_baselines_are_asked_of_the_slot_actors_in_task_order(ray_sandbox):
    # The CPU backend times no torch.compile, so every status is "off"; the runner's baselines
    # stage calls this on whichever sandbox it was given, a RaySandbox included.
    tasks = [TASKS["relu"], TASKS["add_mul"], TASKS["relu"]]
    seen = []
    statuses = ray_sandbox.measure_baselines(tasks, progress=seen.append)
    assert [s.task for s in statuses] == ["relu", "add_mul", "relu"]
    assert [s.status for s in statuses] == ["off"] * 3
    assert sorted(s.task for s in seen) == ["add_mul", "relu", "relu"]


def test_bad_input_gets_clear_errors(ray_sandbox):
    with pytest.raises(ValueError, match="distribution"):
        ray_sandbox.evaluate(TASKS["relu"], "x", distribution="bogus")
    with pytest.raises(ValueError, match="ray_address"):
        RaySandbox(SandboxConfig(backend="cpu"))
    with pytest.raises(ValueError, match="no GPU"):
        Sandbox(SandboxConfig(backend="cuda", ray_address="auto"))
    with pytest.raises(ValueError, match="free CPUs"):  # both CPUs are held by the fixtures
        Sandbox(_config(workers=1, ray_address="auto"))


def test_auto_settings_are_decided_for_the_cluster_not_this_host():
    from cuda_agent.kernel_sandbox.ray_sandbox import cluster_config

    two_gpu_nodes = {"CPU": 64.0, "GPU": 8.0}
    cuda = cluster_config(SandboxConfig(), two_gpu_nodes, nodes=2)
    assert (cuda.backend, cuda.workers, cuda.compile_workers) == ("cuda", 8, 8)
    # A node's 32 CPUs, less the compile workers' quarter, over its 4 GPU slots: 6 lanes each,
    # and a thread per worker.
    assert (cuda.lanes_per_gpu, cuda.threads_per_worker) == (6, 1)
    cpu = cluster_config(SandboxConfig(backend="cpu"), {"CPU": 16.0}, nodes=1)
    assert (cpu.workers, cpu.compile_workers, cpu.threads_per_worker) == (8, 0, 2)
    assert cpu.lanes_per_gpu == 1  # each CPU slot actor is one lane, as before
    fixed = cluster_config(SandboxConfig(workers=3, threads_per_worker=5), {"CPU": 4.0})
    assert (fixed.backend, fixed.workers, fixed.threads_per_worker) == ("cpu", 3, 5)


def test_a_lost_scheduler_is_a_clear_error_not_a_hang(ray_sandbox):
    # Last in this file: the module's sandbox is unusable afterwards.
    ray.kill(ray_sandbox._scheduler, no_restart=True)
    with pytest.raises(RuntimeError, match="scheduler actor is gone"):
        ray_sandbox.evaluate(TASKS["relu"], TASKS["relu"].solutions["cpu"])


def test_a_new_pool_waits_for_the_resources_of_actors_being_torn_down():
    # Ray gives a killed actor's CPU back a moment later: a sandbox opened right after another
    # closed must not be refused for it; a cluster that stays full is refused with the count.
    from cuda_agent.kernel_sandbox.ray_sandbox import _check_room

    config = _config(workers=1)
    answers = iter([{"CPU": 0.0}, {"CPU": 0.0}, {"CPU": 1.0}])
    _check_room(config, lambda: next(answers), wait_s=5.0)
    with pytest.raises(ValueError, match="has 0 free CPUs"):
        _check_room(config, lambda: {"CPU": 0.0}, wait_s=0.3)


def test_a_cuda_pool_needs_room_for_its_compile_actors_too():
    # On CUDA each slot actor holds a GPU and a CPU and each compile actor a CPU: a cluster
    # with the GPUs but not the CPUs would leave a compile actor unplaced, and every job that
    # needs a build waiting on it for ever. Refused instead.
    from cuda_agent.kernel_sandbox.ray_sandbox import _check_room

    config = SandboxConfig(backend="cuda", workers=1, compile_workers=1)
    _check_room(config, lambda: {"GPU": 1.0, "CPU": 2.0}, wait_s=0.0)
    with pytest.raises(ValueError, match=r"has 1 free CPUs.*1 slot actors and 1 compile actors"):
        _check_room(config, lambda: {"GPU": 1.0, "CPU": 1.0}, wait_s=0.3)
    with pytest.raises(ValueError, match="has 0 free GPUs"):
        _check_room(config, lambda: {"GPU": 0.0, "CPU": 8.0}, wait_s=0.3)


def test_a_slots_candidate_worker_builds_for_the_compile_actors_architecture():
    # A slot actor's one-slot pool has no compile workers of its own, so nothing named the
    # architecture to its candidate worker: torch then derives other nvcc flags from the device
    # ("9.0+PTX" against the compile actor's "9.0") and ninja rebuilt, on the GPU slot, every
    # extension the compile actor had built. The slot's worker names the same list.
    from cuda_agent.kernel_sandbox._parent.pool import Worker

    with Sandbox(_config(workers=1)) as slot_pool:
        slot_pool.build_for("9.0")  # what a slot actor does with its architecture
        compile_env = Worker(slot_pool.config, 0, "compile", cuda_arch="9.0")._env()
        for lane in slot_pool._lanes.lanes:
            candidate_env = lane.candidate._env()
            assert candidate_env["TORCH_CUDA_ARCH_LIST"] == compile_env["TORCH_CUDA_ARCH_LIST"]
