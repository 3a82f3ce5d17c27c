"""Enqueue a job every --interval seconds until --stop exists; append each job id to --out.

Started in the background by prepare.yml before the upgrade, so that jobs are queued and
running before and during the rolling restart.
"""

import argparse
import json
import pathlib
import time
import urllib.request


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--admin-token-file", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--stop", required=True)
    p.add_argument("--interval", type=float, default=2)
    p.add_argument("--sleep", type=int, default=6)
    p.add_argument("--limit", type=float, default=600, help="give up after this many seconds")
    a = p.parse_args()
    token = pathlib.Path(a.admin_token_file).read_text().strip()
    out = pathlib.Path(a.out)
    out.write_text("")  # this run's jobs only, not an interrupted earlier run's
    stop = pathlib.Path(a.stop)
    job = {"steps": [{"name": "work", "run": f"echo on $(hostname); sleep {a.sleep}; echo done"}]}
    end = time.monotonic() + a.limit
    while not stop.exists() and time.monotonic() < end:
        req = urllib.request.Request(  # noqa: S310 - the local emulator's http URL
            f"{a.url}/admin/jobs",
            data=json.dumps(job).encode(),
            method="POST",
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=30) as resp:  # noqa: S310 - the local emulator
            job_id = json.load(resp)["id"]
        with out.open("a") as fh:
            fh.write(job_id + "\n")
        time.sleep(a.interval)


if __name__ == "__main__":
    main()
