"""Runtime anti-cheat checks in the candidate worker (CPU backend, real workers): what static
analysis cannot see is caught when the candidate runs."""

from __future__ import annotations

import pytest

from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig, Task, builtin_tasks
from cuda_agent.kernel_sandbox._shared.protocol import Check, required_checks

KERNEL = '''
import torch
from torch import nn
from cuda_agent.kernel_sandbox.launch import cpu_kernel

relu = cpu_kernel("""
void relu(float* out, const float* x, long n) {
    for (long i = 0; i < n; ++i) out[i] = x[i] > 0.f ? x[i] : 0.f;
}
""", "relu")
'''


def _candidate(forward: str, prelude: str = "") -> str:
    body = "".join(f"        {line}\n" for line in forward.strip().splitlines())
    return KERNEL + prelude + "\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n" + body


HONEST = "out = torch.empty_like(x)\nrelu(out, x, x.numel())\nreturn out"


@pytest.fixture(scope="module")
def relu() -> Task:
    return next(t for t in builtin_tasks() if t.name == "relu")


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(SandboxConfig(backend="cpu", workers=1, repeats=3, timing_budget_s=0.3)) as sb:
        yield sb


@pytest.fixture(scope="module")
def unchecked():
    """Static checks off, so that the runtime checks alone meet each hack."""
    config = SandboxConfig(
        backend="cpu", workers=1, repeats=3, timing_budget_s=0.3, static_checks=False
    )
    with Sandbox(config) as sb:
        yield sb


def test_pytorch_reached_through_an_alias_is_caught_at_run_time(sandbox, relu):
    # No call of torch.* appears in forward, so the static checks pass it.
    aliased = _candidate(
        "out = torch.empty_like(x)\nrelu(out, x, x.numel())\nreturn act(x)", "act = torch.relu\n"
    )
    result = sandbox.evaluate(relu, aliased)
    assert result.status == "rejected" and result.flags == ("torch_compute",)
    assert "aten.relu" in result.message


def test_tensor_subclass_outputs_are_rejected(sandbox, relu):
    lazy = _candidate(
        HONEST.replace("return out", "return out.as_subclass(Lazy)"),
        "\n\nclass Lazy(torch.Tensor):\n    pass\n",
    )
    result = sandbox.evaluate(relu, lazy)
    assert result.status == "rejected" and "tensor_subclass" in result.flags


def test_threads_left_running_are_rejected(unchecked, relu):
    threaded = _candidate(
        "threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n" + HONEST,
        "import threading, time\n",
    )
    result = unchecked.evaluate(relu, threaded)
    assert result.status == "rejected" and "background_thread" in result.flags


def test_outputs_that_change_between_identical_calls_are_rejected(sandbox, relu):
    # State hidden in C, invisible to any Python analysis: every other call is off by 0.5.
    flaky = KERNEL.replace(
        "for (long i = 0; i < n; ++i) out[i] = x[i] > 0.f ? x[i] : 0.f;",
        "static int calls = 0; calls++;\n"
        "    for (long i = 0; i < n; ++i) out[i] = (x[i] > 0.f ? x[i] : 0.f) + (calls % 2) * 0.5f;",
    )
    source = (
        flaky
        + "\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
        + "".join(f"        {line}\n" for line in HONEST.splitlines())
    )
    result = sandbox.evaluate(relu, source)
    assert result.status == "rejected" and "nondeterministic" in result.flags


def test_results_cached_by_tensor_address_are_caught_in_place(unchecked, relu):
    caching = _candidate(
        "key = x.data_ptr()\nif key in SEEN:\n    return SEEN[key].clone()\n"
        + HONEST.replace("return out", "SEEN[key] = out.clone()\nreturn out"),
        "SEEN = {}\n",
    )
    result = unchecked.evaluate(relu, caching)
    assert result.status == "incorrect"
    assert "same input tensors" in result.message or "mismatch" in result.message


