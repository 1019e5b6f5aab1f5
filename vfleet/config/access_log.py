"""The gateway's JSON access log, as its writer (the gateway's nginx log_format) and its readers
(`vfleet usage`, mtail on each gateway) agree on it: where it is, the keys a line carries, the
error kinds. One home, so a renamed key or a moved file changes all three together.

Why in config and not in a role: the gateway role renders the log_format, the monitoring role
ships the mtail program that tails the file, and the usage role reads it over SSH; a role must
not lean on another role's internals, and all three sit above this layer."""

from __future__ import annotations

__all__ = ["ACCESS_LOG", "FIELDS", "ERROR_KINDS", "UNBOUNDED_MODEL_ERRORS"]

# Debian's logrotate for nginx (nginx-common's /etc/logrotate.d/nginx: /var/log/nginx/*.log, daily,
# delaycompress) rotates it to .1, then .2.gz, .3.gz ...
ACCESS_LOG = "/var/log/nginx/vfleet-access.log"

# Keys of one line, in the order the log_format writes them (GATEWAY24.md "The access log").
FIELDS = (
    "time",
    "msec",
    "tenant",
    "model",
    "answered_by",
    "status",
    "error",
    "upstream",
    "request_time",
    "ttfb",
    "method",
    "path",
    "bytes",
)

# What `error` holds when status >= 400 ("" below 400).
ERROR_KINDS = (
    "unauthorized",
    "rate_limited",
    "concurrency_limited",
    "model_not_found",
    "bad_request",
    "unavailable",
    "not_found",
    "upstream",
    "client_closed",
)

# Errors where `model` is whatever the client wrote (a refused key, an unknown model, a body
# that could not be read): metrics label such requests model="" so that a client cannot
# create one time series per made-up name.
UNBOUNDED_MODEL_ERRORS = ("unauthorized", "model_not_found", "bad_request", "not_found")
