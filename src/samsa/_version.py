"""samsa's version, in a module of its own so that any module can name it without
importing the package root (which re-exports the client)."""

__version__ = "0.1.0"
