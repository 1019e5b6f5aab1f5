"""The nginx gateway: one upstream per served model, drained hosts, checked with nginx -t."""

from __future__ import annotations

from . import _nginx as nginx
from ._files import render_files
from ._nginx import DRAINED_STATE
from ._precheck import check_gateway, check_on_host, controller_nginx
from ._render import STATUS_PATH, Backend, GatewayRenderError, status_listen

__all__ = [
    "Backend",
    "check_gateway",
    "check_on_host",
    "controller_nginx",
    "DRAINED_STATE",
    "GatewayRenderError",
    "nginx",
    "render_files",
    "status_listen",
    "STATUS_PATH",
]
