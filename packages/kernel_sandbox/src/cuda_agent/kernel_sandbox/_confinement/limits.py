"""A worker's limits (set by ``_worker.main`` before any job): no core files, a cap on the
files it writes and the descriptors it opens, its address space (candidate workers), and a
network namespace of its own."""

from __future__ import annotations

import ctypes
import os
import resource


def limit_resources(max_output_bytes: int) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (max_output_bytes, max_output_bytes))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    cap = 4096 if hard == resource.RLIM_INFINITY else min(4096, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, cap), cap))


def limit_memory(max_memory_bytes: int) -> None:
    """Cap the address space at what is mapped now (torch and its libraries, which in CUDA
    builds reserve many GB of virtual space) plus ``max_memory_bytes``: a runaway host
    allocation by the candidate fails instead of taking the machine down."""
    if max_memory_bytes <= 0:
        return
    mapped = 0
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                mapped = int(line.split()[1]) * 1024
    limit = mapped + max_memory_bytes
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def isolate_network() -> bool:
    """Move this process into a fresh network namespace (no interfaces but a down loopback),
    so candidate code cannot reach any network. Needs root or user namespaces; returns
    whether it worked (the sandbox runs on either way, and reports it)."""
    clone_newnet = 0x40000000
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.unshare(clone_newnet) == 0
    except (OSError, AttributeError):
        return False


def die_with_parent(parent_pid: int) -> None:
    """Have the kernel SIGKILL this process when the thread that started it ends (the
    parent's spawner thread, which lives as long as the parent: ``_parent.spawn``), and exit
    now if that parent is already gone. A worker busy with a candidate that never returns would
    otherwise outlive a parent killed with SIGKILL, spinning on alone."""
    pr_set_pdeathsig = 1
    try:
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, 9, 0, 0, 0)  # 9: SIGKILL
    except (OSError, AttributeError):
        return  # not Linux: the parent's close still ends its workers
    if os.getppid() != parent_pid:
        os._exit(1)
