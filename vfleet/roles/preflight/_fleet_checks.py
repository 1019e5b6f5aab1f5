"""Cross-host checks: things no single host can judge, such as every host of a serving group
running the same driver and CUDA. Input: host -> facts and group -> hosts.

Why per group: a load balancer spreads one model's traffic over a group; hosts that differ in
driver/CUDA (or GPU model) behave and fail differently under the same vLLM pin, and a rolling
upgrade must not leave a group half on one driver. The majority value passes, the odd hosts warn;
a tie warns everyone. Hosts with no driver are left to their own gpu.driver check.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ._checks import PASS, WARN, Check

FIELDS = [
    ("fleet.driver", "driver", lambda f: f.get("driver_version")),
    ("fleet.cuda", "CUDA (driver)", lambda f: f.get("cuda_version")),
    (
        "fleet.gpu_model",
        "GPU model",
        lambda f: ",".join(sorted({g.get("name") or "?" for g in f.get("gpus") or []})) or None,
    ),
]


def fleet_checks(hosts: dict[str, dict[str, Any]], groups: dict[str, list[str]]) -> dict[str, list[Check]]:
    """host -> extra checks, one per (group with >= 2 audited hosts, field)."""
    out: dict[str, list[Check]] = {h: [] for h in hosts}
    for group, members in sorted(groups.items()):
        present = [h for h in members if h in hosts]
        if len(present) < 2:
            continue
        for cid, label, get in FIELDS:
            values = {h: get(hosts[h]) for h in present}
            known = {h: v for h, v in values.items() if v}
            if len(known) < 2:
                continue
            counts = Counter(known.values())
            if len(counts) == 1:
                v = next(iter(counts))
                for h in known:
                    out[h].append(Check(f"{cid}:{group}", PASS, f"group {group}: every host has {label} {v}"))
                continue
            spread = ", ".join(
                f"{v} on {', '.join(sorted(h for h in known if known[h] == v))}" for v, _ in counts.most_common()
            )
            top = counts.most_common(2)
            majority = top[0][0] if top[0][1] > top[1][1] else None
            for h, v in known.items():
                if v == majority:
                    out[h].append(
                        Check(f"{cid}:{group}", PASS, f"group {group}: {label} {v} (majority); others differ: {spread}")
                    )
                else:
                    target = majority or "one version"
                    out[h].append(
                        Check(
                            f"{cid}:{group}",
                            WARN,
                            f"group {group} mixes {label}s: {spread}; this host has {v}",
                            f"bring this host to {label} {target} like the rest of {group}",
                        )
                    )
    return out
