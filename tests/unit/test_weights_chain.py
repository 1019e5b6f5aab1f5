"""The pipelined weights chain with real relays: local processes, each started by the
controller as over ssh, chained by pipes and FIFOs (host i pipes into host i+1), in temp
dirs; no ssh, no lab."""

from __future__ import annotations

import dataclasses
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from vfleet.roles.weights import _chain as chain, _copies as copies, _pieces as pieces, _relay_wire as relay
from vfleet.roles.weights._relay import BOOT

PIECE = 16 << 10


def _model(tmp_path: Path, mib: float = 1.0) -> Path:
    d = tmp_path / "model"
    (d / "sub").mkdir(parents=True)
    (d / "config.json").write_text('{"architectures": ["X"]}\n')
    (d / "sub" / "empty.bin").write_bytes(b"")
    (d / "model.safetensors").write_bytes(os.urandom(int(mib * (1 << 20)) + 123))
    return d


def _hops(tmp_path: Path, n: int) -> list[chain.Hop]:
    return [chain.local_hop(f"h{i}", str(tmp_path / f"host{i}" / "staging")) for i in range(n)]


def _flipping(hop: chain.Hop, flip: Path, offset: int) -> chain.Hop:
    """The hop, with one byte of the stream into it flipped on the way (a damaging link)."""
    sink = shlex.join(hop.sink())
    return dataclasses.replace(
        hop, peer=("sh", "-c", f"{shlex.quote(sys.executable)} {shlex.quote(str(flip))} {offset} | exec {sink}")
    )


def _same_tree(a: Path, b: Path) -> bool:
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    return files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file()) and all(
        (a / f).read_bytes() == (b / f).read_bytes() for f in files
    )


def _whole_mark(hop: chain.Hop) -> bool:
    return Path(hop.dest + ".vfleet-whole").exists()


def _logged(hop: chain.Hop) -> int:
    p = Path(hop.dest + ".vfleet-pieces")
    return len(p.read_text().splitlines()) if p.exists() else 0


def _data_offset(pm: pieces.PieceManifest, model: Path, frame_no: int) -> int:
    """Where frame `frame_no`'s bytes sit in the stream between two hops (frames only)."""
    off = 0
    for k, (_, _, data) in enumerate(pieces.read_pieces(model, pm)):
        if k == frame_no:
            return off + relay.FRAME.size + len(data) // 2
        off += relay.FRAME.size + len(data)
    raise AssertionError("no such frame")


def _flipper(tmp_path: Path) -> Path:
    flip = tmp_path / "flip.py"
    flip.write_text(
        "import sys\nn=int(sys.argv[1]);i=sys.stdin.buffer;o=sys.stdout.buffer\n"
        "b=bytearray(i.read(n+1));b[n]^=0xFF;o.write(b)\n"
        "while c:=i.read(65536): o.write(c)\n"
    )
    return flip


def test_chain_of_five_ends_whole_and_identical(tmp_path):
    model = _model(tmp_path)
    pm = pieces.make_piece_manifest(model, PIECE)
    hops = _hops(tmp_path, 5)
    out = chain.distribute(model, pm, hops)
    assert out.rounds == 1 and out.failed == {}
    for h in hops:
        assert _same_tree(model, Path(h.dest)) and _whole_mark(h)
        assert out.results[h.name].written == pm.piece_count