def test_work_skipped_where_normal_inputs_allow_fails_on_heavy_tails(sandbox):
    row_mean = next(t for t in builtin_tasks() if t.name == "row_mean")
    # Skips one element in 64: within tolerance on normal inputs, not on heavy-tailed ones.
    partial = row_mean.solutions["cpu"].replace(
        "for (long j = 0; j < cols; ++j) sum += xr[j];",
        "for (long j = 0; j < cols; ++j) if (j % 64 != 63) sum += xr[j];",
    )
    assert partial != row_mean.solutions["cpu"]
    normal_only = SandboxConfig(
        backend="cpu", workers=1, repeats=3, timing_budget_s=0.3, extra_distributions=()
    )
    with Sandbox(normal_only) as lenient:
        assert lenient.evaluate(row_mean, partial).status == "ok"  # the hack works there
    result = sandbox.evaluate(row_mean, partial)
    assert result.status == "incorrect" and "heavy_tailed" in result.message


def test_reverification_is_required_only_above_the_bound():
    plan = [Check("trial", 0, {}), Check("reverify", 1, {}), Check("after", 2, {})]
    fast = {"eager_time_ms": 20.0, "candidate_time_ms": 1.0}
    slow = {"eager_time_ms": 2.0, "candidate_time_ms": 1.0}
    assert required_checks(plan, fast, bound=10.0) == [0, 1, 2]
    assert required_checks(plan, slow, bound=10.0) == [0, 2]
    assert required_checks(plan, {}, bound=10.0) == [0, 2]
    # timed at 0 ms: nothing is that fast, so the worker re-verifies and the parent requires it
    instant = {"eager_time_ms": 2.0, "candidate_time_ms": 0.0}
    assert required_checks(plan, instant, bound=10.0) == [0, 1, 2]


def test_candidates_cannot_signal_or_trace_other_processes(unchecked, relu):
    # Signal 0 only asks whether a signal could be sent: harmless whatever the outcome. The
    # candidate computes honestly only when every attempt was refused.
    probe = _candidate(
        "for target in (os.getppid(), -1, 1):\n"
        "    try:\n"
        "        os.kill(target, 0)\n"
        "        return x\n"  # allowed: a wrong answer says so
        "    except PermissionError:\n"
        "        pass\n" + HONEST,
        "import os\n",
    )
    _every_attempt_refused(unchecked, relu, probe)


def _every_attempt_refused(sandbox, task, probe: str) -> None:
    """``probe`` returns a wrong answer as soon as one attempt is allowed, else computes
    honestly: ``ok`` means seccomp refused them all."""
    result = sandbox.evaluate(task, probe)
    if not result.extra.get("signals_confined"):
        pytest.skip("no seccomp on this host")
    assert result.status == "ok", result.message


def test_candidates_cannot_have_another_process_signalled_through_a_descriptor(unchecked, relu):
    # With O_ASYNC, a descriptor's owner gets SIGIO (or F_SETSIG's signal) when it is ready:
    # a kill without kill(). Naming an owner alone (no O_ASYNC here) signals nothing, so the
    # probes are harmless; the candidate computes honestly only when every one was refused.
    probe = _candidate(
        "r, w = os.pipe()\n"
        "pair = socket.socketpair()\n"
        "attempts = [\n"
        "    lambda t: fcntl.fcntl(r, fcntl.F_SETOWN, t),\n"
        "    lambda t: fcntl.fcntl(r, 10, 0),\n"  # F_SETSIG
        "    lambda t: fcntl.fcntl(r, 15, struct.pack('ii', 1, t)),\n"  # F_SETOWN_EX, a pid
        "    lambda t: fcntl.ioctl(pair[0], 0x8901, struct.pack('i', t)),\n"  # FIOSETOWN
        "    lambda t: fcntl.ioctl(pair[0], 0x8902, struct.pack('i', t)),\n"  # SIOCSPGRP
        "]\n"
        "for attempt in attempts:\n"
        "    try:\n"
        "        attempt(os.getppid())\n"
        "        return x\n"  # allowed: a wrong answer says so
        "    except PermissionError:\n"
        "        pass\n" + HONEST,
        "import fcntl, os, socket, struct\n",
    )
    _every_attempt_refused(unchecked, relu, probe)


def test_candidates_cannot_write_outside_their_directory(unchecked, relu, tmp_path):
    target = tmp_path / "planted.txt"
    writer = _candidate(f"open({str(target)!r}, 'w').write('x')\n" + HONEST)
    result = unchecked.evaluate(relu, writer)
    if not result.extra.get("filesystem_confined"):
        pytest.skip("this kernel has no Landlock")
    assert result.status == "runtime_error" and "Permission" in result.message
    assert not target.exists()
    # Its own directory stays writable (compilers and temporary files need it). (Written at
    # import: file work in every forward would be host time outside the kernels.)
    scratch = _candidate(HONEST, "import tempfile\ntempfile.NamedTemporaryFile().write(b'x')\n")
    assert unchecked.evaluate(relu, scratch).status == "ok"


