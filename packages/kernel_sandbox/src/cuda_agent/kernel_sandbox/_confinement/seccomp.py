"""A seccomp filter for candidate workers: no signals to other processes, no process tracing.

Installed by each candidate worker on itself before it runs any candidate code (and inherited by
everything it starts). It refuses, with ``EPERM``:

- ``kill`` unless aimed at the worker itself or its own process group (so a candidate cannot
  kill the sandbox's caller, other workers, or every process with ``kill(-1)``); ``tkill``
  unless aimed at the worker's main thread; ``tgkill`` unless within the worker;
  ``pidfd_send_signal`` always;
- ``ptrace``, ``process_vm_readv`` and ``process_vm_writev``: reading or writing another
  process's memory (the reference worker's expected outputs) or taking control of it;
- ``fcntl``'s ``F_SETOWN``, ``F_SETSIG`` and ``F_SETOWN_EX`` and ``ioctl``'s ``FIOSETOWN`` and
  ``SIOCSPGRP``: naming a process to be signalled when a descriptor is ready (with
  ``O_ASYNC``, a signal to any process of the same user without ``kill``).

It needs no privileges (``PR_SET_NO_NEW_PRIVS``). On an architecture it does not know (only
x86-64 and AArch64 are described) or a kernel without seccomp it installs nothing and says so.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct

# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6];
_NR, _ARCH, _ARG0, _ARG1 = 0, 4, 16, 24
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_SYSCALLS = {
    "x86_64": {
        "kill": 62,
        "tkill": 200,
        "tgkill": 234,
        "ptrace": 101,
        "process_vm_readv": 310,
        "process_vm_writev": 311,
        "pidfd_send_signal": 424,
        "fcntl": 72,
        "ioctl": 16,
    },
    "aarch64": {
        "kill": 129,
        "tkill": 130,
        "tgkill": 131,
        "ptrace": 117,
        "process_vm_readv": 270,
        "process_vm_writev": 271,
        "pidfd_send_signal": 424,
        "fcntl": 25,
        "ioctl": 29,
    },
}
# Asking the kernel to signal another process when a descriptor is ready: fcntl's F_SETOWN,
# F_SETSIG and F_SETOWN_EX, ioctl's FIOSETOWN and SIOCSPGRP (with O_ASYNC, SIGIO or the chosen
# signal goes to the owner: a kill by another road).
_FCNTL_OWNER = (8, 10, 15)
_IOCTL_OWNER = (0x8901, 0x8902)
_BPF_LD_W_ABS, _BPF_JEQ_K, _BPF_RET_K = 0x20, 0x15, 0x06
_RET_ALLOW, _RET_EPERM = 0x7FFF0000, 0x00050000 | 1  # SECCOMP_RET_ERRNO | EPERM
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k & 0xFFFFFFFF)


def _program(machine: str, pid: int) -> list[bytes]:
    """The filter, written with labels (``("label", name)``; ``("jeq", k, name)`` jumps to
    ``name`` when the loaded word equals ``k``, else goes on) and assembled below."""
    nr = _SYSCALLS[machine]
    code: list[tuple] = [
        ("load", _ARCH),
        ("jne", _AUDIT_ARCH[machine], "allow"),  # an architecture we do not describe
        ("load", _NR),
        *[("jeq", nr[n], "deny") for n in ("ptrace", "process_vm_readv", "process_vm_writev")],
        ("jeq", nr["pidfd_send_signal"], "deny"),
        *[("jeq", nr[n], "signal") for n in ("kill", "tkill", "tgkill")],
        ("jeq", nr["fcntl"], "fcntl"),
        ("jeq", nr["ioctl"], "ioctl"),
        ("ret", _RET_ALLOW),
        ("label", "signal"),
        ("load", _ARG0),  # pid, tid or tgid (its low 32 bits are the pid_t)
        ("jeq", 0, "allow"),  # its own process group
        ("jeq", -pid, "allow"),  # its own group by id (it leads it)
        ("jeq", pid, "allow"),  # itself
        ("ret", _RET_EPERM),
        ("label", "fcntl"),
        ("load", _ARG1),  # the command
        *[("jeq", cmd, "deny") for cmd in _FCNTL_OWNER],
        ("ret", _RET_ALLOW),
        ("label", "ioctl"),
        ("load", _ARG1),  # the request
        *[("jeq", req, "deny") for req in _IOCTL_OWNER],
        ("ret", _RET_ALLOW),
        ("label", "deny"),
        ("ret", _RET_EPERM),
        ("label", "allow"),
        ("ret", _RET_ALLOW),
    ]
    at: dict[str, int] = {}
    for item in code:
        if item[0] == "label":
            at[item[1]] = sum(1 for i in code[: code.index(item)] if i[0] != "label")
    prog: list[bytes] = []
    for item in code:
        kind = item[0]
        if kind == "label":
            continue
        here = len(prog)
        if kind == "load":
            prog.append(_insn(_BPF_LD_W_ABS, 0, 0, item[1]))
        elif kind == "ret":
            prog.append(_insn(_BPF_RET_K, 0, 0, item[1]))
        else:  # jeq / jne: jumps are relative to the next instruction
            offset = at[item[2]] - here - 1
            jt, jf = (offset, 0) if kind == "jeq" else (0, offset)
            prog.append(_insn(_BPF_JEQ_K, jt, jf, item[1]))
    return prog


def install() -> bool:
    """Install the filter on the calling process (a session leader); whether it worked."""
    machine = platform.machine()
    if machine not in _SYSCALLS or not hasattr(os, "getpid"):
        return False
    pid = os.getpid()
    if os.getpgid(0) != pid:
        return False  # the -pgid rule assumes the worker leads its own process group
    code = b"".join(_program(machine, pid))
    filters = ctypes.create_string_buffer(code, len(code))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = SockFprog(len(code) // 8, ctypes.cast(filters, ctypes.c_void_p))
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return False
        return libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) == 0
    except (OSError, AttributeError):
        return False
