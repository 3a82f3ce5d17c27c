"""Turn a byte stream into output lines: the same splitting for every target."""

from __future__ import annotations

from collections.abc import Callable

# A step that prints megabytes without a newline must not grow the agent's memory without bound.
MAX_LINE_BYTES = 64 * 1024


class LineSplitter:
    """Feed bytes, get whole lines (decoded, without the newline or a trailing CR)."""

    def __init__(self, on_line: Callable[[str], None]) -> None:
        self._on_line = on_line
        self._buf = bytearray()

    def feed(self, data: bytes) -> None:
        self._buf += data
        while True:
            nl = self._buf.find(b"\n", 0, MAX_LINE_BYTES + 1)
            if nl >= 0:
                self._emit(bytes(self._buf[:nl]))
                del self._buf[: nl + 1]
            elif len(self._buf) > MAX_LINE_BYTES:
                cut = MAX_LINE_BYTES
                # Do not split a UTF-8 character: back off over continuation bytes.
                while cut > MAX_LINE_BYTES - 4 and (self._buf[cut] & 0xC0) == 0x80:
                    cut -= 1
                self._emit(bytes(self._buf[:cut]))
                del self._buf[:cut]
            else:
                break

    def flush(self) -> None:
        """Emit a last line that had no newline."""
        if self._buf:
            self._emit(bytes(self._buf))
            self._buf.clear()

    def _emit(self, raw: bytes) -> None:
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        self._on_line(raw.decode("utf-8", errors="replace"))
