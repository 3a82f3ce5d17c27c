"""Service emulator for the workflow agent: the service side of docs/protocol.md."""

__version__ = "0.1.0"
