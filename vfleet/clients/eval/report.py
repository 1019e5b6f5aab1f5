"""The eval report: per item what the server answered (text, token ids, logprobs), whether it met
its expectation, and its divergence from a reference run; the run's target, settings and the
`measured` record (vfleet/clients/measured.py). Saved as JSON (atomic, secrets redacted) so that
`eval.compare` and a gate can read it back, maybe weeks later."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import jsonschema

from vfleet.engine.errors import VfleetError
from vfleet.engine.report import write_json_atomic
from vfleet.engine.strict_json import MIB, read_json, type_name

TASK = "eval"
FORMAT = 1
SCORING_FAILED = "scoring the reference reply"  # how an item's error begins when its divergence failed
MAX_BYTES = 256 * MIB  # every token's top logprobs: a set of thousands of items is tens of MiB

_NUM, _STR = {"type": ["number", "null"]}, {"type": ["string", "null"]}
ITEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["id", "reply", "token_ids", "logprobs", "top_logprobs", "finish_reason", "passed", "why"],
    "properties": {
        "id": {"type": "string", "minLength": 1},
        "reply": {"type": "string"},
        "why": {"type": "string"},
        "token_ids": {"type": "array", "items": {"type": "integer"}},
        "logprobs": {"type": "array", "items": {"type": "number"}},
        "top_logprobs": {"type": "array", "items": {"type": "object", "additionalProperties": {"type": "number"}}},
        "finish_reason": _STR,
        "passed": {"type": ["boolean", "null"]},
        "error": _STR,
        "item_hash": _STR,
        "divergence": _NUM,
        "divergence_signed": _NUM,
        "scored_tokens": {"type": ["integer", "null"], "minimum": 0},
    },
}
REPORT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["task", "target", "settings", "items", "created"],
    "properties": {
        "task": {"const": TASK},
        "created": {"type": "string"},
        "target": {"type": "object"},
        "settings": {"type": "object"},
        "measured": {"type": ["object", "null"]},
        "notes": {"type": ["array", "null"], "items": {"type": "string"}},
        "items": {"type": "array", "minItems": 1, "items": ITEM_SCHEMA},
    },
}
_VALIDATOR = jsonschema.Draft202012Validator(REPORT_SCHEMA)


@dataclass
class ItemResult:
    id: str
    reply: str
    token_ids: list[int]
    logprobs: list[float]
    top_logprobs: list[dict[str, float]]
    finish_reason: str | None
    passed: bool | None  # None: the item has no expectation
    why: str  # "" or one phrase: "reply 'Lyon' does not match (?i)\bparis\b"
    divergence: float | None = None
    error: str | None = None  # the server's error for this item (HTTP status + message)
    scored_tokens: int | None = None  # reference tokens the divergence was computed on
    divergence_signed: float | None = None  # mean (reference - this) without the absolute value: which way
    item_hash: str | None = None  # EvalItem.digest: a saved baseline must have been run on the same item


@dataclass
class EvalReport:
    target: dict
    settings: dict
    measured: dict
    items: list[ItemResult]
    created: str  # ISO time
    notes: list[str] = field(default_factory=list)  # what the reader should know (batch invariance off...)

    @property
    def score(self) -> float | None:
        """Passed / items with an expectation (an item the server failed to answer counts as failed)."""
        judged = [i for i in self.items if i.passed is not None]
        return sum(1 for i in judged if i.passed) / len(judged) if judged else None

    @property
    def divergence(self) -> float | None:
        """Mean over items of each item's mean |reference - this| logprob, nats/token (None
        without a reference): the figure a gate judges."""
        vals = [i.divergence for i in self.items if i.divergence is not None]
        return statistics.fmean(vals) if vals else None

    @property
    def divergence_signed(self) -> float | None:
        """The same without the absolute value, for the reader: negative when this server is
        surer of the reference's words than the reference was."""
        vals = [i.divergence_signed for i in self.items if i.divergence_signed is not None]
        return statistics.fmean(vals) if vals else None

    def baseline_problem(self) -> str | None:
        """Why this report cannot be a baseline (None: it can): an item the server answered
        with an error, or one without reply tokens, gives nothing to compare against; a
        baseline of HTTP 401s would let any candidate pass."""
        bad = next((i for i in self.items if i.error or not i.token_ids), None)
        if bad is None:
            return None
        n = sum(1 for i in self.items if i.error or not i.token_ids)
        why = f"error {bad.error[:80]}" if bad.error else "no reply tokens"
        return f"{n} of {len(self.items)} item(s) have no usable reply (first: {bad.id}: {why})"

    @property
    def errors(self) -> int:
        return sum(1 for i in self.items if i.error)

    def item(self, item_id: str) -> ItemResult | None:
        return next((i for i in self.items if i.id == item_id), None)

    def to_dict(self) -> dict[str, Any]:
        judged = [i for i in self.items if i.passed is not None]
        return {
            "task": TASK,
            "format": FORMAT,
            "created": self.created,
            "target": self.target,
            "settings": self.settings,
            "measured": self.measured,
            "notes": list(self.notes),
            "summary": {
                "score": self.score,
                "divergence": self.divergence,
                "divergence_signed": self.divergence_signed,
                "items": len(self.items),
                "passed": sum(1 for i in judged if i.passed),
                "judged": len(judged),
                "errors": self.errors,
            },
            "items": [asdict(i) for i in self.items],
        }

    @classmethod
    def from_dict(cls, d: Any, source: str = "the report") -> "EvalReport":
        """The report in `d` (parsed JSON), its shape and types checked: a tampered or foreign
        file is one VfleetError line naming `source` and the field, never a traceback, and a
        report without items is refused (it would compare as "nothing regressed")."""
        task = d.get("task") if isinstance(d, dict) else None
        if isinstance(task, str) and task != TASK:  # another vfleet result, e.g. two files swapped
            raise VfleetError(
                f"{source}: a `vfleet {task[:40]}` result, not a `vfleet eval` report; give a report "
                "written by `vfleet eval`"
            )
        err = jsonschema.exceptions.best_match(_VALIDATOR.iter_errors(d))
        if err is not None:
            where = "/".join(str(p) for p in err.absolute_path) or "(top)"
            if err.validator == "type":
                wanted = err.validator_value if isinstance(err.validator_value, list) else [err.validator_value]
                what = f"expected {' or '.join(wanted)}, found {type_name(err.instance)}"
            elif err.validator == "minItems":
                what = "no items"
            else:
                what = err.message[:120]
            raise VfleetError(
                f"{source}: not a `vfleet eval` report: {where}: {what}; give a report written by `vfleet eval`"
            )
        names = {f.name for f in fields(ItemResult)}
        items = [ItemResult(**{k: v for k, v in i.items() if k in names}) for i in d["items"]]
        return cls(
            target=dict(d["target"]),
            settings=dict(d["settings"]),
            measured=dict(d.get("measured") or {}),
            items=items,
            created=d["created"],
            notes=list(d.get("notes") or []),
        )

    def save(self, path: str | Path) -> None:
        """Atomic: a reader sees the old file or the whole new one, never half (tmp + rename)."""
        write_json_atomic(path, self.to_dict())

    @classmethod
    def load(cls, path: str | Path) -> "EvalReport":
        """A saved report: bounded strict read (no NaN, at most MAX_BYTES), then from_dict."""
        return cls.from_dict(read_json(path, MAX_BYTES), str(path))
