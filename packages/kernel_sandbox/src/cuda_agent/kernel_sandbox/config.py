"""``SandboxConfig``: every knob of the sandbox, validated on construction."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Literal

# Value distributions for floating inputs (see _evaluate._redistribute and properties.py).
INPUT_DISTRIBUTIONS = ("normal", "heavy_tailed", "large", "tiny")

ToleranceName = Literal["cuda-agent", "kernelbench"]


@dataclass(frozen=True)
class Tolerances:
    """How close an output must be to the expected one: every element within
    ``atol + rtol * |expected|``; ``per_dtype`` (dtype name -> (atol, rtol)) overrides both for
    outputs of that dtype."""

    atol: float
    rtol: float
    per_dtype: Mapping[str, tuple[float, float]] = field(default_factory=dict)


# Named tolerance settings (SandboxConfig.tolerance, ``--tolerance``).
TOLERANCE_PRESETS: Mapping[str, Tolerances] = MappingProxyType(
    {
        # The reference system's (CUDA-Agent), and this sandbox's default.
        "cuda-agent": Tolerances(atol=1e-2, rtol=1e-2),
        # KernelBench's get_tolerance_for_precision (after torchbench): 1e-4 for float32
        # and 1e-2 for half precision, as atol and rtol alike.
        "kernelbench": Tolerances(
            atol=1e-4, rtol=1e-4, per_dtype={"float16": (1e-2, 1e-2), "bfloat16": (1e-2, 1e-2)}
        ),
    }
)


@dataclass(frozen=True)
class Deadlines:
    """Hard limits in seconds per phase; past one the worker's whole process tree is killed."""

    startup: float = 180.0  # a fresh worker importing torch (and initialising CUDA)
    load: float = 120.0  # importing the candidate, which compiles its kernels
    correctness: float = 60.0
    timing: float = 120.0


