"""The gateway's njs module: vfleet/templates/gateway.js after one line of settings.

Why the settings are JSON in the module itself: nginx's master process (root) reads the module
when it loads the config, so the file can be 0600 and hold what a tenant must never read, the
key nginx sends vLLM, beside the sha256 of each tenant's key. json.dumps with ensure_ascii gives
text that is valid JavaScript as it is (no raw U+2028, no quote it does not escape)."""

from __future__ import annotations

import json
from importlib import resources
from typing import Sequence

from vfleet.config.hostconfig import HostConfig
from vfleet.roles.gateway._models import Model, model_entries
from vfleet.roles.gateway._tenants import tenant_settings

__all__ = ["JS_PATH", "JS_IMPORT", "render_js"]

JS_PATH = "/etc/nginx/vfleet/gateway.js"
# as the config names it: relative to nginx's config folder (/etc/nginx, or a scratch prefix's
# for `nginx -t` on the controller)
JS_IMPORT = "vfleet/gateway.js"


def render_js(cfg: HostConfig, models: Sequence[Model]) -> str:
    """The module's text for the gateway `cfg` in front of `models`."""
    # an adapter is judged like its model and routed to its hosts; it has no fallback (another
    # model would answer without the adapter)
    s = {
        "models": {
            name: {"i": m.index, "max_tokens": m.max_tokens, "fallback": m.fallback if name == m.name else None}
            for m in models
            for name in m.names
        },
        "list": model_entries(models),
        "tenants": None,
        "keys": {},
        "backend": None,
    }
    if cfg.gateway_tenants:
        s.update(tenant_settings(cfg))
    code = resources.files("vfleet.templates").joinpath("gateway.js").read_text()
    return (
        "// Managed by vfleet (vfleet/roles/gateway/_njs.py): local edits are overwritten.\n"
        f"var S = {json.dumps(s, ensure_ascii=True, sort_keys=True)};\n\n{code}"
    )
