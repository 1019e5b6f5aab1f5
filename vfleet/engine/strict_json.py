"""JSON files that someone else wrote, read defensively: a bounded read, strict parsing, and typed
getters whose errors are one line naming the file and the key.

Why: a model folder (config.json, tokenizer_config.json, a safetensors header, the shard index)
comes from whoever published the checkpoint. Python's json module accepts NaN and Infinity
(not JSON: RFC 8259 section 6 has no such numbers), turns 1e400 into inf, guesses UTF-16 from
bytes, and recurses until RecursionError on "[[[[..."; and `open(path).read()` blocks forever on
a FIFO and swallows a file of any size. Here each of those is a `JsonFileError` (a VfleetError:
the CLI prints it as one line and exits 2) that says which file, which key, what was expected
and what was found, never the value itself beyond its type.

Encoding: RFC 8259 section 8.1 says JSON exchanged between systems MUST be UTF-8 and that a
parser MAY ignore a byte order mark: a UTF-8 BOM is skipped, anything else that is not UTF-8
(UTF-16, Latin-1 bytes) is refused.
"""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path
from typing import Any, Mapping

from vfleet.engine.errors import VfleetError

__all__ = [
    "JsonFileError",
    "read_bounded",
    "loads_strict",
    "read_json",
    "mapping",
    "positive_int",
    "nonneg_int",
    "positive_number",
    "boolean",
    "short_str",
    "type_name",
    "MIB",
]

MIB = 1024**2
_BOM = "\ufeff"
SHORT_STR_LEN = 256


class JsonFileError(VfleetError, ValueError):
    """A file that is not the JSON it should be. Also a ValueError, so callers that already
    turn a ValueError into "cannot read X" keep working."""


def type_name(value: Any) -> str:
    """What a value is, in JSON's words, for an error message (never the value: it may be huge
    or carry control characters)."""
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__


def read_bounded(path: str | Path, limit: int, what: str | None = None) -> bytes:
    """At most `limit` bytes of a regular file. A FIFO, a directory or a device is refused
    before anything is read (opened non-blocking, then fstat'ed: no race with a swap), and a
    longer file is refused rather than cut."""
    label = what or str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except IsADirectoryError:
        raise JsonFileError(f"{label}: is a directory, expected a file") from None
    except OSError as exc:
        raise JsonFileError(f"{label}: cannot open ({exc.strerror or type(exc).__name__})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file (FIFO, device or socket)"
            raise JsonFileError(f"{label}: is {kind}, expected a file")
        if st.st_size > limit:
            raise JsonFileError(
                f"{label}: {st.st_size} bytes, more than the {limit // MIB} MiB such a file can be; fix the file"
            )
        chunks, got = [], 0
        while got <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        if got > limit:  # grew while read
            raise JsonFileError(f"{label}: more than the {limit // MIB} MiB such a file can be; fix the file")
        return b"".join(chunks)
    except OSError as exc:
        raise JsonFileError(f"{label}: cannot read ({exc.strerror or type(exc).__name__})") from None
    finally:
        os.close(fd)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    v = float(text)
    if not math.isfinite(v):
        raise ValueError(f"number {text[:20]} is too large")
    return v


def _text(data: bytes | str, label: str) -> str:
    if isinstance(data, bytes):
        if data[:2] in (b"\xff\xfe", b"\xfe\xff") or (len(data) > 1 and b"\x00" in data[:4]):
            raise JsonFileError(
                f"{label}: UTF-16 or UTF-32 text; JSON files must be UTF-8 (RFC 8259 8.1): convert the file"
            )
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JsonFileError(
                f"{label}: not UTF-8 (byte {exc.start}); JSON files must be UTF-8: fix the file"
            ) from None
    return data[1:] if data.startswith(_BOM) else data


def loads_strict(data: bytes | str, label: str) -> Any:
    """JSON from bytes or text: UTF-8 only (a leading BOM ignored), no NaN/Infinity, no number
    that overflows a float, no nesting deep enough to exhaust the parser."""
    text = _text(data, label)
    try:
        return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except RecursionError:
        raise JsonFileError(f"{label}: JSON nested too deep to read; fix the file") from None
    except ValueError as exc:  # JSONDecodeError, NaN, too many digits for an int
        msg = " ".join(str(exc).split())[:160]
        raise JsonFileError(f"{label}: not valid JSON ({msg}); fix the file") from None


def read_json(path: str | Path, limit: int, what: str | None = None) -> Any:
    """`read_bounded` then `loads_strict`."""
    label = what or str(path)
    return loads_strict(read_bounded(path, limit, label), label)


def mapping(value: Any, label: str, key: str | None = None) -> Mapping[str, Any]:
    """The value as a JSON object, or a one-line error naming where it was expected."""
    if not isinstance(value, Mapping):
        where = f"key '{key}'" if key else "the file"
        raise JsonFileError(f"{label}: {where}: expected a JSON object, got {type_name(value)}; fix the file")
    return value


def _bad(label: str, key: str, expected: str, value: Any, fix: str) -> JsonFileError:
    got = type_name(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        got = f"{value}" if abs(value) < 10**18 else ("a huge number" if value > 0 else "a huge negative number")
    return JsonFileError(f"{label}: key '{key}': expected {expected}, got {got}; {fix}")


def positive_int(
    obj: Mapping[str, Any], key: str, label: str, upper: int, *, required: bool = True, fix: str = "fix the file"
) -> int | None:
    """obj[key] as an integer in 1..upper (a bool is not an integer, nor is 4.0). None when the
    key is absent or null and not required."""
    value = obj.get(key)
    if value is None:
        if required:
            raise JsonFileError(f"{label}: key '{key}' is missing; {fix}")
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= upper:
        raise _bad(label, key, f"a positive integer <= {upper}", value, fix)
    return value


def nonneg_int(
    obj: Mapping[str, Any], key: str, label: str, upper: int, *, required: bool = False, fix: str = "fix the file"
) -> int | None:
    """obj[key] as an integer in 0..upper; None when absent or null and not required."""
    value = obj.get(key)
    if value is None:
        if required:
            raise JsonFileError(f"{label}: key '{key}' is missing; {fix}")
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= upper:
        raise _bad(label, key, f"an integer from 0 to {upper}", value, fix)
    return value


def positive_number(
    obj: Mapping[str, Any], key: str, label: str, upper: float, *, fix: str = "fix the file"
) -> float | None:
    """obj[key] as a finite number in (0, upper]; None when absent or null."""
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= upper:
        raise _bad(label, key, f"a positive number <= {upper:g}", value, fix)
    return float(value)


def boolean(obj: Mapping[str, Any], key: str, label: str, *, fix: str = "fix the file") -> bool | None:
    """obj[key] as true/false (the string "false" is not false); None when absent or null."""
    value = obj.get(key)
    if value is None or isinstance(value, bool):
        return value
    raise _bad(label, key, "true or false", value, fix)


def short_str(
    obj: Mapping[str, Any], key: str, label: str, *, limit: int = SHORT_STR_LEN, fix: str = "fix the file"
) -> str | None:
    """obj[key] as a string of at most `limit` characters without control characters; None when
    absent or null."""
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > limit or any(ord(ch) < 32 for ch in value):
        raise _bad(label, key, f"a one-line string of at most {limit} characters", value, fix)
    return value
