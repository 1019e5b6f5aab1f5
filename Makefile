# Two commands do everything on a fresh Debian 12 machine (as root):
#   make demo   builds the lab fleet, deploys vLLM behind nginx, smoke-checks, prints the recap
#   make test   ruff (format and lint), then unit + integration tests against the lab
#   make soak   the long runs under load (rolling restarts under back-to-back clients): before
#               resolving anything that touches rollouts
#   make ci     what .ci/run calls: make test's tests and the soak runs that guard rollouts
#               (marked `ci`), in one pytest run on one deployed lab fleet
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
# libnginx-mod-http-js: nginx's JavaScript (njs), the gateway's JSON reading of request bodies
# and its tenant keys (docs/gateway.md); mtail: the gateway's per-tenant metrics from its access log.
APT_PACKAGES = systemd-container openssh-server openssh-client nginx libnginx-mod-http-js mtail rsync iproute2 dbus procps
# Prometheus (promtool checks generated configs; `vfleet monitor --deploy` installs it on hosts):
# without its recommends, which pull in openipmi, whose init script fails in lab hosts.
# prometheus-nginx-exporter: what `vfleet monitor --deploy` runs on each gateway (no recommends).
# prometheus-node-exporter: what it runs on each vLLM host for the GPU readings (no recommends:
# prometheus-node-exporter-collectors has no GPU script and pulls in smartmontools, ipmitool...).
APT_NO_RECOMMENDS = prometheus prometheus-nginx-exporter prometheus-node-exporter
LAB_INVENTORY ?= /var/lib/vfleet-lab/inventory.yaml

.PHONY: setup apt venv demo lint test ci soak unit integration lab-down clean

setup: apt venv

apt:
	@if ! command -v systemd-nspawn >/dev/null || ! command -v sshd >/dev/null || ! command -v nginx >/dev/null || ! test -e /usr/lib/nginx/modules/ngx_http_js_module.so || ! command -v mtail >/dev/null || ! command -v rsync >/dev/null || ! command -v promtool >/dev/null || ! command -v prometheus-nginx-exporter >/dev/null || ! command -v prometheus-node-exporter >/dev/null; then \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(APT_PACKAGES) && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(APT_NO_RECOMMENDS); \
	fi

venv: $(BIN)/vfleet

$(BIN)/vfleet: pyproject.toml requirements-lab.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -e '.[test]' -r requirements-lab.txt
	touch $@

# When make started (before apt and pip): the demo prints setup as its first phase.
DEMO_STARTED := $(shell date +%s.%N)

demo: setup
	VFLEET_DEMO_STARTED=$(DEMO_STARTED) $(BIN)/python -m vfleet.lab.demo

# One formatter and linter for the tree (pyproject.toml [tool.ruff]): seconds, so before the tests.
lint: venv
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .

test: setup lint
	$(BIN)/python -m pytest -q -ra --durations=15 -m "not soak" tests

ci: setup lint
	$(BIN)/python -m pytest -q -ra --durations=15 -m "not soak or ci" tests

soak: setup
	$(BIN)/python -m pytest -q -ra --durations=15 -m soak tests/integration

unit: venv
	$(BIN)/python -m pytest -q -ra tests/unit

integration: setup
	$(BIN)/python -m pytest -q -ra -m "not soak" tests/integration

lab-down: venv
	$(BIN)/vfleet lab.down

clean: lab-down
	rm -rf $(VENV)
