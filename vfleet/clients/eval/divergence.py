"""How far this server's distribution is from the reference run's, on the reference's own reply.

Why not "are the tokens equal": greedy decoding forks at the first near-tie, and on vLLM a fork
happens even between two runs of one server (shared/reference: 0 of 64 replies token-identical
after a restart), so equality says nothing about how much changed. Instead each token of the
reference reply is scored under this server (prompt logprobs), and the figure is the mean over
those tokens of |reference logprob - this server's logprob|, in nats per token: about 0.03 for the
same model and numerics on bf16 (one rounding step of the logits), more the further the two
distributions are. Absolute, not signed: a candidate with sharper logits finds the reference's
words MORE likely (a negative signed mean) and would never fail, and tokens above and below
would cancel. The signed mean is kept beside it for the reader (which way it moved).

The reply is retokenized when sent back as text, which usually gives the same ids. When it does
not, only the longest common suffix of the two id sequences is scored, and the count says how
many tokens that was. A stop token the reference generated last (EOS) is not in the text, so a
last reference token that does not match the prompt's last token is dropped before aligning."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from vfleet.clients.eval.wire import PromptScores


@dataclass(frozen=True)
class Divergence:
    value: float | None  # mean |reference - this| logprob, nats/token; None when no token could be scored
    signed: float | None  # mean (reference - this): positive when this server finds the reference less likely
    scored: int  # reference tokens scored
    of: int  # reference tokens in all


def common_suffix(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[-1 - n] == b[-1 - n]:
        n += 1
    return n


def divergence(ref_ids: list[int], ref_logprobs: list[float], prompt: PromptScores) -> Divergence:
    """Mean |reference - this server| logprob (and the signed mean) over the reference tokens
    found at the prompt's end."""
    of = len(ref_ids)
    ids, lps = list(ref_ids), list(ref_logprobs)
    if ids and prompt.token_ids and ids[-1] != prompt.token_ids[-1]:
        ids, lps = ids[:-1], lps[:-1]  # the stop token, not part of the reply's text
    n = common_suffix(ids, prompt.token_ids)
    pairs = [(r, p) for r, p in zip(lps[len(lps) - n :], prompt.logprobs[len(prompt.logprobs) - n :]) if p is not None]
    if not pairs:
        return Divergence(None, None, 0, of)
    diffs = [r - p for r, p in pairs]
    return Divergence(statistics.fmean(abs(d) for d in diffs), statistics.fmean(diffs), len(pairs), of)
