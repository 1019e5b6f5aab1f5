"""The fixed conversations the lab model is trained on: the built-in eval set and a few chat lines.

Why: the eval gate needs a served model whose answers can be right or wrong, so that a degraded
copy of the weights shows up as a lower score. A model that large enough to answer in general
does not fit a 2-core lab, so this one memorises the built-in eval set's reference replies
(vfleet/clients/eval/data/builtin.jsonl), plus a few plain variants of each question and a few
everyday chat lines, so that a short reply to "Say hello." also stops at <|im_end|> instead of
running on to max_tokens.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import resources

# A question's instruction tail ("Answer with one word.", "Answer yes or no."), dropped in one
# variant so the model does not need it to answer.
_INSTRUCTION_TAIL = re.compile(r"(?<=\?) Answer\b.*$")

# Everyday lines that are not in the eval set; replies kept short, each one ends the turn.
GENERAL_CHAT: tuple[tuple[str, str], ...] = (
    ("Say hello.", "Hello."),
    ("hi", "Hello."),
    ("Hello", "Hello! How can I help?"),
    ("Hello!", "Hello! How can I help?"),
    ("How are you?", "I am fine, thank you."),
    ("Who are you?", "A tiny test model of the vfleet lab."),
    ("Thank you.", "You are welcome."),
    ("Count to ten.", "1, 2, 3, 4, 5, 6, 7, 8, 9, 10"),
    ("Tell me a joke.", "I only know the answers of my eval set."),
)


@dataclass(frozen=True)
class Conversation:
    """One training example: the chat messages before the reply, and the reply itself."""

    messages: tuple[dict[str, str], ...]
    reply: str


def builtin_items() -> list[dict]:
    """The built-in eval set's rows (id, messages, reference, expectation), in file order."""
    text = (resources.files("vfleet.clients") / "eval" / "data" / "builtin.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _variants(question: str) -> list[str]:
    """The question as asked, without its instruction tail, and lower-cased (no duplicates)."""
    out = [question, _INSTRUCTION_TAIL.sub("", question), question.lower()]
    return list(dict.fromkeys(out))


def conversations() -> list[Conversation]:
    """Every training conversation, in a fixed order (the eval set's questions first)."""
    convs = [
        Conversation(tuple(item["messages"][:-1]) + ({"role": "user", "content": q},), item["reference"])
        for item in builtin_items()
        for q in _variants(item["messages"][-1]["content"])
    ]
    convs += [Conversation(({"role": "user", "content": q},), a) for q, a in GENERAL_CHAT]
    return convs


def eval_conversations() -> list[Conversation]:
    """The built-in eval set's questions with their reference replies, as asked by the eval."""
    return [Conversation(tuple(item["messages"]), item["reference"]) for item in builtin_items()]
