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
    result = unchecked.evaluate(relu, probe)
    if not result.extra.get("signals_confined"):
        pytest.skip("no seccomp on this host")
    assert result.status == "ok", result.message


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
    show = "touch = cpu_kernel('void touch(float* out, long n) { out[0] = 0.f; }', 'touch')\n"
    decoy = _candidate(
        "scratch = torch.empty(1)\ntouch(scratch, 1)\n"
        "return torch.from_numpy(numpy.maximum(x.numpy(), 0))",
        prelude="import numpy\n" + show,
    )
    result = unchecked.evaluate(relu, decoy)
    assert result.status == "rejected" and "compute_outside_kernels" in result.flags
    assert "outside its kernels" in result.message
    honest = unchecked.evaluate(relu, _candidate(HONEST))
    assert honest.status == "ok", honest.message
    split = honest.extra["host_time_split"]
    assert split["kernels_s"] > 0 and split["calls"] >= 2
    assert split["outside_s"] < split["total_s"]


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