# ------------------------------------------------------------------------------- decoy kernels
def test_compute_outside_the_launched_kernels_is_rejected(unchecked, relu):
    # A kernel launched for show while another library computes: caught at run time by the
    # forward's CPU time outside its kernels, with the static checks off. The same forward
    # with the work in the kernel is ok, and its report shows where the time went.
    # (NumPy's relu in float64: one float32 pass over relu's CPU size, 1 MiB, takes about
    # 0.14 ms on the 2-core machine, at the verdict's 0.15 ms floor for noise; three passes
    # put the decoy clearly past it.)
    show = "touch = cpu_kernel('void touch(float* out, long n) { out[0] = 0.f; }', 'touch')\n"
    decoy = _candidate(
        "scratch = torch.empty(1)\ntouch(scratch, 1)\n"
        "wide = numpy.maximum(x.numpy().astype(numpy.float64), 0)\n"
        "return torch.from_numpy(wide.astype(numpy.float32))",
        prelude="import numpy\n" + show,
    )
    result = unchecked.evaluate(relu, decoy)
    assert result.status == "rejected" and "compute_outside_kernels" in result.flags
    assert "outside its kernels" in result.message
    assert result.extra["host_time_split"]["second_look_forwards"] > 0  # it looked again
    # Untimed (no speed claimed), the split is reported, not judged.
    untimed = unchecked.evaluate(relu, decoy, measure_time=False)
    assert untimed.status == "ok", untimed.message
    split = untimed.extra["host_time_split"]
    assert split["outside_s"] > split["limit_s"]
    honest = unchecked.evaluate(relu, _candidate(HONEST))
    assert honest.status == "ok", honest.message
    split = honest.extra["host_time_split"]
    assert split["kernels_s"] > 0 and split["calls"] >= 2 and split["launches"] == 1
    assert split["limit_s"] >= 150e-6
    assert split["outside_s"] < split["total_s"]


# An honest forward whose checked calls were each slowed on the host, as a busy machine does
# (an honest layernorm was rejected at 0.20 ms against its 0.19 ms limit in an H100 soak): the
# first 12 calls burn 2 ms of CPU in Python, later ones do not. More forwards are measured
# before a host-time rejection, and their least figures judge it.
SLOWED = (
    "global CALLS\nCALLS += 1\nif CALLS <= 12:\n    end = time.thread_time() + 2e-3\n"
    "    while time.thread_time() < end:\n        pass\n" + HONEST
)


def test_a_rejection_on_host_time_takes_a_second_look(unchecked, relu):
    slowed = _candidate(SLOWED, prelude="import time\nCALLS = 0\n")
    result = unchecked.evaluate(relu, slowed)
    assert result.status == "ok", result.message
    split = result.extra["host_time_split"]
    assert split["second_look_forwards"] > 0 and split["outside_s"] <= split["limit_s"]
    # the checked calls alone would have rejected it (the untimed judgement does not look again)
    untimed = unchecked.evaluate(relu, slowed, measure_time=False)
    assert (
        untimed.extra["host_time_split"]["outside_s"] > untimed.extra["host_time_split"]["limit_s"]
    )
    # (a decoy computes in every call: rejected after its second look, the test above)


def test_copies_do_not_dilute_a_decoys_time_outside_its_kernels(unchecked, relu):
    # Copies are allowed operators, and a copy that waits for the device is CPU time: a decoy
    # padding its forward with them must not fall under the share.
    from cuda_agent.kernel_sandbox._candidate.decoys import HostSplit, host_verdict

    padded = HostSplit(total=40e-3, kernels=1e-5, ops=25e-3, calls=4)  # 15 ms of NumPy
    assert "outside its kernels" in host_verdict([padded])[1]
    honest = HostSplit(total=40e-3, kernels=15e-3, ops=25e-3, calls=4)
    assert host_verdict([honest])[1] == ""
    show = "touch = cpu_kernel('void touch(float* out, long n) { out[0] = 0.f; }', 'touch')\n"
    decoy = _candidate(
        "scratch = torch.empty(1)\ntouch(scratch, 1)\n"
        "pad = [x.clone() for _ in range(40)]\n"
        "return torch.from_numpy(numpy.maximum(x.numpy(), 0))",
        prelude="import numpy\n" + show,
    )
    result = unchecked.evaluate(relu, decoy)
    assert result.status == "rejected" and "compute_outside_kernels" in result.flags, (
        result.message,
        result.extra.get("host_time_split"),
    )


