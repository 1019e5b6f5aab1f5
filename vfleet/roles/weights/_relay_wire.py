"""What a weights relay and the controller say to each other: the header, the frames, the
reports and the piece bitmaps (_relay.py runs a hop, _relay_store.py keeps its pieces).

Self-contained (stdlib only, Python 3.8+, no `from __future__`): chain.RELAY_SOURCE ships
this file, _relay_store.py and _relay.py to every host as one source, in that order.
    header:  b"VFR1" | u32 length | JSON | sha256 of the JSON (32 bytes)
    frames:  u32 file index | u32 piece index | u64 length | the piece's bytes
    end:     file index 0xFFFFFFFF (a stream without it was cut: upstream is gone)
    go:      an end frame whose length is that of the bitmap after it: the pieces a feeder
             sends (a whole host heading a chain waits for it on its control stream)
Control lines to a hop, on its control stream after the header: `cut` (drop the link to
the next hop: the controller routes around it) and `stop` (report what is held, exit).
Reports are JSON lines prefixed "VFR " on stderr, the hop's own session with the controller.
"""

import hashlib
import json
import struct
import sys
from typing import IO, Any, Dict, Iterable, List

MAGIC = b"VFR1"
FRAME = struct.Struct(">IIQ")
END = 0xFFFFFFFF
PREFIX = "VFR "
_me = {"host": "?"}  # this hop's name, from the header: every line this relay writes names it


def emit(event: Dict[str, Any]) -> None:
    """One report line. A gone controller is no reason to stop keeping pieces, so a broken
    stderr is ignored."""
    line = PREFIX + json.dumps({"host": _me["host"], **event}, separators=(",", ":")) + "\n"
    try:
        sys.stderr.write(line)
        sys.stderr.flush()
    except (BrokenPipeError, OSError, ValueError):
        pass


def read_exact(f: IO[bytes], n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = f.read(n - len(buf))
        if not chunk:
            break
        buf += chunk
    return bytes(buf)


def encode_header(header: Dict[str, Any]) -> bytes:
    """The header as it travels: length-prefixed JSON and its sha256, so a damaged one is
    refused before anything is staged."""
    body = json.dumps(header, separators=(",", ":")).encode()
    return MAGIC + struct.pack(">I", len(body)) + body + hashlib.sha256(body).digest()


def read_header(f: IO[bytes]) -> Dict[str, Any]:
    """The header, proven intact (a cut or damaged one raises ValueError)."""
    head = read_exact(f, 8)
    if len(head) < 8 or head[:4] != MAGIC:
        raise ValueError("stream does not start with a vfleet relay header")
    (n,) = struct.unpack(">I", head[4:])
    body, digest = read_exact(f, n), read_exact(f, 32)
    if len(body) < n or hashlib.sha256(body).digest() != digest:
        raise ValueError("relay header is cut or damaged")
    return json.loads(body)


def piece_index(files: List[Dict[str, Any]]) -> List[int]:
    """The global number of each file's first piece: pieces are numbered in manifest order."""
    out, k = [], 0
    for f in files:
        out.append(k)
        k += len(f["sha256"])
    return out


def bitmap(count: int, held: Iterable[int]) -> bytes:
    """Bit k set: piece k (global number) is in the set."""
    bits = bytearray((count + 7) // 8)
    for k in held:
        bits[k >> 3] |= 1 << (k & 7)
    return bytes(bits)


def in_bitmap(bits: bytes, k: int) -> bool:
    return k >> 3 < len(bits) and bool(bits[k >> 3] & (1 << (k & 7)))


def go_frame(bits: bytes) -> bytes:
    """A feeder's go, naming the pieces it sends."""
    return FRAME.pack(END, 0, len(bits)) + bits
