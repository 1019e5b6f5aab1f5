"""Reload nginx and know that it took the new config.

Why: `systemctl reload nginx` only signals the master and returns 0; a config the master then
refuses (one that `nginx -t` passes, e.g. a shared zone whose key changed since the running
config: "limit_req ... uses the ... key while previously it used ...") is logged and the old
config keeps running, silently. Each rendered config serves its own id on the loopback status
server (CONFIG_ID_PATH); after the signal the gateway step waits until nginx answers with the
new id, or fails with nginx's last [emerg] line."""

from __future__ import annotations

import shlex

from vfleet.roles.gateway._render import CONFIG_ID_PATH

__all__ = ["reload_command", "RELOAD_WAIT_S"]

RELOAD_WAIT_S = 20
ERROR_LOG = "/var/log/nginx/error.log"  # Debian's nginx.conf
_WAIT = (
    "import sys, time, urllib.request\n"
    "deadline = time.monotonic() + float(sys.argv[3])\n"
    "while time.monotonic() < deadline:\n"
    "    try:\n"
    "        if urllib.request.urlopen(sys.argv[1], timeout=2).read().decode().strip() == sys.argv[2]:\n"
    "            sys.exit(0)\n"
    "    except OSError:\n"
    "        pass\n"
    "    time.sleep(0.1)\n"
    "sys.exit(1)\n"
)


def reload_command(status_port: int, config_id: str) -> str:
    """The shell command: graceful reload, then wait for `config_id` (exit 1 and nginx's
    words when it does not come)."""
    probe = f"http://127.0.0.1:{int(status_port)}{CONFIG_ID_PATH}"
    # only what nginx logged after this reload: an older [emerg] is not this reload's reason
    why = f"$(tail -c +$((seen + 1)) {ERROR_LOG} 2>/dev/null | grep -h emerg | tail -n 1)"
    return (
        f"seen=$(stat -c %s {ERROR_LOG} 2>/dev/null || echo 0); "
        f"systemctl reload nginx && if ! python3 -c {shlex.quote(_WAIT)} {shlex.quote(probe)} "
        f"{shlex.quote(config_id)} {RELOAD_WAIT_S}; then "
        f'echo "nginx kept its previous config (the reload was refused): {why}" >&2; exit 1; fi'
    )
