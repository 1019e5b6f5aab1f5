"""The key of a shared torch.compile cache: computed on the controller from typed values, so two
hosts share a cache only when everything vLLM compiles from is the same on both.

What vLLM keys its cache on (read in the vLLM 0.20.0 wheel, vllm/compilation/backends.py,
decorators.py, caching.py and envs.py; the same scheme in 0.32):
  - VLLM_CACHE_ROOT/torch_compile_cache/<10 hex>/rank_<rank>_<dp_rank>/<prefix>/ (backends.py):
    sha256 of [env_hash, config_hash, code_hash, compiler_hash], cut to 10 hex. env_hash is
    envs.compile_factors(): every variable vLLM knows (all VLLM_*, and CUDA_HOME...) less an
    ignore list (VLLM_CACHE_ROOT, VLLM_PORT, the logging ones...); VLLM_API_KEY is not on that
    list. config_hash is the VllmConfig (what the engine flags set). code_hash is the path AND
    the text of every source file traced, so the venv must sit at the same path. Inductor's and
    Triton's caches are redirected into that folder ("users only need to copy the cache_dir to
    another machine", vllm PR #11108).
  - VLLM_CACHE_ROOT/torch_compile_cache/torch_aot_compile/<64 hex>/rank_<rank>_<dp_rank>/model,
    its inductor_cache/ beside the rank folders (decorators.py): sha256 of env_hash, config_hash
    and the model's forward; on by default with torch >= 2.10 (VLLM_USE_AOT_COMPILE), so on the
    H200's torch 2.11.
  - vllm PR #47573 (merged 2026-07, after 0.20): VLLM_CONFIG_ROOT (from HOME) and
    VLLM_XLA_CACHE_PATH (from XDG_CACHE_HOME) are hashed too, so a cache restored under another
    HOME or XDG layout misses silently: the unit's HOME and XDG_CACHE_HOME are part of this key.
  - vllm#52154 (open): the standalone Inductor artifacts keep their absolute path; a cache moved
    to another directory fails to load (FileNotFoundError; fix proposed in PR #52142). Hence the
    copy lands at the identical VLLM_CACHE_ROOT, and a host whose cache root differs is refused.

vfleet's key is stricter than vLLM's hash in one field: the model's weights (the manifest id of
the copy the host serves). vLLM hashes the model's config, not its weights, so a fine-tune of the
same architecture would load a graph the quality gate never judged with those weights.

Secrets (VLLM_API_KEY) take part as a digest held in memory only: the JSON kept on a host says
"secret" instead, so no key, nor a hash of one, is written anywhere.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from vfleet.config.hostconfig import HostConfig
from vfleet.engine.errors import VfleetError

__all__ = [
    "CacheKey",
    "FIELDS",
    "SECRET",
    "key_of",
    "host_key",
    "difference",
    "engine_words",
    "KeyError_",
    "skip_line",
    "drop_line",
]

# the fields in the order a reason names them (the first that differs)
FIELDS = ("vllm_version", "gpu_model", "model", "argv", "env", "cache_root", "home", "venv")
SECRET = "secret"  # what the stored form holds for a secret's value
_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)", re.I)
# server-only flags: not part of vLLM's config hash; a per-host listen address must not split the key
_SERVER_ONLY = frozenset({"--host", "--port"})


class KeyError_(VfleetError):
    """A stored key that is not one (edited, cut short): read as no key."""


@dataclass(frozen=True)
class CacheKey:
    """What a compiled graph depends on. env: the sorted (name, value) of every VLLM_* variable
    the unit and its environment file set (VLLM_CACHE_ROOT is cache_root); a secret's value is
    `secret:<sha256>` in memory and SECRET once stored. home: the unit's HOME and XDG_CACHE_HOME."""

    vllm_version: str
    gpu_model: str
    model: str
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    cache_root: str
    home: str
    venv: str

    def stored(self) -> dict[str, Any]:
        """The JSON form kept beside the cache on a host (secrets as SECRET)."""
        return {
            "vllm_version": self.vllm_version,
            "gpu_model": self.gpu_model,
            "model": self.model,
            "argv": list(self.argv),
            "env": {k: _stored_value(v) for k, v in self.env},
            "cache_root": self.cache_root,
            "home": self.home,
            "venv": self.venv,
        }

    @property
    def digest(self) -> str:
        """sha256 of the stored form: names the cache's folders (the same on every host of the key)."""
        return hashlib.sha256(json.dumps(self.stored(), sort_keys=True).encode()).hexdigest()

    @classmethod
    def from_stored(cls, data: Any) -> CacheKey:
        """Back from a host's JSON; KeyError_ when it is not a key vfleet wrote."""
        if not isinstance(data, dict) or set(data) != set(FIELDS):
            raise KeyError_("not a vfleet compile-cache key")
        text = {f: data[f] for f in FIELDS if f not in ("argv", "env")}
        argv, env = data["argv"], data["env"]
        if (
            not all(isinstance(v, str) for v in text.values())
            or not (isinstance(argv, list) and all(isinstance(w, str) for w in argv))
            or not (isinstance(env, dict) and all(isinstance(v, str) for v in env.values()))
        ):
            raise KeyError_("a compile-cache key with a field of the wrong type")
        return cls(argv=tuple(argv), env=tuple(sorted(env.items())), **text)


