"""A trained LoRA adapter at half its size, to bring back from the device and evaluate here: a
run's adapter (``Policy.save``: fp32, about 19 MB for our rank-16 SmolLM2 one) as a tar.xz of
its configs and its weights cast to float16, about 8.8 MB. For evaluating the trained adapter
elsewhere, not for resuming training: the rounding is lost, and the optimizer's state, the
critic and the run's state are not in it.

    python benchmarks/gpu/adapter16.py pack ADAPTER_DIR DEST.txz [--split N]
    python benchmarks/gpu/adapter16.py unpack SRC DEST_DIR

``pack`` writes DEST.txz (adapter_config.json, policy_config.json and answer_budget.json when
present, and
adapter_model.safetensors in float16); with ``--split N`` it is cut into DEST.txz.0, .1, ...
of near-equal size instead, to travel beside the model's halves in separate calls (a call
carries at most 64 MiB). ``unpack`` lays the adapter out in DEST_DIR (which must not exist),
its weights cast back to float32, so that it loads as one ``Policy.save`` wrote (the tokenizer
is the base model's); SRC is the archive, or its first part SRC.0 with the others beside it.
A refused archive (torn, a part missing, not an adapter) exits 1 and lays out nothing.
"""

from __future__ import annotations

import argparse
import glob
import io
import json
import lzma
import os
import re
import shutil
import sys
import tarfile
import time
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load, save

WEIGHTS = "adapter_model.safetensors"
# the others when present (answer_budget.json: the budget the run wrote answers within)
CONFIGS = ("adapter_config.json", "policy_config.json", "answer_budget.json")
NEEDED = ("adapter_config.json", WEIGHTS)