def test_flipped_byte_is_caught_by_next_relay_and_nothing_downstream_is_whole(tmp_path):
    model = _model(tmp_path)
    pm = pieces.make_piece_manifest(model, PIECE)
    hops = _hops(tmp_path, 4)
    hops[2] = _flipping(hops[2], _flipper(tmp_path), _data_offset(pm, model, frame_no=20))
    first = chain.distribute(model, pm, hops, attempts=1)
    assert first.results["h2"].status == "failed" and "sha256" in first.results["h2"].reason
    assert first.results["h3"].status == "failed"  # its stream was cut at the bad piece
    assert first.results["h3"].missing and first.results["h3"].missing > 0
    assert not _whole_mark(hops[2]) and not _whole_mark(hops[3])
    assert _whole_mark(hops[0]) and _whole_mark(hops[1])
    # the next plan feeds h2 from the controller (not through the damaging link); both complete
    again = chain.distribute(model, pm, hops[2:], attempts=2)
    assert again.failed == {} and again.chains == [["h2", "h3"]]
    assert again.results["h2"].written == 1  # only the damaged piece: later ones were kept
    for h in hops:
        assert _same_tree(model, Path(h.dest))


def test_bad_piece_host_goes_first_in_the_replan(tmp_path):
    model = _model(tmp_path)
    pm = pieces.make_piece_manifest(model, PIECE)
    hops = _hops(tmp_path, 3)
    hops[1] = _flipping(hops[1], _flipper(tmp_path), _data_offset(pm, model, frame_no=5))
    out = chain.distribute(model, pm, hops, attempts=3)
    assert out.chains == [["h0", "h1", "h2"], ["h1", "h2"]]
    assert out.failed == {} and all(_same_tree(model, Path(h.dest)) for h in hops)


def test_killed_relay_is_failed_and_the_rest_rechained_writing_only_missing(tmp_path):
    model = _model(tmp_path, mib=2)
    pm = pieces.make_piece_manifest(model, PIECE)
    pidfile = tmp_path / "h2.pid"
    plain = _hops(tmp_path, 5)
    hops = list(plain)
    hops[2] = dataclasses.replace(
        plain[2],
        from_controller=(
            "sh",
            "-c",
            f"echo $$ > {shlex.quote(str(pidfile))}; exec {shlex.join(plain[2].from_controller)}",
        ),
    )

    def killer() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and _logged(hops[2]) < pm.piece_count // 4:
            time.sleep(0.01)
        os.kill(int(pidfile.read_text()), signal.SIGKILL)

    t = threading.Thread(target=killer)
    t.start()
    seen: list[dict] = []
    # paced so the kill lands mid-transfer: 2 MiB at 4 MiB/s
    out = chain.distribute(model, pm, hops, bwlimit=4 << 20, on_event=seen.append)
    t.join()
    assert out.results["h2"].status == "failed" and out.results["h2"].reason.startswith("lost mid-chain")
    assert out.results["h3"].rounds == 2 and out.results["h1"].rounds == 1
    assert len(out.results["h2"].reason.splitlines()) == 1
    # routed around h2, fed by h1, the last whole host before the gap (not the controller)
    assert out.chains == [["h0", "h1", "h2", "h3", "h4"], ["from h1", "h3", "h4"]]
    for h in hops[:2] + hops[3:]:
        r = out.results[h.name]
        assert r.status == "whole" and r.written == pm.piece_count  # over both rounds: none twice
        assert _logged(h) == pm.piece_count  # one log line per write
    # they kept what they had, and the re-chain sent only the pieces one of them lacked
    again = [e for e in seen if e["event"] == "done" and e["host"] in ("h3", "h4")][-2:]
    assert all(e["written"] + e["skipped"] < pm.piece_count for e in again)
    assert {e["host"] for e in again} == {"h3", "h4"}
    for h in hops[:2] + hops[3:]:
        assert _same_tree(model, Path(h.dest))
    assert not _whole_mark(hops[2])
    held = _logged(hops[2])
    assert 0 < held < pm.piece_count
    # the killed host kept what it verified: a later run writes only the rest
    back = chain.distribute(model, pm, [plain[2]])
    assert back.failed == {} and back.results["h2"].written == pm.piece_count - held
    assert back.results["h2"].skipped == 0 and _same_tree(model, Path(plain[2].dest))  # held: not sent again