def _stored_value(value: str) -> str:
    return SECRET if value.startswith(SECRET + ":") else value


def engine_words(argv: Sequence[str]) -> tuple[str, ...]:
    """The argv less the server-only flags and their values (_SERVER_ONLY)."""
    out: list[str] = []
    skip = False
    for word in argv:
        if skip:
            skip = False
            continue
        name = word.split("=", 1)[0]
        if name in _SERVER_ONLY:
            skip = "=" not in word
            continue
        out.append(word)
    return tuple(out)


def key_of(
    cfg: HostConfig, *, gpu_model: str, model: str, argv: Sequence[str], env: Sequence[tuple[str, str]]
) -> CacheKey:
    """One host's key: its config, the GPU model and model copy its facts name, the argv its unit
    runs and the environment (unit Environment= and environment file) the unit renders."""
    values = dict(env)
    vllm = tuple(
        sorted(
            (k, _secret(v) if _SECRET_NAME.search(k) else v)
            for k, v in values.items()
            if k.startswith("VLLM_") and k != "VLLM_CACHE_ROOT"
        )
    )
    home = f"HOME={values.get('HOME', '')} XDG_CACHE_HOME={values.get('XDG_CACHE_HOME', '')}"
    return CacheKey(
        vllm_version=str(cfg.vllm_version),
        gpu_model=gpu_model,
        model=model,
        argv=engine_words(argv),
        env=vllm,
        cache_root=values.get("VLLM_CACHE_ROOT", ""),
        home=home,
        venv=cfg.venv_path,
    )


def host_key(cfg: HostConfig, *, gpu_model: str, model: str, nccl_env: Mapping[str, str] | None = None) -> CacheKey:
    """key_of with the argv and environment the service role renders for this host (the same
    functions the unit file is written from, so the key is what the unit runs)."""
    from vfleet.config.vllm_facts import flag_available
    from vfleet.roles.service import ArgvError, RenderError, env_items, unit_environment, vllm_argv

    try:
        argv = vllm_argv(cfg, flag_available).argv
        env = unit_environment(cfg) + env_items(cfg, nccl_env)
    except (ArgvError, RenderError) as exc:
        raise VfleetError(f"{cfg.name}: no compile-cache key: the unit does not render: {exc}") from None
    return key_of(cfg, gpu_model=gpu_model, model=model, argv=argv, env=env)


def _secret(value: str) -> str:
    return f"{SECRET}:{hashlib.sha256(value.encode()).hexdigest()}"


def difference(
    have: CacheKey, want: CacheKey, *, have_is: str = "the cache", want_is: str = "here"
) -> tuple[str, str] | None:
    """The first field that differs and what differs in it, as (field, detail); None when the
    keys are equal. `have_is` / `want_is` name the two sides in the detail."""
    for name in FIELDS:
        a, b = getattr(have, name), getattr(want, name)
        if name == "env":
            detail = _env_difference(dict(a), dict(b), have_is, want_is)
        elif name == "argv":
            detail = _argv_difference(a, b, have_is, want_is)
        else:
            detail = None if a == b else f"{name} differs ({a or 'none'} in {have_is}, {b or 'none'} {want_is})"
        if detail:
            return name, detail
    return None


def _same_secret(a: str, b: str) -> bool:
    """A stored SECRET matches any secret (the stored form cannot tell): vLLM's own hash still does."""
    return a == b or (SECRET in (a, b) and a.startswith(SECRET) and b.startswith(SECRET))


def _env_difference(a: Mapping[str, str], b: Mapping[str, str], have_is: str, want_is: str) -> str | None:
    for name in sorted(set(a) | set(b)):
        va, vb = a.get(name), b.get(name)
        if va is not None and vb is not None and _same_secret(va, vb):
            continue
        shown = [
            ("a secret value" if v and v.startswith(SECRET) else ("unset" if v is None else repr(v))) for v in (va, vb)
        ]
        if shown[0] == shown[1]:  # two different secrets
            shown = ["one secret value", "another"]
        return f"env {name} differs ({shown[0]} in {have_is}, {shown[1]} {want_is})"
    return None


def _argv_difference(a: Sequence[str], b: Sequence[str], have_is: str, want_is: str) -> str | None:
    if tuple(a) == tuple(b):
        return None
    i = next((n for n, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    word = a[i] if i < len(a) else b[i]
    start = i - 1 if i > 0 and not word.startswith("-") else i  # a value: show its flag too

    def part(words: Sequence[str]) -> str:
        return " ".join(words[start : start + 2]) or "nothing"

    return f"argv differs ({part(a)!r} in {have_is}, {part(b)!r} {want_is})"


def skip_line(host: str, source: str, field: str, detail: str) -> str:
    """The one line of a host the shared cache is not copied to."""
    return f"{host}: compile cache of {source} not copied: {detail}: {host} compiles its own ({field})"


def drop_line(host: str, field: str, detail: str) -> str:
    """The one line of a host whose kept cache no longer matches its key."""
    return f"{host}: compile cache dropped: {detail}: {host} compiles its own ({field})"