def test_a_kernel_slowed_by_load_does_not_excuse_a_decoy():
    # Load adds CPU time to whatever runs when the thread is preempted or its caches are cold:
    # here to the show kernel's call in the forward with the least time outside (figures as
    # measured for the NumPy relu decoy on a loaded 2-core machine, in seconds). Judged on
    # that forward's own kernel time (60 us) the decoy looked like 7.5 times its kernels' work
    # and passed; its kernels' least time (8 us) is their work.
    from cuda_agent.kernel_sandbox._candidate.decoys import HostSplit, host_verdict

    def split(outside: float, kernels: float) -> HostSplit:
        return HostSplit(total=outside + kernels + 90e-6 + 12e-6, kernels=kernels, ops=90e-6,
                         calls=4, launches=1)  # fmt: skip

    decoy = [split(520e-6, 8e-6), split(610e-6, 10e-6), split(450e-6, 60e-6), split(700e-6, 9e-6)]
    report, message = host_verdict(decoy, kernels_on_host=True)
    assert "outside its kernels" in message, report
    assert report["least_kernels_s"] == 8e-6 and report["kernels_s"] == 60e-6
    # An honest relu under the same load: its kernels do the work, whichever forward is least.
    honest = [split(190e-6, 132e-6), split(310e-6, 160e-6), split(630e-6, 420e-6)]
    assert host_verdict(honest, kernels_on_host=True)[1] == ""


def test_kernel_names_are_read_from_demangled_profiler_names():
    from cuda_agent.kernel_sandbox._candidate.decoys import base_name, classify

    assert base_name("void relu_kernel<float, 4>(float const*, float*, long)") == "relu_kernel"
    assert base_name("relu_kernel") == "relu_kernel"
    assert base_name("void at::native::(anonymous namespace)::fill<float>(float*)") == "fill"
    own = {"relu_kernel", "touch"}
    assert classify("void relu_kernel<float>(float const*, float*, int)", own) == "own"
    kernel = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>()"
    assert classify(kernel, own) == "torch"
    assert classify("Memcpy DtoD (Device -> Device)", own) == "torch"
    assert classify("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32", own) == "library"
    assert classify("cupy_maximum__float32_int64_float32", own) == "foreign"
    assert classify("triton_poi_fused_relu_0", own) == "foreign"


def test_device_verdict_judges_foreign_time_and_allowed_libraries():
    from cuda_agent.kernel_sandbox._candidate.decoys import device_verdict

    mostly_own = {"own": 0.9, "torch": 0.05, "library": 0.0, "foreign": 0.05, "other_kernels": []}
    assert device_verdict(mostly_own, library_allowed=False) == ""
    foreign = {"own": 0.01, "torch": 0.0, "library": 0.0, "foreign": 0.99,
               "other_kernels": ["cupy_maximum"]}  # fmt: skip
    assert "cupy_maximum" in device_verdict(foreign, library_allowed=False)
    gemm = {"own": 0.3, "torch": 0.0, "library": 0.7, "foreign": 0.0, "other_kernels": ["gemm"]}
    assert device_verdict(gemm, library_allowed=False)
    assert device_verdict(gemm, library_allowed=True) == ""
    assert device_verdict(None, library_allowed=False) == ""


def test_an_honest_small_kernel_on_a_loaded_machine_is_not_called_a_decoy():
    # The splits measured: an honest relu on the loaded CI machine (0.15 ms outside its
    # kernels) and NumPy's relu decoy; on the CPU backend the kernels' time is their work.
    from cuda_agent.kernel_sandbox._candidate.decoys import HostSplit, host_verdict

    honest = HostSplit(total=265e-6, kernels=58e-6, ops=57e-6, calls=2)
    assert honest.outside > 140e-6
    assert host_verdict([honest], kernels_on_host=True)[1] == ""
    decoy = HostSplit(total=356e-6, kernels=4.5e-6, ops=75e-6, calls=4)
    assert "outside its kernels" in host_verdict([decoy], kernels_on_host=True)[1]


