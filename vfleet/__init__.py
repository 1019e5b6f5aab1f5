"""vfleet: provision fleets of bare-metal GPU hosts to serve LLMs with vLLM."""

__version__ = "0.1.0"
