"""Jinja2 templates (systemd unit, environment file, nginx gateway). A package only so that the
templates ship inside the wheel; TEMPLATE_DIR is where the renderers load them from."""

from pathlib import Path

TEMPLATE_DIR = Path(__file__).resolve().parent
