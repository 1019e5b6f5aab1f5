"""The eval report: per item what the server answered (text, token ids, logprobs), whether it met
its expectation, and its divergence from a reference run; the run's target, settings and the
`measured` record (vfleet/clients/measured.py). Saved as JSON (atomic, secrets redacted) so that
`eval.compare` and a gate can read it back, maybe weeks later."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from vfleet.engine.errors import VfleetError
from vfleet.engine.report import write_json_atomic

TASK = "eval"
FORMAT = 1


@dataclass
class ItemResult:
    id: str
    reply: str
    token_ids: list[int]
    logprobs: list[float]
    top_logprobs: list[dict[str, float]]
    finish_reason: str | None
    passed: bool | None          # None: the item has no expectation
    why: str                     # "" or one phrase: "reply 'Lyon' does not match (?i)\bparis\b"
    divergence: float | None = None
    error: str | None = None     # the server's error for this item (HTTP status + message)
    scored_tokens: int | None = None   # reference tokens the divergence was computed on


@dataclass
class EvalReport:
    target: dict
    settings: dict
    measured: dict
    items: list[ItemResult]
    created: str                 # ISO time
    notes: list[str] = field(default_factory=list)   # what the reader should know (batch invariance off...)

    @property
    def score(self) -> float | None:
        """Passed / items with an expectation (an item the server failed to answer counts as failed)."""
        judged = [i for i in self.items if i.passed is not None]
        return sum(1 for i in judged if i.passed) / len(judged) if judged else None

    @property
    def divergence(self) -> float | None:
        vals = [i.divergence for i in self.items if i.divergence is not None]
        return sum(vals) / len(vals) if vals else None

    @property
    def errors(self) -> int:
        return sum(1 for i in self.items if i.error)

    def item(self, item_id: str) -> ItemResult | None:
        return next((i for i in self.items if i.id == item_id), None)

    def to_dict(self) -> dict[str, Any]:
        judged = [i for i in self.items if i.passed is not None]
        return {"task": TASK, "format": FORMAT, "created": self.created, "target": self.target,
                "settings": self.settings, "measured": self.measured, "notes": list(self.notes),
                "summary": {"score": self.score, "divergence": self.divergence, "items": len(self.items),
                            "passed": sum(1 for i in judged if i.passed), "judged": len(judged), "errors": self.errors},
                "items": [asdict(i) for i in self.items]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "EvalReport":
        """KeyError/TypeError/ValueError on a dict that is not an eval report (load says which file)."""
        if d.get("task") != TASK:
            raise ValueError("task is not 'eval'")
        names = {f.name for f in fields(ItemResult)}
        items = [ItemResult(**{k: v for k, v in i.items() if k in names}) for i in d["items"]]
        return cls(target=dict(d["target"]), settings=dict(d["settings"]), measured=dict(d.get("measured") or {}),
                   items=items, created=str(d["created"]), notes=list(d.get("notes") or []))

    def save(self, path: str | Path) -> None:
        """Atomic: a reader sees the old file or the whole new one, never half (tmp + rename)."""
        write_json_atomic(path, self.to_dict())

    @classmethod
    def load(cls, path: str | Path) -> "EvalReport":
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise VfleetError(f"{path}: no such file") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise VfleetError(f"{path}: not JSON ({getattr(exc, 'msg', type(exc).__name__)}); give a report "
                              "written by `vfleet eval`") from None
        except (IsADirectoryError, PermissionError) as exc:
            raise VfleetError(f"{path}: cannot read it ({type(exc).__name__})") from None
        try:
            return cls.from_dict(data)
        except (KeyError, TypeError, ValueError, AttributeError):
            raise VfleetError(f"{path}: not a `vfleet eval` report (JSON with task 'eval', target, settings, "
                              "items)") from None