@dataclass(frozen=True)
class SandboxConfig:
    """How candidates are built, checked and timed.

    ``backend="auto"`` picks ``cuda`` when torch sees a GPU, else ``cpu``.

    The pool is made of *lanes* on *devices*. A device is a GPU (on the CPU backend, the host is
    the one device); each device has ``lanes_per_gpu`` lanes, each a candidate worker and a
    reference worker, which build, check and verify candidates at once, while a timing gate
    per device lets only one lane time at a time, with no other lane's device work beside it
    (``README.md``, "Lanes"). ``workers`` counts devices on CUDA (0: every visible GPU); on
    the CPU backend, where there is one device, ``workers=N`` asks for N lanes when
    ``lanes_per_gpu`` is ``"auto"`` (as it asked for N slots before lanes existed).
    ``resolved()`` writes the numbers in: ``workers`` devices, ``lanes_per_gpu`` lanes each.
    """

    backend: Literal["auto", "cpu", "cuda"] = "auto"
    workers: int = 0
    # Lanes per device: an int, or "auto" (CUDA: from the host's CPUs and memory and the
    # GPU's memory, ``auto_lanes``; CPU: one lane per two cores).
    lanes_per_gpu: int | Literal["auto"] = "auto"
    # One timing at a time per device, alone. False is a control for benchmarks that must show
    # the overlaps the gate prevents; timings are then not reliable.
    timing_gate: bool = True
    # How long a timing that arrives while other lanes check may wait for more timings to join
    # its batch (one drain of the checks serves the batch), before it closes the gate to them.
    timing_gather_s: float = 0.25
    # CUDA backend: CPU-only processes that build load_inline / work-directory extensions ahead
    # of the GPU job, in parallel with it (-1 = automatic: a quarter of the cores, at most 8).
    compile_workers: int = -1
    # CPU backend: torch/OpenMP threads in each worker (0 = auto: the cores over the workers'
    # lanes, at most $OMP_NUM_THREADS where that is set, as torch's own default honours it)
    threads_per_worker: int = 0
    trials: int = 5
    # Outputs are compared at a named preset's tolerances (TOLERANCE_PRESETS, ``tolerance``);
    # explicit atol / rtol (None = the preset's) and dtype_tolerances (name -> (atol, rtol), e.g.
    # {"bfloat16": (2e-2, 2e-2)}) override it. ``resolved()`` writes the numbers in. (The
    # preset comes after them so that positional arguments keep their old meaning.)
    atol: float | None = None
    rtol: float | None = None
    dtype_tolerances: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    tolerance: ToleranceName = "cuda-agent"
    seed: int = 0
    warmup: int = 3
    # Timed calls of each callable (0 = automatic: 100 on CUDA, where a call is cheap and the
    # median needs them to stay within 3% on an A/A comparison; 30 on the CPU).
    repeats: int = 0
    timing_budget_s: float = 2.0  # stop repeating a measurement early past this budget
    # ... and once every median's standard error is below this share of it (after 20 rounds;
    # 0: always run ``repeats`` rounds). Steady GPU kernels get there in about 20 rounds.
    timing_precision: float = 0.003
    time_compile: bool | None = None  # time torch.compile too (None = only on CUDA)
    # Keep torch.compile baselines on disk per (task, sizes, GPU, torch version), timed once
    # by a reference worker; later jobs time only candidate and eager (no 10 s compile).
    cache_baselines: bool = True
    require_custom_kernel: bool = True  # reject candidates that never launch a kernel
    # Anti-cheat: static (AST) checks in the caller before any candidate code runs, and runtime
    # checks in the worker (see static_checks.py and the README's red-team table).
    static_checks: bool = True
    runtime_checks: bool = True
    # PyTorch operators the forward path may call anyway (library kernels such as "matmul",
    # "conv2d"; as the reference system allows cuBLAS / cuDNN). Empty: none.
    allowed_torch_ops: tuple[str, ...] = ()
    # With runtime checks: extra trials on other value distributions, and a speedup over eager
    # above which the candidate is re-verified on fresh inputs after timing.
    extra_distributions: tuple[str, ...] = ("heavy_tailed",)
    reverify_speedup: float = 10.0
    max_jobs_per_worker: int = 200  # recycle a worker after this many jobs
    # How a worker process is made: "fork" from a zygote that has imported torch (0.02 s on
    # 2 cores, 0.66 s with its CUDA context on an H100), "exec" a fresh interpreter (2.2 s and
    # 11.6 s there); "auto" forks unless $CUDA_AGENT_WORKER_START says "fork" or "exec". Either
    # way it confines itself the same (``_parent/spawn.py``).
    worker_start: Literal["auto", "fork", "exec"] = "auto"
    max_output_bytes: int = 64 * 1024 * 1024  # file-size limit for candidate processes
    # Largest total size of one trial's outputs (they travel to the reference worker).
    max_output_tensor_bytes: int = 16 << 30
    # CUDA: trial outputs stay on the GPU, in a buffer the reference worker shares with the
    # candidate worker by CUDA IPC; False sends them through host memory (as on the CPU).
    device_exchange: bool = True
    # Address space a candidate may add beyond the worker's own (None = 16 GiB on CPU, off on CUDA).
    max_memory_bytes: int | None = None
    isolate_network: bool = True  # a private network namespace per worker, where allowed
    deadlines: Deadlines = field(default_factory=Deadlines)
    # A Ray cluster to run the pool on (``RaySandbox``): "auto" (the running cluster), "local"
    # (a new one on this machine) or an address; None: the local pool of worker processes.
    # ``workers`` and ``compile_workers`` then count actors across the cluster.
    ray_address: str | None = None

    def __post_init__(self) -> None:
        if self.backend not in ("auto", "cpu", "cuda"):
            raise ValueError(f"backend must be 'auto', 'cpu' or 'cuda', not {self.backend!r}")
        for name in ("workers", "threads_per_worker"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0 (0 = automatic)")
        if self.lanes_per_gpu != "auto" and (
            not isinstance(self.lanes_per_gpu, int) or self.lanes_per_gpu < 1
        ):
            raise ValueError(
                f"lanes_per_gpu must be an int >= 1 or 'auto', not {self.lanes_per_gpu!r}"
            )
        if self.compile_workers < -1:
            raise ValueError("compile_workers must be >= 0, or -1 for automatic")
        if self.worker_start not in ("auto", "fork", "exec"):
            raise ValueError(
                f"worker_start must be 'auto', 'fork' or 'exec', not {self.worker_start!r}"
            )
        chosen = os.environ.get("CUDA_AGENT_WORKER_START", "auto")
        if self.worker_start == "auto" and chosen not in ("auto", "fork", "exec"):
            raise ValueError(
                f"$CUDA_AGENT_WORKER_START must be 'auto', 'fork' or 'exec', not {chosen!r}"
            )
        for name in ("trials", "max_jobs_per_worker"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        if self.repeats < 0:
            raise ValueError("repeats must be >= 1, or 0 for automatic")
        if self.tolerance not in TOLERANCE_PRESETS:
            known = ", ".join(repr(name) for name in TOLERANCE_PRESETS)
            raise ValueError(f"unknown tolerance preset {self.tolerance!r}; known: {known}")
        for name in ("atol", "rtol"):
            value = getattr(self, name)
            if value is not None and not value >= 0:
                raise ValueError(f"{name} must be >= 0, or None for the tolerance preset's")
        for dtype, pair in self.dtype_tolerances.items():
            if len(pair) != 2 or min(pair) < 0:
                raise ValueError(f"dtype_tolerances[{dtype!r}] must be (atol, rtol) with both >= 0")
        for name in self.extra_distributions:
            if name not in INPUT_DISTRIBUTIONS:
                raise ValueError(
                    f"extra_distributions: {name!r} is not one of {INPUT_DISTRIBUTIONS}"
                )
        if self.reverify_speedup <= 1:
            raise ValueError("reverify_speedup must be > 1")
        if self.warmup < 0 or self.timing_budget_s <= 0:
            raise ValueError("warmup must be >= 0 and timing_budget_s > 0")
        if self.timing_gather_s < 0:
            raise ValueError("timing_gather_s must be >= 0")
        if not 0 <= self.timing_precision < 1:
            raise ValueError("timing_precision must be in [0, 1)")

    def tolerances(self) -> Tolerances:
        """The tolerances outputs are judged with: the preset's, under the explicit ``atol``,
        ``rtol`` and ``dtype_tolerances`` (an explicit ``atol`` leaves the preset's per-dtype
        entries, which are for other dtypes, in place)."""
        preset = TOLERANCE_PRESETS[self.tolerance]
        return Tolerances(
            atol=preset.atol if self.atol is None else self.atol,
            rtol=preset.rtol if self.rtol is None else self.rtol,
            per_dtype={**preset.per_dtype, **self.dtype_tolerances},
        )

    def forks_workers(self) -> bool:
        """Whether workers are forked from the zygote (``worker_start``: for ``"auto"``,
        ``$CUDA_AGENT_WORKER_START`` may choose, else forked)."""
        how: str = self.worker_start
        if how == "auto":  # (the environment may choose: to compare the two ways)
            how = os.environ.get("CUDA_AGENT_WORKER_START", "auto")
        return how != "exec"

    def resolved(self) -> SandboxConfig:
        """The same config with every ``auto`` value decided for this host and the tolerances
        written in (``tolerances()``)."""
        backend = self.backend
        if backend == "auto":
            import torch

            backend = "cuda" if torch.cuda.is_available() else "cpu"
        if backend == "cuda":
            import torch

            if not torch.cuda.is_available():
                raise ValueError("backend='cuda' but torch sees no CUDA GPU; use backend='cpu'")
            visible = torch.cuda.device_count()
            if self.workers > visible and not self.ray_address:
                # (device K's workers see GPU K % visible: two devices' timing gates, one GPU)
                raise ValueError(
                    f"workers={self.workers} devices but torch sees {visible} GPU(s): each "
                    "device is a GPU of its own (timing is alone on its GPU); use lanes_per_gpu "
                    "for more jobs at once on one"
                )
            workers = self.workers or visible
            lanes: int = (
                auto_lanes(os.cpu_count() or 2, _host_memory(), _gpu_memory(), workers)
                if self.lanes_per_gpu == "auto"
                else self.lanes_per_gpu
            )
        else:
            # The host is the one device; its lanes are the old slots.
            lanes = (
                self.workers or max(1, (os.cpu_count() or 2) // 2)
                if self.lanes_per_gpu == "auto"
                else self.lanes_per_gpu
            )
            workers = 1
        threads = self.threads_per_worker or max(
            1, min((os.cpu_count() or 1) // (workers * lanes), _omp_threads())
        )
        compilers = self.compile_workers
        if backend != "cuda":
            compilers = 0  # on the CPU backend compiling is the CPU work
        elif compilers < 0:
            compilers = min(8, (os.cpu_count() or 4) // 4)
        time_compile = (backend == "cuda") if self.time_compile is None else self.time_compile
        memory = self.max_memory_bytes
        if memory is None:
            # CUDA reserves huge virtual ranges, so an address-space cap only works on the CPU.
            memory = 16 << 30 if backend == "cpu" else 0
        tolerances = self.tolerances()
        return replace(
            self,
            backend=backend,
            atol=tolerances.atol,
            rtol=tolerances.rtol,
            dtype_tolerances=tolerances.per_dtype,
            repeats=self.repeats or (100 if backend == "cuda" else 30),
            workers=workers,
            lanes_per_gpu=lanes,
            compile_workers=compilers,
            threads_per_worker=threads,
            time_compile=time_compile,
            max_memory_bytes=memory,
        )


def _omp_threads() -> int:
    """``$OMP_NUM_THREADS`` as a cap on automatic threads (no cap where unset or not a positive
    number). A worker of more threads than the caller allows oversubscribes the cores: on 2
    cores beside one busy process, 2-thread workers judged the built-in suite 10x slower than
    1-thread ones (127 s against 13 s), their parallel regions waiting on a descheduled thread."""
    value = os.environ.get("OMP_NUM_THREADS", "")
    return int(value) if value.isdigit() and int(value) > 0 else 1 << 30


MAX_AUTO_LANES = 8
# Inputs, outputs, caches and two CUDA contexts of a lane. 8 GiB, not 16, since jobs are
# admitted by their memory (``_parent/lanes.py``): on an H100 (80 GB, 2026-12-06) 16 GiB gave
# 4 lanes and 420 evaluations/min on the built-in suite, 8 lanes gave 626 (12: 551, 16: 524;
# ``benchmarks/results/2026-12-06-h100-lanes-scaling/``).
GPU_BYTES_PER_LANE = 8 << 30
HOST_BYTES_PER_LANE = 6 << 30  # two workers' torch, CUDA and candidate processes


def auto_lanes(cpus: int, host_bytes: int, gpu_bytes: int, gpus: int) -> int:
    """Lanes per GPU for ``lanes_per_gpu="auto"``: a core per lane (its candidate and
    reference workers mostly wait, on the GPU and on each other), after the compile workers'
    quarter of the cores; 8 GiB of GPU memory and 6 GiB of host memory per lane; the host's
    share per GPU; at most 8 and at least 1. One H200 host (16 cores, 128 GiB, 139 GiB of GPU
    memory) and one H100 host (16 cores, 128 GiB, 80 GB): 8 lanes."""
    gpus = max(1, gpus)
    by_cpu = (cpus - min(8, cpus // 4)) // gpus
    by_host = host_bytes // (HOST_BYTES_PER_LANE * gpus) if host_bytes else MAX_AUTO_LANES
    by_gpu = gpu_bytes // GPU_BYTES_PER_LANE
    return max(1, min(MAX_AUTO_LANES, by_cpu, by_host, by_gpu))


def _gpu_memory() -> int:
    """Bytes of memory of the smallest visible GPU, from ``nvidia-smi`` (no CUDA context in
    this process); 80 GiB when it cannot be read."""
    import subprocess

    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout
        sizes = [int(line) << 20 for line in out.split() if line.strip().isdigit()]
    except (OSError, ValueError, subprocess.SubprocessError):
        sizes = []
    return min(sizes) if sizes else 80 << 30


def _host_memory() -> int:
    """Bytes of host memory (0 when unknown)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0
