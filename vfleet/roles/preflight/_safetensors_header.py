"""Safetensors headers, read and checked: the weight bytes of a checkpoint without its tensors.

The format (huggingface/safetensors, safetensors/src/tensor.rs): 8 bytes, a little-endian u64 N;
N bytes of UTF-8 JSON, an object of {tensor name: {"dtype", "shape", "data_offsets": [begin,
end]}} plus an optional "__metadata__" map of strings; then the tensor bytes. The reference
reader refuses N > MAX_HEADER_SIZE = 100_000_000 ("header too large") and a header whose
offsets do not cover the data exactly (MetadataIncompleteBuffer), so neither is a file vLLM
could load: here they are one-line errors naming the file and the tensor, as are a header that
is not JSON or not an object, an unknown dtype, a shape that is not a list of non-negative
integers, and tensor bytes that the file is too small to hold. That last rule is what bounds the
figure: a header cannot claim more weight bytes than the file has.
"""

from __future__ import annotations

import os
import shlex
import stat
import struct
from pathlib import Path
from typing import Any, Iterator, Mapping

from vfleet.engine.strict_json import JsonFileError, loads_strict, mapping, type_name

from ._model_files import MAX_WEIGHT_BYTES

__all__ = [
    "DTYPE_BYTES",
    "MAX_HEADER_SIZE",
    "MAX_FILES",
    "header_tensor_bytes",
    "read_header",
    "read_shapes",
    "file_weight_bytes",
    "folder_files",
    "probe_command",
    "parse_probe",
    "check_weights_fact",
]

MAX_HEADER_SIZE = 100_000_000
MAX_FILES = 10_000  # shards in one folder (the largest checkpoints have a few hundred)
MAX_DIMS = 16
# All headers of a folder, as the host's probe sends them back: real checkpoints stay under ~20 MB
# (a header lists its tensors' names and shapes), the gather's output must stay small.
MAX_TOTAL_HEADERS = 256 * 2**20
# Element sizes of the format's dtypes (safetensors Dtype::bitsize, in bytes).
DTYPE_BYTES = {
    "F64": 8,
    "F32": 4,
    "F16": 2,
    "BF16": 2,
    "I64": 8,
    "I32": 4,
    "I16": 2,
    "I8": 1,
    "U8": 1,
    "U16": 2,
    "U32": 4,
    "U64": 8,
    "BOOL": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "F8_E8M0": 1,
    "F4": 0.5,
    "F6_E2M3": 0.75,
    "F6_E3M2": 0.75,
}
FIX = "the checkpoint is damaged or not safetensors: download it again"


def _tensors(header: Mapping[str, Any], label: str) -> Iterator[tuple[str, str, int]]:
    """(name, dtype, numel) of every tensor, each entry checked."""
    for name, t in header.items():
        if name == "__metadata__":
            continue
        shown = name if len(name) <= 80 and name.isprintable() else name[:80].encode("unicode_escape").decode()
        if not isinstance(t, Mapping):
            raise JsonFileError(f"{label}: tensor '{shown}': expected an object, got {type_name(t)}; {FIX}")
        dtype, shape = t.get("dtype"), t.get("shape")
        if not isinstance(dtype, str) or dtype not in DTYPE_BYTES:
            what = repr(dtype[:20]) if isinstance(dtype, str) else type_name(dtype)
            raise JsonFileError(
                f"{label}: tensor '{shown}': unknown dtype {what} (known: {', '.join(DTYPE_BYTES)}); {FIX}"
            )
        if (
            not isinstance(shape, list)
            or len(shape) > MAX_DIMS
            or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)
        ):
            raise JsonFileError(
                f"{label}: tensor '{shown}': shape must be a list of at most {MAX_DIMS} non-negative integers; {FIX}"
            )
        numel = 1
        for d in shape:
            numel *= d
        yield shown, dtype, numel


