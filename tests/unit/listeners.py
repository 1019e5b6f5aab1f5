"""Fake servers on 127.0.0.1 with two listeners: the gateway's port and the vLLM host's, as on a
real machine that is both (one port cannot be both: vfleet/config/cross_checks.py). The base of
the bench tests' fakes of vLLM."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class Server(ThreadingHTTPServer):
    request_queue_size = 128  # every request is a new connection (HTTP/1.0)
    daemon_threads = True


class Listeners:
    """`gateway_handler` answers on self.port, `vllm_handler` on self.vllm_port; started by
    `with`, shut down and joined at its end."""

    def __init__(self, gateway_handler: type[BaseHTTPRequestHandler], vllm_handler: type[BaseHTTPRequestHandler]):
        self.servers = [Server(("127.0.0.1", 0), h) for h in (gateway_handler, vllm_handler)]
        self.port, self.vllm_port = (server.server_address[1] for server in self.servers)
        self.threads = [threading.Thread(target=server.serve_forever, daemon=True) for server in self.servers]

    def __enter__(self):
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        for server, thread in zip(self.servers, self.threads):
            server.shutdown()
            server.server_close()
            thread.join(timeout=10)


def bench_inventory(path: Path, port: int, vllm_port: int, key: str, **more: object) -> Path:
    """An inventory of one vLLM host and one gateway, both on 127.0.0.1 (the two listeners),
    serving model `tiny` with `key`; `more`: further variables for every host. The hosts are
    reached with a local connection: bench reads the measured record on this machine (no
    vllm unit, no GPU: the record holds what the inventory sets)."""
    extra = "".join(f"    {k}: {v}\n" for k, v in more.items())
    inv = path / "inv.yaml"
    inv.write_text(f"""all:
  vars:
    model_name: tiny
    api_key: {key}
    vllm_port: {vllm_port}
    gateway_port: {port}
{extra}  children:
    vllm:
      hosts:
        node1:
          ansible_host: 127.0.0.1
          ansible_connection: local
    gateways:
      hosts:
        gw:
          ansible_host: 127.0.0.1
          ansible_connection: local
""")
    return inv
