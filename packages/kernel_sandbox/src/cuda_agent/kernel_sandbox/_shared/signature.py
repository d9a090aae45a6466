"""Read a kernel's parameter list from its C/CUDA source, so arguments are marshalled exactly.

A launcher that guesses argument widths from Python values is a classic source of silent
corruption (a Python ``int`` passed where the kernel reads ``int32``). We parse the declared
signature instead and convert every argument to the declared C type.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import CandidateError

# C scalar spellings -> (struct-like code used by the launchers, size in bytes).
_SCALARS: dict[str, str] = {
    "bool": "bool",
    "char": "int8",
    "signed char": "int8",
    "unsigned char": "uint8",
    "int8_t": "int8",
    "uint8_t": "uint8",
    "short": "int16",
    "int16_t": "int16",
    "unsigned short": "uint16",
    "uint16_t": "uint16",
    "int": "int32",
    "signed": "int32",
    "int32_t": "int32",
    "unsigned": "uint32",
    "unsigned int": "uint32",
    "uint32_t": "uint32",
    "long": "int64",
    "long int": "int64",
    "long long": "int64",
    "long long int": "int64",
    "int64_t": "int64",
    "ssize_t": "int64",
    "ptrdiff_t": "int64",
    "unsigned long": "uint64",
    "unsigned long long": "uint64",
    "uint64_t": "uint64",
    "size_t": "uint64",
    "float": "float32",
    "double": "float64",
}
_QUALIFIERS = re.compile(r"\b(const|volatile|restrict|__restrict__|__restrict|struct)\b")


@dataclass(frozen=True)
class Param:
    """One kernel parameter: ``kind`` is ``"pointer"`` or a scalar code such as ``"int32"``."""

    name: str
    kind: str
    c_type: str
    element: str = ""  # pointers: the pointee's scalar code ("float32"), "" when unknown/void


def parse_signature(source: str, name: str) -> tuple[Param, ...]:
    """Return the parameters of function ``name`` as declared in ``source``.

    Raises ``CandidateError`` naming the problem when the function is missing or a parameter
    type is not a pointer or a supported scalar.
    """
    code = _strip_comments(source)
    match = re.search(r"\b" + re.escape(name) + r"\s*\(([^)]*)\)\s*\{", code)
    if match is None:
        raise CandidateError(
            f"kernel function {name!r} is not defined in the source "
            f"(expected a definition like `void {name}(float* out, const float* x, long n) {{...}}`)"
        )
    params: list[Param] = []
    raw = match.group(1).strip()
    if raw in ("", "void"):
        return ()
    for i, part in enumerate(raw.split(",")):
        part = _QUALIFIERS.sub(" ", part).strip()
        part = re.sub(r"\[\s*\]$", "*", part)  # `float x[]` is a pointer
        is_pointer = "*" in part or "&" in part
        words = part.replace("*", " ").replace("&", " ").split()
        if not words:
            raise CandidateError(f"cannot read parameter {i} of {name!r}: {part!r}")
        pname = words[-1] if len(words) > 1 else f"arg{i}"
        ctype = " ".join(words[:-1]) if len(words) > 1 else words[0]
        if is_pointer:
            # Remember the element type so the launcher can refuse a tensor of another dtype.
            params.append(Param(pname, "pointer", ctype + "*", _SCALARS.get(ctype, "")))
            continue
        kind = _SCALARS.get(ctype)
        if kind is None:
            raise CandidateError(
                f"parameter {pname!r} of {name!r} has unsupported type {ctype!r}; "
                "use pointers for tensors and int/long/float/double scalars"
            )
        params.append(Param(pname, kind, ctype))
    return tuple(params)


def _strip_comments(source: str) -> str:
    source = re.sub(r"/\*.*?\*/", " ", source, flags=re.S)
    return re.sub(r"//[^\n]*", " ", source)