def header_tensor_bytes(header: Any, label: str, data_bytes: int | None = None) -> dict[str, int]:
    """{dtype: bytes} over the tensors of one header (numel x element size), checked; with
    `data_bytes` (the file's size less its header), their sum may not exceed it."""
    h = mapping(header, label)
    meta = h.get("__metadata__")
    if meta is not None and not (isinstance(meta, Mapping) and all(isinstance(v, str) for v in meta.values())):
        raise JsonFileError(f"{label}: key '__metadata__': expected a map of strings; {FIX}")
    out: dict[str, float] = {}
    for _, dtype, numel in _tensors(h, label):
        out[dtype] = out.get(dtype, 0) + numel * DTYPE_BYTES[dtype]
        if data_bytes is not None and sum(out.values()) > data_bytes:
            raise JsonFileError(
                f"{label}: the header's tensors need more bytes than the file's {data_bytes} after the header; {FIX}"
            )
    return {k: int(v) for k, v in out.items()}


def parse_header(raw: bytes | str, label: str, data_bytes: int | None = None) -> dict[str, int]:
    """`header_tensor_bytes` of the header's JSON text."""
    return header_tensor_bytes(loads_strict(raw, label), label, data_bytes)


def read_header(path: str | Path) -> dict[str, int]:
    """{dtype: bytes} of one .safetensors file, reading only its length field and its header (a
    FIFO, a folder or a device is refused before anything is read)."""
    raw, data_bytes = _raw_header(path)
    return parse_header(raw, str(path), data_bytes)


def read_shapes(path: str | Path) -> dict[str, list[int]]:
    """{tensor name: shape} of one .safetensors file (its header only, checked as read_header
    checks it): what a LoRA adapter's fit to its base model is read from."""
    raw, data_bytes = _raw_header(path)
    label = str(path)
    header = mapping(loads_strict(raw, label), label)
    header_tensor_bytes(header, label, data_bytes)
    return {name: list(t["shape"]) for name, t in header.items() if name != "__metadata__"}


def _raw_header(path: str | Path) -> tuple[bytes, int]:
    """(the header's JSON bytes, the bytes after it) of one .safetensors file."""
    label = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise JsonFileError(f"{label}: cannot open ({exc.strerror or type(exc).__name__})") from None
    with os.fdopen(fd, "rb") as fh:
        size = os.fstat(fd).st_size
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise JsonFileError(f"{label}: not a regular file; {FIX}")
        head = fh.read(8)
        if len(head) < 8:
            raise JsonFileError(f"{label}: shorter than the 8-byte header length; {FIX}")
        (n,) = struct.unpack("<Q", head)
        if n > MAX_HEADER_SIZE:
            raise JsonFileError(f"{label}: header length {n} exceeds the format's {MAX_HEADER_SIZE} bytes; {FIX}")
        if 8 + n > size:
            raise JsonFileError(f"{label}: header length {n} runs past the end of the {size}-byte file; {FIX}")
        raw = fh.read(n)
    return raw, size - 8 - n


def folder_files(folder: Path) -> list[Path]:
    """The folder's *.safetensors regular files, sorted; more than MAX_FILES is refused."""
    found = []
    for p in folder.glob("*.safetensors"):
        found.append(p)
        if len(found) > MAX_FILES:
            raise JsonFileError(f"{folder}: more than {MAX_FILES} .safetensors files; is this a model folder?")
    return sorted(p for p in found if p.is_file())


def file_weight_bytes(path: str | Path) -> int | None:
    """Tensor bytes of a .safetensors file, or of every one in a folder; None when none is there."""
    p = Path(path)
    files = folder_files(p) if p.is_dir() else [p]
    files = [f for f in files if f.is_file()]
    if not files:
        return None
    return sum(sum(read_header(f).values()) for f in files)


# --- the same, on a host: a shell probe and its output ----------------------------------------


