"""Everything a gateway host gets from one render: the nginx config, the njs module and, with
TLS, the certificate and its key, with the mode each must have there.

Why one value: the config names the module and the certificate by path, so they are written
together (the module and the TLS files first, the config last, tested by `nginx -t`), and
`nginx -t` away from the gateway (precheck) needs the same set in its scratch folder."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Collection, Sequence

from vfleet.config.hostconfig import HostConfig
from vfleet.engine.errors import VfleetError
from vfleet.roles.gateway._models import group_models
from vfleet.roles.gateway._njs import JS_IMPORT, JS_PATH, render_js
from vfleet.roles.gateway._render import (
    ACCESS_LOG,
    CONFIG_ID_PLACEHOLDER,
    GATEWAY_CONF_PATH,
    TLS_FILES,
    Backend,
    GatewayRenderError,
    render_gateway,
)

__all__ = ["GatewayFile", "GatewayFiles", "render_files", "NGINX_DIR", "TLS_PATHS"]

NGINX_DIR = "/etc/nginx"
TLS_PATHS = {kind: f"{NGINX_DIR}/{rel}" for kind, rel in TLS_FILES.items()}  # where the gateway keeps them


@dataclass(frozen=True)
class GatewayFile:
    """One file: where it goes (absolute, and relative to nginx's config folder), what it holds."""

    path: str
    relative: str
    content: str = field(repr=False)
    mode: str
    secret: bool  # its content is never shown (--diff) and never readable but by root


@dataclass(frozen=True)
class GatewayFiles:
    """The gateway's files; `conf` last (written after the files it names)."""

    conf: GatewayFile
    supporting: tuple[GatewayFile, ...]
    config_id: str = ""  # what nginx serves once it runs these files (vfleet/roles/gateway/_reload.py)

    @property
    def tls(self) -> bool:
        return len(self.supporting) > 1

    @property
    def all(self) -> tuple[GatewayFile, ...]:
        return self.supporting + (self.conf,)


def render_files(
    backends: Sequence[Backend], cfg: HostConfig, drained: Collection[str] = (), access_log: str = ACCESS_LOG
) -> GatewayFiles:
    """The files of the gateway `cfg` (GatewayRenderError: one line, what to fix)."""
    conf = render_gateway(backends, cfg, drained=drained, access_log=access_log)
    supporting = [GatewayFile(JS_PATH, JS_IMPORT, render_js(cfg, group_models(backends)), "0600", True)]
    if cfg.gateway_tls:
        try:
            cert, key = cfg.gateway_tls.read()
        except VfleetError as e:
            raise GatewayRenderError(str(e)) from None
        supporting += [
            GatewayFile(TLS_PATHS["cert"], TLS_FILES["cert"], cert, "0644", False),
            GatewayFile(TLS_PATHS["key"], TLS_FILES["key"], key, "0600", True),
        ]
    digest = hashlib.sha256(conf.encode())
    for f in supporting:
        digest.update(f.content.encode())
    config_id = digest.hexdigest()[:16]
    rel = GATEWAY_CONF_PATH.removeprefix(NGINX_DIR + "/")
    conf = conf.replace(CONFIG_ID_PLACEHOLDER, config_id)
    return GatewayFiles(GatewayFile(GATEWAY_CONF_PATH, rel, conf, "0644", False), tuple(supporting), config_id)