# Splits recorded on the H200 (torch 2.11). The honest mlp: 2 launches of the built-in GEMM,
# 0.15 ms outside its kernels at 77% and 80% of its own time with 4 compile workers and the
# reference worker busy on the 16-core host (results/2026-12-02-h200-issue19/pool_scaling.json;
# the kernels' and operators' parts inferred from the share), 1.04 ms on the device
# (results/2026-11-29-h200/solutions_rewrite.json). library_decoy_cuda with the static checks
# off: results/2026-12-01-h200-issue13/decoys_gpu.json.
MLP_LOADED = dict(total=257e-6, kernels=33e-6, ops=60e-6, calls=4, launches=2)
MLP_DEVICE_S = 1.04e-3
MLP_CONTROL = dict(total=249e-6, kernels=26e-6, ops=60e-6, calls=4, launches=2)
NUMPY_DECOY_CUDA = dict(total=37.827e-3, kernels=21.0e-6, ops=16.247e-3, calls=6, launches=1)
NUMPY_DECOY_DEVICE_S = 1.4365e-5 * 55692.5e-6  # its own share of the device time: 0.8 us


def test_honest_launch_overhead_on_a_loaded_gpu_host_is_not_called_a_decoy():
    from cuda_agent.kernel_sandbox._candidate.decoys import HostSplit, host_verdict

    for figures, share in ((MLP_LOADED, 0.77), (MLP_CONTROL, 0.80)):
        honest = HostSplit(**figures)
        assert 150e-6 < honest.outside < 155e-6  # "spent 0.15 ms outside its kernels"
        assert round(honest.outside / (honest.total - honest.ops), 2) == share
        report, message = host_verdict([honest], device_work_s=MLP_DEVICE_S)
        assert message == "", message
        assert report["limit_s"] == pytest.approx(350e-6)  # 0.15 ms + 2 x 0.1 ms
        assert report["outside_s"] < 0.45 * report["limit_s"]  # room for twice the load
        # Without the launch allowance (the rule before, and now when the device time of its
        # kernels was not measured) it is rejected, as on the H200.
        assert "outside its kernels" in host_verdict([honest])[1]


def test_launches_that_do_no_work_buy_no_allowance():
    from cuda_agent.kernel_sandbox._candidate.decoys import HostSplit, host_verdict

    decoy = HostSplit(**NUMPY_DECOY_CUDA)
    report, message = host_verdict([decoy], device_work_s=NUMPY_DECOY_DEVICE_S)
    assert "outside its kernels" in message and "1 launches allow 0.15 ms" in message
    assert report["outside_s"] > 100 * report["limit_s"]  # 21.5 ms against 0.15 ms
    # The same decoy padded with 500 empty launches (5 us each on the host, 1 us on the
    # device) to buy 50 ms of allowance: it gets their 0.5 ms of work and no more.
    padded = HostSplit(
        total=decoy.total + 500 * 5e-6, kernels=decoy.kernels + 500 * 5e-6, ops=decoy.ops,
        calls=decoy.calls + 500, launches=decoy.launches + 500,
    )  # fmt: skip
    report, message = host_verdict([padded], device_work_s=NUMPY_DECOY_DEVICE_S + 500e-6)
    assert "outside its kernels" in message
    assert report["limit_s"] < 0.7e-3 and report["outside_s"] > 30 * report["limit_s"]
    # An honest forward's own kernels, however short, still pass (the H200's honest relu).
    relu = HostSplit(total=111.2e-6, kernels=13.1e-6, ops=35.7e-6, calls=2, launches=1)
    assert host_verdict([relu], device_work_s=32e-6)[1] == ""
    # On the CPU backend the kernels' own time is their work: NumPy's relu decoy on the
    # loaded CI machine launches one empty kernel and is still rejected.
    cpu_decoy = HostSplit(total=356e-6, kernels=4.5e-6, ops=75e-6, calls=4, launches=1)
    report, message = host_verdict([cpu_decoy], kernels_on_host=True)
    assert "outside its kernels" in message and report["limit_s"] == pytest.approx(154.5e-6)
