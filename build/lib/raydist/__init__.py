"""raydist: evaluate code LLMs and coding agents on dynamic problems and dynamic repository views."""

__version__ = "0.1.0"