def probe_command(model_dir: str) -> str:
    """Per .safetensors file (at most MAX_FILES) a line '@@ST <size> <header length> <name>' and
    the header on the next line (newlines taken out: raw ones are not allowed inside JSON strings,
    so the JSON means the same), or an empty line when the length field is out of the format's
    range; never the tensor data. `od -t u8` reads the length in host byte order: little-endian on
    x86_64 and aarch64, as the format is. `[ -f ]` passes regular files only (no FIFO, no device)."""
    d = shlex.quote(model_dir)
    return (
        f"i=0\nt=0\nfor f in {d}/*.safetensors; do\n"
        '  [ -f "$f" ] || continue\n'
        f"  i=$((i+1)); [ \"$i\" -le {MAX_FILES} ] || {{ echo '@@ST-TOO-MANY'; break; }}\n"
        "  n=$(od -An -t u8 -N8 \"$f\" | tr -d ' \\n')\n"
        "  s=$(wc -c <\"$f\" | tr -d ' ')\n"
        '  printf \'@@ST %s %s %s\\n\' "$s" "${n:-none}" "$(printf \'%s\' "${f##*/}" | tr -d \'\\r\\n\')"\n'
        f'  if [ "$n" -gt 0 ] 2>/dev/null && [ "$n" -le {MAX_HEADER_SIZE} ] && [ "$((n + 8))" -le "$s" ]; then\n'
        f"    t=$((t + n)); [ \"$t\" -le {MAX_TOTAL_HEADERS} ] || {{ printf '\\n@@ST-TOO-MUCH\\n'; break; }}\n"
        '    tail -c +9 "$f" | head -c "$n" | tr -d \'\\r\\n\'\n'
        "  fi\n"
        "  printf '\\n'\n"
        "done"
    )


def _count(text: str) -> int | None:
    return int(text) if text.isdigit() and len(text) <= 20 else None


def parse_probe(output: str, model_dir: str) -> dict[str, Any] | None:
    """The probe's output -> {files: n, bytes: total tensor bytes, dtypes: {dtype: bytes}}; None
    when the folder has no .safetensors file. A damaged header is a one-line error naming the
    file, as it is for a local folder (read_header)."""
    files, dtypes = 0, {}
    lines = (output or "").split("\n")
    if "@@ST-TOO-MANY" in lines:
        raise JsonFileError(f"{model_dir}: more than {MAX_FILES} .safetensors files; is this a model folder?")
    if "@@ST-TOO-MUCH" in lines:
        raise JsonFileError(
            f"{model_dir}: the .safetensors headers add up to more than {MAX_TOTAL_HEADERS} bytes; {FIX}"
        )
    for i, ln in enumerate(lines):
        if not ln.startswith("@@ST "):
            continue
        fields = ln.split(" ", 3)
        name = fields[3] if len(fields) == 4 else "?"
        label = f"{model_dir.rstrip('/')}/{name if name.isprintable() else name.encode('unicode_escape').decode()}"
        size, n = (_count(fields[1]), _count(fields[2])) if len(fields) == 4 else (None, None)
        if size is None:
            raise JsonFileError(f"{label}: size unreadable on the host; {FIX}")
        if n is None or n > MAX_HEADER_SIZE or n + 8 > size:
            raise JsonFileError(
                f"{label}: header length {fields[2][:24] if len(fields) > 2 else '?'} is not within "
                f"the file's {size} bytes and the format's {MAX_HEADER_SIZE}; {FIX}"
            )
        body = lines[i + 1] if i + 1 < len(lines) else ""
        for dtype, b in parse_header(body, label, size - 8 - n).items():
            dtypes[dtype] = dtypes.get(dtype, 0) + b
        files += 1
    return {"files": files, "bytes": sum(dtypes.values()), "dtypes": dtypes} if files else None


def check_weights_fact(weights: Any, label: str) -> dict[str, Any] | None:
    """The weights fact as a snapshot's facts.json holds it ({files, bytes, dtypes}), checked:
    every count a non-negative integer of at most MAX_WEIGHT_BYTES."""
    if weights is None:
        return None
    w = mapping(weights, label)
    dtypes = w.get("dtypes")
    ok_int = lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_WEIGHT_BYTES  # noqa: E731
    if not (
        ok_int(w.get("files"))
        and 0 < w["files"] <= MAX_FILES
        and ok_int(w.get("bytes"))
        and isinstance(dtypes, Mapping)
        and all(k in DTYPE_BYTES and ok_int(v) for k, v in dtypes.items())
    ):
        raise JsonFileError(
            f"{label}: key 'weights': expected {{files, bytes, dtypes}} with non-negative "
            f"counts; capture the snapshot again"
        )
    return {"files": w["files"], "bytes": w["bytes"], "dtypes": dict(dtypes)}