def test_resumed_run_skips_pieces_already_verified(tmp_path):
    model = _model(tmp_path)
    pm = pieces.make_piece_manifest(model, PIECE)
    hop = _hops(tmp_path, 1)[0]
    # a stream cut after 10 pieces (no end frame), as when the upstream vanishes
    frames = b"".join(
        relay.FRAME.pack(fi, pi, len(d)) + d for k, (fi, pi, d) in enumerate(pieces.read_pieces(model, pm)) if k < 10
    )
    p = subprocess.run(
        list(hop.from_controller),
        input=chain.RELAY_SOURCE + relay.encode_header(dict(chain.header(pm, [hop], 0), input="stdin")) + frames,
        capture_output=True,
    )
    assert p.returncode == 1 and b'"whole":false' in p.stderr and b'"ended":"cut"' in p.stderr
    assert _logged(hop) == 10 and not _whole_mark(hop)
    # a torn last line (a relay killed while appending) is ignored: that piece is rewritten
    with open(hop.dest + ".vfleet-pieces", "a") as f:
        f.write("10 abc")
    out = chain.distribute(model, pm, [hop])
    r = out.results["h0"]
    assert r.status == "whole" and r.skipped == 0 and r.written == pm.piece_count - 10  # the 10 are not sent
    assert _same_tree(model, Path(hop.dest))


def test_damaged_header_is_refused(tmp_path):
    model = _model(tmp_path, mib=0.1)
    pm = pieces.make_piece_manifest(model, PIECE)
    hop = _hops(tmp_path, 1)[0]
    head = bytearray(relay.encode_header(chain.header(pm, [hop], 0)))
    head[20] ^= 1
    p = subprocess.run(list(hop.from_controller), input=chain.RELAY_SOURCE + bytes(head), capture_output=True)
    assert p.returncode == 2 and b"cut or damaged" in p.stderr
    assert not Path(hop.dest).exists()


def test_on_whole_moves_only_a_verified_copy(tmp_path):
    model = _model(tmp_path, mib=0.2)
    pm = pieces.make_piece_manifest(model, PIECE)
    staging, version = str(tmp_path / ".staging" / "m-1"), str(tmp_path / ".versions" / "m-1")
    hop = chain.local_hop("h0", staging, on_whole=chain.whole_command(staging, version, None))
    assert chain.distribute(model, pm, [hop]).failed == {}
    (Path(version) / ".vfleet-verified").unlink()  # sync.py's mark of a verified copy
    assert _same_tree(model, Path(version))
    assert not Path(staging).exists()


def test_pieces_manifest_cuts_and_hashes(tmp_path):
    model = _model(tmp_path, mib=0.05)
    pm = pieces.make_piece_manifest(model, PIECE)
    by = {f.path: f for f in pm.files}
    assert set(by) == {"MANIFEST.sha256", "config.json", "model.safetensors", "sub/empty.bin"}
    assert len(by["sub/empty.bin"].sha256) == 1 and by["sub/empty.bin"].size == 0
    assert len(by["model.safetensors"].sha256) == pieces.pieces_of(by["model.safetensors"].size, PIECE)
    assert pm.id == pieces.make_piece_manifest(model, PIECE).id != pieces.make_piece_manifest(model, 2 * PIECE).id
    with pytest.raises(ValueError):
        pieces.make_piece_manifest(model, 100)


def test_ssh_hop_quotes_the_boot_and_refuses_option_like_hosts():
    h = chain.ssh_hop(
        "a",
        "/srv/models/.staging/x y",
        address="10.0.0.1",
        user="ops",
        port=2222,
        controller_ssh=["ssh", "-o", "BatchMode=yes"],
        peer_ssh=chain.peer_ssh("/k"),
    )
    assert h.from_controller[:3] == ("ssh", "-o", "BatchMode=yes") and h.from_controller[-2] == "ops@10.0.0.1"
    assert shlex.split(h.from_controller[-1]) == ["python3", "-c", BOOT, str(len(chain.RELAY_SOURCE))]
    sink = h.sink()
    assert sink[: len(copies.PEER_SSH)] == tuple(copies.PEER_SSH) and sink[-4:-1] == ("-p", "2222", "ops@10.0.0.1")
    assert ("-i", "/k") == sink[len(copies.PEER_SSH) : len(copies.PEER_SSH) + 2]
    assert shlex.split(sink[-1])[-2:] == [">", "/srv/models/.staging/x y.vfleet-in"]
    with pytest.raises(Exception, match="starts with '-'"):
        chain.ssh_hop("b", "/x/y", address="-oProxyCommand=x", user=None, port=22, controller_ssh=["ssh"])


