"""Train the lab model on its fixed conversations, and check what greedy decoding answers.

Why: the build must give the same bytes on every run (the weights copy and its manifest are
compared by hash) and must fail loudly rather than ship a model that does not know its answers.
So the training is full-batch (no shuffling), seeded, single-precision, with deterministic
algorithms and a fixed thread count, and stops at the first step where every reply token is the
arg-max of the model's prediction with a clear margin (teacher forcing: then greedy decoding
reproduces every reply), or fails after a fixed step budget.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from vfleet.lab.model.corpus import Conversation, eval_conversations

IGNORE = -100  # label of a position without loss (prompt and padding): transformers' convention


class TrainingFailed(RuntimeError):
    """The step budget ran out before every reply was reproduced with the required margin."""


@dataclass(frozen=True)
class TrainSettings:
    """What decides the trained weights (threads only how fast: 1 and 2 threads gave the same bytes)."""

    seed: int = 1234
    threads: int = 2
    max_steps: int = 200  # about 5 times what the build needs (40 steps)
    lr: float = 3e-3
    warmup_steps: int = 10
    batch_rows: int = 16  # rows per forward pass; every row is in every step
    margin: float = 4.0  # logit of the reply token minus the best other one, at every reply position


@contextlib.contextmanager
def deterministic_torch(threads: int) -> Iterator[None]:
    """Deterministic algorithms and a fixed thread count for the block, then the caller's settings back
    (a test process or a caller keeps its own)."""
    import torch

    before = (torch.get_num_threads(), torch.are_deterministic_algorithms_enabled())
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.set_num_threads(before[0])
        torch.use_deterministic_algorithms(before[1])


def prompt_ids(tokenizer, messages) -> list[int]:
    """The ids of a chat prompt: the chat template with the assistant turn opened, tokenized as text
    (the template writes the BOS; the tokenizer adds no special token either way, so a server that
    asks it to add them gets the same ids)."""
    text = tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def encode(tokenizer, conv: Conversation, end: str) -> tuple[list[int], list[int]]:
    """Input ids and labels of one conversation; only the reply and its end token carry loss."""
    prompt = prompt_ids(tokenizer, conv.messages)
    reply = tokenizer(conv.reply + end, add_special_tokens=False)["input_ids"]
    return prompt + reply, [IGNORE] * len(prompt) + reply


def _batches(rows: list[tuple[list[int], list[int]]], pad_id: int, size: int):
    """Right-padded (input ids, labels, attention mask) batches of `size` rows of similar length
    (rows sorted by length: little padding to compute through)."""
    import torch

    rows = sorted(rows, key=lambda row: len(row[0]))
    out = []
    for start in range(0, len(rows), size):
        chunk = rows[start : start + size]
        width = max(len(ids) for ids, _ in chunk)
        ids = torch.full((len(chunk), width), pad_id, dtype=torch.long)
        labels = torch.full((len(chunk), width), IGNORE, dtype=torch.long)
        mask = torch.zeros((len(chunk), width), dtype=torch.long)
        for i, (row_ids, row_labels) in enumerate(chunk):
            ids[i, : len(row_ids)] = torch.tensor(row_ids)
            labels[i, : len(row_labels)] = torch.tensor(row_labels)
            mask[i, : len(row_ids)] = 1
        out.append((ids, labels, mask))
    return out


def _reply_logits(model, ids, labels, mask):
    """Logits at the positions that predict a reply token, and those tokens (the output layer is
    computed only there: the prompt needs none)."""
    hidden = model.model(input_ids=ids, attention_mask=mask).last_hidden_state[:, :-1]
    targets = labels[:, 1:]
    keep = targets != IGNORE
    return model.lm_head(hidden[keep]), targets[keep]


def min_margin(logits, targets) -> float:
    """The smallest (target logit - best other logit) over all rows; > 0 means the arg-max is the
    target everywhere."""
    import torch

    right = logits.gather(1, targets[:, None]).squeeze(1)
    others = logits.scatter(1, targets[:, None], float("-inf")).max(dim=1).values
    return float(torch.min(right - others))


def train(model, rows: list[tuple[list[int], list[int]]], pad_id: int, settings: TrainSettings) -> int:
    """Train `model` in place on all `rows` per step (gradients summed over the batches) until the
    margin holds; return the steps taken."""
    import torch

    device = next(model.parameters()).device
    batches = [tuple(t.to(device) for t in batch) for batch in _batches(rows, pad_id, settings.batch_rows)]
    reply_tokens = sum(int((labels != IGNORE).sum()) for _, labels, _ in batches)
    opt = torch.optim.AdamW(model.parameters(), lr=settings.lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: min(1.0, (step + 1) / settings.warmup_steps))
    model.train()
    margin = float("-inf")
    for step in range(settings.max_steps):
        opt.zero_grad(set_to_none=True)
        margins = []
        for ids, labels, mask in batches:
            logits, targets = _reply_logits(model, ids, labels, mask)
            margins.append(min_margin(logits.detach(), targets))
            loss = torch.nn.functional.cross_entropy(logits, targets, reduction="sum") / reply_tokens
            loss.backward()
        margin = min(margins)
        if margin >= settings.margin:
            model.eval()
            return step
        opt.step()
        sched.step()
    raise TrainingFailed(
        f"lab model: after {settings.max_steps} training steps the smallest reply-token "
        f"margin is {margin:.2f} < {settings.margin}: raise max_steps or lr in TrainSettings"
    )


def greedy_replies(model, tokenizer, conversations: list[Conversation]) -> list[tuple[str, bool]]:
    """What transformers' greedy decoding answers to each conversation, and whether it stopped at an
    end token by itself. Each reply may run one token past its expected reply's length: one that
    has not stopped by then is wrong anyway, and a broken model's babble is not worth decoding."""
    import torch

    stops = set(model.generation_config.eos_token_id)
    out = []
    with torch.no_grad():
        for conv in conversations:
            prompt = torch.tensor([prompt_ids(tokenizer, conv.messages)])
            limit = len(tokenizer(conv.reply, add_special_tokens=False)["input_ids"]) + 1
            gen = model.generate(
                prompt,
                attention_mask=torch.ones_like(prompt),
                do_sample=False,
                temperature=None,
                top_p=None,
                max_new_tokens=limit,
            )
            gen = gen[0, prompt.shape[1] :].tolist()
            stopped = bool(gen) and gen[-1] in stops
            out.append((tokenizer.decode(gen, skip_special_tokens=True), stopped))
    return out


def wrong_answers(folder) -> list[str]:
    """The built-in eval items that the model saved in `folder`, loaded as vLLM loads it (its
    files' dtype), does not answer exactly under greedy decoding, or answers without stopping;
    one phrase each: "'QUESTION' -> 'REPLY'"."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    model = AutoModelForCausalLM.from_pretrained(str(folder))
    evalset = eval_conversations()
    return [
        f"{conv.messages[-1]['content']!r} -> {reply!r}" + ("" if stopped else " (no end token)")
        for conv, (reply, stopped) in zip(evalset, greedy_replies(model, tokenizer, evalset))
        if reply != conv.reply or not stopped
    ]
