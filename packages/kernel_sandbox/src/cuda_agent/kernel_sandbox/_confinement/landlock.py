"""Landlock for candidate workers: they may write only under their own directory and the
shared compile caches.

Landlock is Linux's unprivileged file-system sandbox (kernel 5.13+). A candidate worker, before
running any candidate code, restricts itself (and everything it starts) so that creating,
writing, truncating, renaming or removing files is allowed only beneath the given directories
(its private home, the shared caches, ``/dev`` for device nodes); reading stays allowed, since
Python, torch and the CUDA libraries must be read. Where the kernel has no Landlock, nothing is
restricted and ``restrict_writes`` says so.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterable

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # same on x86-64 and AArch64
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_WRITE_FILE = 1 << 1
_REMOVE_DIR, _REMOVE_FILE = 1 << 4, 1 << 5
_MAKE = (1 << 6) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12)
_REFER, _TRUNCATE = 1 << 13, 1 << 14  # ABI 2 and 3


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def abi_version() -> int:
    """The kernel's Landlock ABI version, 0 when it has none."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        version = libc.syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION)
    except (OSError, AttributeError):
        return 0
    return max(0, int(version))


def restrict_writes(writable: Iterable[str]) -> bool:
    """Allow file-system writes only beneath ``writable`` from now on; whether it worked."""
    abi = abi_version()
    if abi < 1:
        return False
    access = _WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE
    if abi >= 2:
        access |= _REFER
    if abi >= 3:
        access |= _TRUNCATE
    libc = ctypes.CDLL(None, use_errno=True)
    attr = _RulesetAttr(access)
    ruleset = libc.syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.sizeof(attr), 0)
    if ruleset < 0:
        return False
    try:
        for path in writable:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                rule = _PathBeneathAttr(access, fd)
                if libc.syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0):
                    return False
            finally:
                os.close(fd)
        if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS, required by Landlock
            return False
        return libc.syscall(_RESTRICT_SELF, ruleset, 0) == 0
    finally:
        os.close(ruleset)