def test_whole_command_never_moves_a_copy_that_fails_verify(tmp_path):
    staging, version = tmp_path / ".staging" / "m-1", tmp_path / ".versions" / "m-1"
    staging.mkdir(parents=True)
    (staging / "w.bin").write_bytes(b"damaged")
    (staging / "MANIFEST.sha256").write_text("0" * 64 + "  w.bin\n")
    p = subprocess.run(["sh", "-c", chain.whole_command(str(staging), str(version), None)], capture_output=True)
    assert p.returncode != 0 and not version.exists() and staging.exists()


def test_a_feeder_whose_copy_rotted_on_disk_passes_nothing_bad_on(tmp_path):
    model = _model(tmp_path, mib=0.5)
    pm = pieces.make_piece_manifest(model, PIECE)
    hops = _hops(tmp_path, 3)
    assert chain.distribute(model, pm, hops[:1]).failed == {}
    with open(Path(hops[0].dest) / "model.safetensors", "r+b") as f:
        f.seek(5 * PIECE + 7)
        f.write(b"\x00" if f.read(1) != b"\x00" else b"\x01")
    seen: list[dict] = []
    res = chain.run_chain(model, pm, hops[1:], feeder=hops[0], on_event=seen.append)
    assert any(e["event"] == "bad_piece" and e["host"] == "h0" for e in seen)
    assert all(r.status == "partial" and r.missing for r in res.values())
    assert not _whole_mark(hops[1]) and not _whole_mark(hops[2])
    # the controller then feeds them, and they keep the pieces they had
    out = chain.distribute(model, pm, hops[1:])
    assert out.failed == {} and out.results["h1"].written < pm.piece_count and _same_tree(model, Path(hops[2].dest))


def _keep_log_lines(hop: chain.Hop, keep) -> int:
    """Leave in hop's pieces log only the lines `keep(k)` (k: the line's number) accepts, and
    take its whole mark away: a host that verified only those pieces."""
    log = Path(hop.dest + ".vfleet-pieces")
    lines = [ln for k, ln in enumerate(log.read_text().splitlines(keepends=True)) if keep(k)]
    log.write_text("".join(lines))
    Path(hop.dest + ".vfleet-whole").unlink(missing_ok=True)
    return len(lines)


def test_resumed_chain_sends_only_pieces_some_hop_lacks(tmp_path):
    model = _model(tmp_path)
    pm = pieces.make_piece_manifest(model, PIECE)
    hops = _hops(tmp_path, 3)
    assert chain.distribute(model, pm, hops).failed == {}
    # h1 verified the first 10 pieces only, h2 all but lines 30-34; h0 holds everything but
    # has no whole mark (killed after its last log line)
    _keep_log_lines(hops[1], lambda k: k < 10)
    _keep_log_lines(hops[2], lambda k: not 30 <= k < 35)
    _keep_log_lines(hops[0], lambda k: True)
    seen: list[dict] = []
    out = chain.distribute(model, pm, hops, on_event=seen.append)
    assert out.failed == {} and out.rounds == 1
    done = {e["host"]: e for e in seen if e["event"] == "done"}
    sent = pm.piece_count - 10  # what h1 lacks covers what h2 lacks: nothing else travels
    assert (done["h0"]["written"], done["h0"]["skipped"]) == (0, sent)
    assert (done["h1"]["written"], done["h1"]["skipped"]) == (sent, 0)
    assert (done["h2"]["written"], done["h2"]["skipped"]) == (5, sent - 5)
    assert all(_same_tree(model, Path(h.dest)) and _whole_mark(h) for h in hops)
    # every hop holds every piece: nothing is sent, and each is made whole from its log
    seen.clear()
    _keep_log_lines(hops[1], lambda k: True)
    again = chain.distribute(model, pm, hops[1:], on_event=seen.append)
    assert again.failed == {} and all(e["written"] + e["skipped"] == 0 for e in seen if e["event"] == "done")


