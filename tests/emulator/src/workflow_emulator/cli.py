"""`python -m workflow_emulator serve ...`: every flag can also come from EMULATOR_<FLAG> in the
environment, which is how tokens should be passed (argv is visible to every user of the host)."""

import argparse
import asyncio
import contextlib
import logging
import os
import secrets
import signal
import socket
import sqlite3
import sys

from workflow_emulator import durations

ENV = "EMULATOR_"


def _env(name: str, default: str | None = None) -> str | None:
    return os.environ.get(ENV + name.upper().replace("-", "_"), default)


def _duration(text: str) -> float:
    try:
        seconds = durations.parse(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, not {text!r}")
    return seconds


def _port(text: str) -> int:
    if not text.isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}")
    return int(text)


def _seed(text: str) -> str:
    if not text.startswith("pul-") or len(text) < 12 or not text.isprintable() or " " in text:
        raise argparse.ArgumentTypeError("a pool token looks like pul-<at least 8 characters>")
    return text


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2 (argparse would add the whole usage)
        self.exit(2, f"workflow_emulator: {message} (see --help)\n")


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m workflow_emulator", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    s = sub.add_parser("serve", help="run the emulator")
    s.add_argument("--host", default=_env("host", "127.0.0.1"))
    s.add_argument("--port", type=_port, default=_env("port", "0"), help="0 picks a free port")
    s.add_argument(
        "--state-file",
        default=_env("state_file"),
        help="SQLite file that keeps pools, jobs, logs and agents across restarts",
    )
    s.add_argument("--url-file", default=_env("url_file"), help="write the URL here once serving")
    s.add_argument(
        "--admin-token",
        default=_env("admin_token"),
        help="bearer token of /admin/ (prefer EMULATOR_ADMIN_TOKEN); printed if unset",
    )
    s.add_argument(
        "--seed-token",
        type=_seed,
        default=_env("seed_token"),
        help="create pool 'default' with this token (prefer EMULATOR_SEED_TOKEN)",
    )
    s.add_argument(
        "--heartbeat-timeout",
        type=_duration,
        default=_env("heartbeat_timeout", "10m"),
        help="fail a deployment whose heartbeats stop this long (Go duration)",
    )
    s.add_argument(
        "--online-window",
        type=_duration,
        default=_env("online_window", "60s"),
        help="an agent seen within this window is online in the pool REST API",
    )
    s.add_argument("--org", default=_env("org", "default"), help="organization of the seed pool")
    s.add_argument(
        "--default-image",
        default=_env("default_image", "local/debian12-plain:latest"),
        help="job image when a job does not name one",
    )
    s.add_argument(
        "--access-log",
        default=_env("access_log", "-"),
        help="JSON access log: - (stderr), a file path, or off",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from workflow_emulator.errors import ApiError
    from workflow_emulator.store import check_org  # after parsing: --help stays fast

    try:
        check_org(args.org)
    except ApiError as err:
        print(f"workflow_emulator: --org: {err.message}", file=sys.stderr)
        return 2
    if args.admin_token is not None and not args.admin_token.strip():
        print("workflow_emulator: --admin-token: must not be empty", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        return asyncio.run(serve(args))
    except KeyboardInterrupt:
        return 0


async def serve(args: argparse.Namespace) -> int:
    import uvicorn

    from workflow_emulator.app import Settings, create_app

    generated = args.admin_token is None
    admin_token = args.admin_token or secrets.token_hex(20)
    with contextlib.ExitStack() as stack:
        if args.access_log == "off":
            access_log = None
        elif args.access_log == "-":
            access_log = sys.stderr
        else:
            try:
                access_log = stack.enter_context(open(args.access_log, "a", encoding="utf-8"))  # noqa: SIM115
            except OSError as err:
                print(f"workflow_emulator: --access-log: {err}", file=sys.stderr)
                return 2
        try:
            sock = _bind(args.host, args.port)
        except OSError as err:
            print(
                f"workflow_emulator: cannot listen on {args.host}:{args.port}: {err.strerror}",
                file=sys.stderr,
            )
            return 2
        try:
            app = create_app(
                Settings(
                    admin_token=admin_token,
                    seed_token=args.seed_token,
                    heartbeat_timeout=args.heartbeat_timeout,
                    online_window=args.online_window,
                    org=args.org,
                    state_file=args.state_file,
                    default_image=args.default_image,
                    access_log=access_log,
                )
            )
        except (OSError, sqlite3.Error, ValueError, KeyError, TypeError) as err:
            # A state file that is not ours, or a directory that does not exist.
            sock.close()
            print(
                f"workflow_emulator: --state-file {args.state_file}: cannot use it: {err}",
                file=sys.stderr,
            )
            return 2
        config = uvicorn.Config(
            app,
            log_level="warning",
            access_log=False,
            http="h11",
            lifespan="on",
            timeout_graceful_shutdown=5,
        )
        server = uvicorn.Server(config)
        # uvicorn shuts down gracefully on SIGTERM/SIGINT, then re-raises the signal to whatever
        # handler was there before; a no-op one makes a clean stop exit 0 instead of 143.
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: None)
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started and not task.done():
            await asyncio.sleep(0.02)
        if task.done():
            await task
            return 1
        host, port = sock.getsockname()[:2]
        url = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
        print(url, flush=True)
        if generated:
            print(f"admin token: {admin_token}", flush=True)
        if args.url_file:
            tmp = f"{args.url_file}.tmp"
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write(url + "\n")
            os.replace(tmp, args.url_file)
        await task
    return 0


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets that say so, and without
    # it every keep-alive response stalls ~40 ms on the client's delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock
