"""The nginx gateway: one upstream per served model, drained hosts, checked with nginx -t."""
