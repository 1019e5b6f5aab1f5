"""Shared ground of the gateway tests (test_gateway_conf, test_gateway_render): four backends as
Backend.of makes them from the vLLM hosts' configs, the gateway knobs that are inventory
variables, and the gateway host's HostConfig (tests/unit/configs.py builds it through the
inventory loader and schema)."""

from tests.unit.configs import host_config
from vfleet.roles.gateway._render import Backend

BACKENDS = [
    Backend("gpu01", "10.0.0.11", 8000, "tiny"),
    Backend("gpu02", "10.0.0.12", 8000, "tiny"),
    Backend("gpu03", "fd00::13", 8001, "tiny"),
    Backend("gpu04", "gpu04.lab.example", 8000, "tiny"),
]
# the gateway knobs that are inventory variables (the rest are module constants)
KNOBS = (
    "gateway_port",
    "gateway_listen_address",
    "gateway_rate_limit",
    "gateway_rate_burst",
    "gateway_client_max_body_size",
    "gateway_read_timeout",
    "gateway_max_fails",
    "gateway_fail_timeout",
)


def gw(vars: dict | None = None):
    """The HostConfig of a gateway host."""
    return host_config(vars, name="gw01", group="gateways")


GW = gw()