def _cast(tensors: dict[str, torch.Tensor], dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """Every floating tensor as ``dtype``, the others as they are."""
    return {k: v.to(dtype) if v.is_floating_point() else v for k, v in tensors.items()}


def _recast(weights: bytes, dtype: torch.dtype) -> bytes:
    """A safetensors file's bytes with every floating tensor as ``dtype``, its metadata (peft
    writes ``{"format": "pt"}``) kept."""
    header = json.loads(weights[8 : 8 + int.from_bytes(weights[:8], "little")])
    return save(_cast(load(weights), dtype), metadata=header.get("__metadata__"))


def pack(adapter_dir: Path, dest_file: Path) -> Path:
    """``adapter_dir`` (written by ``Policy.save``) as the tar.xz ``dest_file``, its weights in
    float16; written beside it first, so that a killed pack leaves no torn archive. ValueError
    when it is not an adapter, its weights are unreadable or one is beyond float16 (it would
    come back inf)."""
    missing = [name for name in NEEDED if not (adapter_dir / name).is_file()]
    if missing:
        raise ValueError(f"{adapter_dir}: not an adapter (no {', '.join(missing)})")
    try:
        weights = _recast((adapter_dir / WEIGHTS).read_bytes(), torch.float16)
    except (SafetensorError, ValueError) as error:  # (an adapter cut short by a kill, say)
        raise ValueError(f"{adapter_dir}: unreadable weights ({error})") from error
    if not all(v.isfinite().all() for v in load(weights).values() if v.is_floating_point()):
        raise ValueError(f"{adapter_dir}: a weight is beyond float16's range")
    dest_file.parent.mkdir(parents=True, exist_ok=True)
    partial = dest_file.with_name(f".{dest_file.name}.partial")
    # preset 1: float16 weights hardly compress further (preset 6: 1% smaller, 3 times slower)
    with tarfile.open(partial, "w:xz", preset=1) as tar:
        for name in CONFIGS:
            if (adapter_dir / name).is_file():
                tar.add(adapter_dir / name, arcname=name)
        info = tarfile.TarInfo(WEIGHTS)
        info.size, info.mtime = len(weights), int(time.time())
        tar.addfile(info, io.BytesIO(weights))
    os.replace(partial, dest_file)
    return dest_file


def _parts(file: Path) -> list[Path]:
    """The FILE.<n> beside ``file``, by n."""
    found: dict[int, Path] = {}
    for path in file.parent.glob(f"{glob.escape(file.name)}.*"):
        if match := re.fullmatch(re.escape(file.name) + r"\.(\d+)", path.name):
            found[int(match.group(1))] = path
    return [found[n] for n in sorted(found)]


def split(file: Path, parts: int) -> list[Path]:
    """``file`` cut into ``parts`` files FILE.0, FILE.1, ... of near-equal size (their bytes in
    order are the file's), which replace it. FILE.<n> left by an earlier split go first, so
    that ``unpack`` joins only these."""
    if parts < 1:
        raise ValueError(f"split into {parts} parts: give at least 1")
    for old in _parts(file):
        old.unlink()
    data = file.read_bytes()
    cuts = [len(data) * i // parts for i in range(parts + 1)]
    written = [file.with_name(f"{file.name}.{i}") for i in range(parts)]
    for i, part in enumerate(written):
        part.write_bytes(data[cuts[i] : cuts[i + 1]])
    file.unlink()
    return written


def _archive_bytes(src: Path) -> bytes:
    """The archive: ``src`` itself, or, when ``src`` is FILE.0 (or FILE is missing), FILE.0,
    FILE.1, ... joined in order. ValueError for no archive or a gap in the parts (a missing
    last part shows as a torn archive when it is read)."""
    if src.is_file() and not src.name.endswith(".0"):
        return src.read_bytes()
    base = src.with_suffix("") if src.name.endswith(".0") else src
    parts = _parts(base)
    if not parts:
        raise ValueError(f"{src}: no such archive (nor {base.name}.0, .1, ... beside it)")
    for i, part in enumerate(parts):
        if part.name != f"{base.name}.{i}":
            raise ValueError(f"{base}.{i}: part {i} of the archive is missing")
    return b"".join(part.read_bytes() for part in parts)


def unpack(src_file: Path, dest_dir: Path) -> Path:
    """The adapter in ``src_file`` (``pack``'s archive, or its first part FILE.0) laid out in
    ``dest_dir``, its weights back in float32, as ``Policy.save`` writes them. ValueError when
    ``dest_dir`` exists, or the archive is missing, torn, short of a part or not an adapter's;
    nothing is left half laid out (it is written beside ``dest_dir``, then renamed)."""
    if dest_dir.exists():
        raise ValueError(f"{dest_dir} exists already: unpack only into a new directory")
    files: dict[str, bytes] = {}
    try:
        raw = lzma.decompress(_archive_bytes(src_file))  # the whole stream: a cut one fails
        with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
            names = set(tar.getnames())
            for name in (*CONFIGS, WEIGHTS):  # these names only: nothing else is extracted
                reader = tar.extractfile(name) if name in names else None
                if reader is not None:
                    files[name] = reader.read()
        missing = [name for name in NEEDED if name not in files]
        if missing:
            raise ValueError(f"{src_file}: not an adapter's archive (no {', '.join(missing)})")
        weights = _recast(files[WEIGHTS], torch.float32)
    except (lzma.LZMAError, EOFError, tarfile.TarError, SafetensorError) as error:
        raise ValueError(
            f"{src_file}: the archive is torn or a part is missing ({error})"
        ) from error
    partial = dest_dir.with_name(f".{dest_dir.name}.unpacking")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        for name in CONFIGS:
            if name in files:
                (partial / name).write_bytes(files[name])
        (partial / WEIGHTS).write_bytes(weights)
        os.replace(partial, dest_dir)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return dest_dir


def latest_adapter(run_dir: Path) -> Path | None:
    """The run's newest whole adapter: its final ``adapter/`` once the run has finished, else
    its newest checkpoint's (the highest N of ``checkpoints/<stage>-<N>/adapter``; the trainer
    keeps one checkpoint, the committed one, but a kill can leave another); None when it has
    none. Half-written ones (a dot directory, or no weights) are passed over."""

    def whole(adapter: Path) -> bool:
        return all((adapter / name).is_file() for name in NEEDED)

    if whole(run_dir / "adapter"):
        return run_dir / "adapter"
    steps: dict[int, Path] = {}
    for path in (run_dir / "checkpoints").glob("*/adapter"):
        match = re.fullmatch(r"[^.].*-(\d+)", path.parent.name)
        if match and whole(path):
            steps[int(match.group(1))] = path
    return steps[max(steps)] if steps else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    packing = commands.add_parser("pack", help="an adapter directory into a .txz")
    packing.add_argument("adapter", type=Path)
    packing.add_argument("dest", type=Path)
    packing.add_argument("--split", type=int, help="into DEST.0, DEST.1, ... of near-equal size")
    unpacking = commands.add_parser("unpack", help="a .txz (or its first part, .0) into DEST_DIR")
    unpacking.add_argument("src", type=Path)
    unpacking.add_argument("dest", type=Path)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        if args.command == "unpack":
            print(f"adapter16: {unpack(args.src, args.dest)} laid out")
            return 0
        written = [pack(args.adapter, args.dest)]
        if args.split is not None:
            written = split(args.dest, args.split)
    except ValueError as error:
        print(f"adapter16: {error}")
        return 1
    print("adapter16: " + ", ".join(f"{p} ({p.stat().st_size / 1e6:.1f} MB)" for p in written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
