"""A reference that fails is not the candidate's failure (``unjudged``), unless the candidate made
it fail.

On an 80 GB H100 (2026-12-05) the reference worker ran out of GPU memory on 54 of 152 held-out
answers, and each was judged the candidate's ``runtime_error`` (reward -1). Now a check whose
reference failed is judged again with the lane's workers started afresh and the device alone;
failing again, the reference alone (the candidate's process gone) computes the same draw: when it
cannot, the verdict is ``unjudged``; when it can, the candidate's process caused the failure and
the verdict is the candidate's ``runtime_error``.

CPU backend, real workers. The candidate's "hold on the GPU's memory" is played by an exclusive
``flock`` on a file in the shared cache that the reference's forward needs: held for as long as
the candidate's process lives, as its memory would be.
"""

from __future__ import annotations

import pytest

from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig, Task, builtin_tasks, task_from_source

RELU = next(t for t in builtin_tasks() if t.name == "relu")
SIZES = 'CPU_SIZES = {"BATCH": 64, "DIM": 4096}'

BROKEN = RELU.source.replace(
    "        return torch.relu(x)", "        raise RuntimeError('this reference is broken')"
)

# The reference's forward needs a lock that a candidate may take in its own process.
NEEDS_LOCK = RELU.source.replace(
    "        return torch.relu(x)",
    "        import fcntl, os\n"
    "        from cuda_agent.kernel_sandbox._shared.compile import cache_root\n"
    "        fd = os.open(cache_root() / 'unjudged-test.lock', os.O_CREAT | os.O_RDWR)\n"
    "        try:\n"
    "            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
    "        except BlockingIOError:\n"
    "            raise MemoryError('the resource is taken') from None\n"
    "        finally:\n"
    "            os.close(fd)\n"
    "        return torch.relu(x)",
)

HOG = (
    "import fcntl, os\n"
    "from cuda_agent.kernel_sandbox._shared.compile import cache_root\n"
    "_HELD = os.open(cache_root() / 'unjudged-test.lock', os.O_CREAT | os.O_RDWR)\n"
    "fcntl.flock(_HELD, fcntl.LOCK_EX)  # held while this process lives\n"
) + RELU.solutions["cpu"]


@pytest.fixture(scope="module")
def sandbox():
    # static checks off: the candidate below opens a file, which they would refuse before it ran
    config = SandboxConfig(backend="cpu", workers=1, static_checks=False, time_compile=False)
    with Sandbox(config) as sb:
        yield sb


def _task(source: str, name: str) -> Task:
    assert source != RELU.source and SIZES in source
    return task_from_source(source, name=name)


def test_a_reference_that_fails_alone_too_leaves_the_candidate_unjudged(sandbox):
    result = sandbox.evaluate(_task(BROKEN, "broken_reference"), RELU.solutions["cpu"])
    assert result.status == "unjudged", result.message
    assert not result.correct
    assert "the reference failed on check" in result.message
    assert "this reference is broken" in result.message
    assert result.extra["judged_again"].startswith("the reference failed alone too")


def test_a_reference_the_candidate_made_fail_is_the_candidates_runtime_error(sandbox):
    result = sandbox.evaluate(_task(NEEDS_LOCK, "lock_reference"), HOG)
    assert result.status == "runtime_error", result.message
    assert "the candidate's process made it fail" in result.message
    assert result.extra["judged_again"] == "the reference ran alone"


def test_an_honest_candidate_of_the_same_task_is_judged_as_ever(sandbox):
    # the same lock-needing reference, a candidate that takes no lock: ok, judged once
    result = sandbox.evaluate(_task(NEEDS_LOCK, "lock_reference"), RELU.solutions["cpu"])
    assert result.status == "ok", result.message
    assert "judged_again" not in result.extra


@pytest.mark.gpu
def test_on_the_gpu_a_reference_that_fails_alone_too_leaves_the_candidate_unjudged():
    """The same rule on the CUDA backend, with several lanes: the rerun restarts the lane's
    workers on the GPU and the probe runs in a fresh reference worker there."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    config = SandboxConfig(backend="cuda", workers=1, lanes_per_gpu=2, time_compile=False)
    with Sandbox(config) as sandbox:
        broken = sandbox.evaluate(_task(BROKEN, "broken_reference"), RELU.solutions["cuda"])
        honest = sandbox.evaluate(RELU, RELU.solutions["cuda"])
    assert broken.status == "unjudged", broken.message
    assert broken.extra["judged_again"].startswith("the reference failed alone too")
    assert honest.status == "ok", honest.message
