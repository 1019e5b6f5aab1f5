"""What a person reads on the terminal: one row an item (id, pass/fail, the reply cut to a line,
divergence when there is a reference), a summary line, and for eval.compare the items that
changed and the setup fields that differ. House style of vfleet/clients/bench/output.py."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from vfleet.clients.eval.compare import Comparison
from vfleet.clients.eval.report import EvalReport, ItemResult

REPLY_WIDTH = 48


def _verdict(item: ItemResult) -> Text:
    if item.error:
        return Text("error", style="red")
    if item.passed is None:
        return Text("-")
    return Text("pass", style="green") if item.passed else Text("FAIL", style="red")


def _cut(text: str, width: int = REPLY_WIDTH) -> str:
    one = " ".join(text.split())
    return one if len(one) <= width else one[: width - 3] + "..."


def _fmt(v: float | None, nd: int = 3) -> str:
    return "-" if v is None else f"{v:.{nd}f}"


def items_table(report: EvalReport) -> Table:
    t = Table(title=f"eval {report.target.get('label', '')} ({report.target.get('model', '')})", title_justify="left")
    for h, j in (("item", "left"), ("result", "left"), ("reply", "left"), ("why", "left"), ("divergence", "right")):
        t.add_column(h, justify=j)
    for i in report.items:
        why = i.error or i.why
        t.add_row(i.id, _verdict(i), Text(_cut(i.reply)), Text(_cut(why, 60)), _fmt(i.divergence))
    return t


def summary_line(report: EvalReport) -> str:
    """e.g. "eval lab1: score 0.92 (22/24); divergence 0.012 nats/token (24 items); 0 errors"."""
    judged = [i for i in report.items if i.passed is not None]
    score = "-" if report.score is None else f"{report.score:.2f} ({sum(1 for i in judged if i.passed)}/{len(judged)})"
    div = report.divergence
    n_div = sum(1 for i in report.items if i.divergence is not None)
    div_text = "no reference" if div is None else f"{div:.3f} nats/token ({n_div} items)"
    return (
        f"eval {report.target.get('label', '')}: score {score}; divergence {div_text}; "
        f"{report.errors} error{'s' if report.errors != 1 else ''}"
    )


def compare_table(c: Comparison, a: EvalReport, b: EvalReport, name_a: str, name_b: str) -> Table:
    """One row an item that changed (verdict flipped, divergence over the threshold), A's and B's
    result side by side; setup changes as the caption."""
    t = Table(
        title=f"A = {name_a}\nB = {name_b}",
        title_justify="left",
        caption="; ".join(c.measured_changes) or None,
        caption_justify="left",
    )
    for h, j in (("item", "left"), ("A", "left"), ("B", "left"), ("B reply", "left"), ("divergence", "right")):
        t.add_column(h, justify=j)
    names = [r.split(":", 1)[0] for r in c.regressed]
    flipped = [ib.id for ib in b.items if (ia := a.item(ib.id)) is not None and ia.passed is False and ib.passed]
    for item_id in names + flipped:
        ia, ib = a.item(item_id), b.item(item_id)
        if ia is None or ib is None:
            continue
        t.add_row(item_id, _verdict(ia), _verdict(ib), Text(_cut(ib.error or ib.reply, 40)), _fmt(ib.divergence))
    return t
