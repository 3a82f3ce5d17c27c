"""Secret redaction for shipped job logs and the agent's own log lines."""

from __future__ import annotations

import threading
from collections.abc import Iterable

MASK = "[secret]"
# Shorter values would mask ordinary words and numbers everywhere while protecting little.
MIN_SECRET_LEN = 4


class Redactor:
    """Replaces every registered secret value (and each line of a multi-line one) with MASK."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}
        self._ordered: tuple[str, ...] = ()
        self.add(secrets)

    @staticmethod
    def _pieces(values: Iterable[str]) -> set[str]:
        out: set[str] = set()
        for value in values:
            if not isinstance(value, str):
                continue
            for piece in [value, *value.splitlines()]:
                piece = piece.strip()
                if len(piece) >= MIN_SECRET_LEN:
                    out.add(piece)
        return out

    def add(self, values: Iterable[str]) -> None:
        with self._lock:
            for piece in self._pieces(values):
                self._counts[piece] = self._counts.get(piece, 0) + 1
            self._reorder()

    def remove(self, values: Iterable[str]) -> None:
        with self._lock:
            for piece in self._pieces(values):
                left = self._counts.get(piece, 0) - 1
                if left > 0:
                    self._counts[piece] = left
                else:
                    self._counts.pop(piece, None)
            self._reorder()

    def _reorder(self) -> None:
        # Longest first, so a secret containing another is masked whole.
        self._ordered = tuple(sorted(self._counts, key=len, reverse=True))

    def __call__(self, text: str) -> str:
        for secret in self._ordered:
            if secret in text:
                text = text.replace(secret, MASK)
        return text
