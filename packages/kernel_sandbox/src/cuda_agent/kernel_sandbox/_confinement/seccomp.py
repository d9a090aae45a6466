"""A seccomp filter for candidate workers: no signals to other processes, no process tracing.

Installed by each candidate worker on itself before it runs any candidate code (and inherited by
everything it starts). It refuses, with ``EPERM``:

- ``kill`` unless aimed at the worker itself or its own process group (so a candidate cannot
  kill the sandbox's caller, other workers, or every process with ``kill(-1)``); ``tkill``
  unless aimed at the worker's main thread; ``tgkill`` unless within the worker;
  ``pidfd_send_signal`` always;
- ``ptrace``, ``process_vm_readv`` and ``process_vm_writev``: reading or writing another
  process's memory (the reference worker's expected outputs) or taking control of it.

It needs no privileges (``PR_SET_NO_NEW_PRIVS``). On an architecture it does not know (only
x86-64 and AArch64 are described) or a kernel without seccomp it installs nothing and says so.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct

# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6];
_NR, _ARCH, _ARG0 = 0, 4, 16
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
    },
    "aarch64": {
        "kill": 129,
        "tkill": 130,
        "tgkill": 131,
        "ptrace": 117,
        "process_vm_readv": 270,
        "process_vm_writev": 271,
        "pidfd_send_signal": 424,
    },
}
_BPF_LD_W_ABS, _BPF_JEQ_K, _BPF_RET_K = 0x20, 0x15, 0x06
_RET_ALLOW, _RET_EPERM = 0x7FFF0000, 0x00050000 | 1  # SECCOMP_RET_ERRNO | EPERM
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k & 0xFFFFFFFF)


def _program(machine: str, pid: int) -> list[bytes]:
    nr = _SYSCALLS[machine]
    # Jumps are relative to the next instruction. Layout:
    #    0 load arch;  1 unknown arch -> 10 (allow);  2 load the syscall number
    #    3-6 ptrace, process_vm_readv/writev, pidfd_send_signal -> 15 (deny)
    #    7-9 kill, tkill, tgkill -> 11;  10 allow
    #   11 load the first argument (pid, tid or tgid; its low 32 bits are the pid_t)
    #   12-14 0 (own group), -pid (own group by id), pid (itself) -> 16 (allow);  15 deny
    deny, allow_end = 15, 16
    prog = [
        _insn(_BPF_LD_W_ABS, 0, 0, _ARCH),  # 0
        _insn(_BPF_JEQ_K, 0, 10 - 2, _AUDIT_ARCH[machine]),  # 1: else -> 10 (allow)
        _insn(_BPF_LD_W_ABS, 0, 0, _NR),  # 2
    ]
    for i, name in enumerate(("ptrace", "process_vm_readv", "process_vm_writev")):
        at = 3 + i
        prog.append(_insn(_BPF_JEQ_K, deny - at - 1, 0, nr[name]))
    prog.append(_insn(_BPF_JEQ_K, deny - 6 - 1, 0, nr["pidfd_send_signal"]))  # 6
    prog.append(_insn(_BPF_JEQ_K, 11 - 7 - 1, 0, nr["kill"]))  # 7 -> 11
    prog.append(_insn(_BPF_JEQ_K, 11 - 8 - 1, 0, nr["tkill"]))  # 8 -> 11
    prog.append(_insn(_BPF_JEQ_K, 11 - 9 - 1, 0, nr["tgkill"]))  # 9 -> 11
    prog.append(_insn(_BPF_RET_K, 0, 0, _RET_ALLOW))  # 10
    prog.append(_insn(_BPF_LD_W_ABS, 0, 0, _ARG0))  # 11: pid / tid / tgid (low 32 bits)
    prog.append(_insn(_BPF_JEQ_K, allow_end - 12 - 1, 0, 0))  # 12: own process group
    prog.append(_insn(_BPF_JEQ_K, allow_end - 13 - 1, 0, -pid))  # 13: -pgid (leader = pid)
    prog.append(_insn(_BPF_JEQ_K, allow_end - 14 - 1, 0, pid))  # 14: itself
    prog.append(_insn(_BPF_RET_K, 0, 0, _RET_EPERM))  # 15 deny
    prog.append(_insn(_BPF_RET_K, 0, 0, _RET_ALLOW))  # 16 allow
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
