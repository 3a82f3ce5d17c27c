"""Process-group helpers for the process target (Linux /proc where it helps, POSIX otherwise)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

_PROC = Path("/proc")


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name (which may contain spaces)."""
    try:
        raw = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return raw[raw.rfind(")") + 2 :].split()


def group_alive(pgid: int) -> bool:
    """True while a live (non-zombie) process is in the group.

    On Linux /proc is read, because kill(-pgid, 0) also succeeds for zombies that an init which
    does not reap would leave behind, and we would wait out the whole grace period for nothing.
    """
    if sys.platform.startswith("linux") and _PROC.is_dir():
        return bool(group_members(pgid))
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def group_members(pgid: int) -> list[int]:
    """Linux only: the live (non-zombie) pids whose process group is `pgid`."""
    members = []
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        # fields[0] is the state, fields[2] the process group.
        if fields and fields[0] not in ("Z", "X") and fields[2] == str(pgid):
            members.append(int(entry.name))
    return members


def signal_group(pgid: int, sig: int) -> bool:
    """Send `sig` to the group; False when the group no longer exists."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    return True


def start_signature(pid: int) -> str | None:
    """An identity for a running process that a recycled pid does not share (None: not running).

    Linux: the start time in clock ticks since boot. Elsewhere: ps's start time.
    """
    if sys.platform.startswith("linux") and _PROC.is_dir():
        fields = _stat_fields(pid)
        if not fields or fields[0] in ("Z", "X"):
            return None
        return fields[19]  # starttime (field 22 of stat)
    try:
        out = subprocess.run(
            ["ps", "-o", "lstart=", "-p", str(pid)],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return out or None


def boot_id() -> str:
    """Changes on every boot (Linux); '' where unknown, which callers treat as 'same boot'."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def terminate_group(pgid: int, grace: float, reap=None) -> bool:
    """TERM the group, wait up to `grace` seconds for it to go, then KILL it.

    `reap` (e.g. Popen.poll) is called while waiting so our own child does not linger as a
    zombie member of the group. Returns True when the group was gone before the KILL.
    """
    if not signal_group(pgid, signal.SIGTERM):
        return True
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if reap is not None:
            reap()
        if not group_alive(pgid):
            return True
        time.sleep(0.05)
    signal_group(pgid, signal.SIGKILL)
    # KILL is delivered asynchronously; wait (bounded: a process stuck in the kernel may take
    # longer) so that callers can rely on the group being gone.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if reap is not None:
            reap()
        if not group_alive(pgid):
            break
        time.sleep(0.02)
    return False