def _throttled(hop: chain.Hop, tmp_path: Path, bytes_per_s: int) -> chain.Hop:
    """The hop, with the link into it slowed to `bytes_per_s` (what tc does to a host's NIC)."""
    slow = tmp_path / "slow.py"
    slow.write_text(
        "import sys,time\nr=int(sys.argv[1]);i=sys.stdin.buffer;o=sys.stdout.buffer\n"
        "while c:=i.read1(4096):\n o.write(c);o.flush();time.sleep(len(c)/r)\n"
    )
    sink = shlex.join(hop.sink())
    return dataclasses.replace(
        hop, peer=("sh", "-c", f"{shlex.quote(sys.executable)} {shlex.quote(str(slow))} {bytes_per_s} | exec {sink}")
    )


def _routed_run(tmp_path: Path, model: Path, hops: list[chain.Hop], pm: pieces.PieceManifest) -> chain.Outcome:
    seen: list[dict] = []
    out = chain.distribute(
        model, pm, hops, bwlimit=2 << 20, on_event=seen.append, slow=chain.SlowRule(window_s=1.5, share=0.5)
    )
    assert [e["host"] for e in seen if e["event"] == "routed"] == ["h1"]
    return out


def test_slowed_link_host_is_routed_into_its_own_chain(tmp_path):
    model = _model(tmp_path, mib=3)
    pm = pieces.make_piece_manifest(model, PIECE)
    hops = _hops(tmp_path, 4)
    hops[1] = _throttled(hops[1], tmp_path, 400 << 10)  # a fifth of the feed's 2 MiB/s
    out = _routed_run(tmp_path, model, hops, pm)
    assert len(out.notes) == 1 and out.notes[0].startswith("h1 is slow:") and "\n" not in out.notes[0]
    # h0 went on alone at full speed; h2, h3 resumed fed by h0, h1 beside them on its own
    assert out.chains == [["h0", "h1", "h2", "h3"], ["from h0", "h2", "h3"], ["from h0", "h1"]]
    assert out.results["h0"].rounds == 1 and out.failed == {}
    assert all(_same_tree(model, Path(h.dest)) for h in hops)


def test_stopped_relay_is_routed_around(tmp_path):
    model = _model(tmp_path, mib=3)
    pm = pieces.make_piece_manifest(model, PIECE)
    pidfile = tmp_path / "h1.pid"
    hops = _hops(tmp_path, 4)
    hops[1] = dataclasses.replace(
        hops[1],
        from_controller=(
            "sh",
            "-c",
            f"echo $$ > {shlex.quote(str(pidfile))}; exec {shlex.join(hops[1].from_controller)}",
        ),
    )

    def stopper() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and _logged(hops[1]) < pm.piece_count // 4:
            time.sleep(0.01)
        os.kill(int(pidfile.read_text()), signal.SIGSTOP)  # alive, connected, taking nothing

    t = threading.Thread(target=stopper)
    t.start()
    out = _routed_run(tmp_path, model, hops, pm)
    t.join()
    assert out.notes[0].startswith("h1 is slow: it received 0.00 MiB/s")
    assert out.chains[1:] == [["from h0", "h2", "h3"], ["from h0", "h1"]]
    assert out.failed == {} and all(_same_tree(model, Path(h.dest)) for h in hops)
