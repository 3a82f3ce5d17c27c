"""Command line: run, configure, check, version.

Config problems end as one line on stderr and exit status 2, never as a traceback. The same
entry point is installed under upstream's command names (`ALIASES`), so scripts and service
units written for upstream's agent run it unchanged.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import platform
import sys
import tempfile
from pathlib import Path

import yaml

from workflow_agent import __version__
from workflow_agent.config import (
    CONFIG_FILE_NAME,
    DEPLOY_TARGETS,
    LEGACY_CONFIG_FILE_NAME,
    ConfigError,
    load_config,
    to_document,
    validate_mapping,
)
from workflow_agent.durations import format as format_duration

PROG = "workflow-agent"
# Upstream's command names (2.x, and 1.x before the rename): console scripts of this package too.
ALIASES = ("customer-managed-workflow-agent", "customer-managed-deployment-agent")
LEGACY_COMMAND = "customer-managed-deployment-agent"
EXIT_CONFIG = 2


def _version_text() -> str:
    return f"{PROG} {__version__} ({sys.platform}; {platform.machine() or 'unknown'})"


def _error(message: str) -> int:
    print(message, file=sys.stderr)
    return EXIT_CONFIG


def _parser(prog: str = PROG) -> argparse.ArgumentParser:
    # `configure` writes the file name of the command it was called as: 1.x scripts that run
    # customer-managed-deployment-agent configure get the 1.x name (discovery finds both).
    file_name = LEGACY_CONFIG_FILE_NAME if prog == LEGACY_COMMAND else CONFIG_FILE_NAME
    parser = argparse.ArgumentParser(
        prog=prog, description="Self-hosted workflow agent for Pulumi workflow runner pools."
    )
    parser.add_argument("--version", action="version", version=_version_text())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser("run", help="poll for workflow jobs and run them")
    run.add_argument(
        "--config", metavar="PATH", help=f"config file (default: discover {CONFIG_FILE_NAME})"
    )

    check = sub.add_parser("check", help="validate the config and print the effective settings")
    check.add_argument("--config", metavar="PATH", help="config file (default: discover)")
    check.add_argument("--format", choices=("text", "json"), default="text")

    conf = sub.add_parser("configure", help=f"write a {file_name}")
    src = conf.add_mutually_exclusive_group()
    src.add_argument("--token-file", metavar="PATH", help="read the pool token from this file")
    src.add_argument("--token-stdin", action="store_true", help="read the pool token from stdin")
    conf.add_argument("--service-url", metavar="URL")
    conf.add_argument("--deploy-target", choices=DEPLOY_TARGETS)
    conf.add_argument(
        "--env-forward-allowlist",
        metavar="NAMES",
        help="host variables forwarded into jobs, comma- or space-separated",
    )
    conf.add_argument("--output", metavar="PATH", default=f"./{file_name}")
    conf.add_argument("--force", action="store_true", help="overwrite an existing file")

    sub.add_parser("version", help="print the version")
    return parser


def _cmd_run(args: argparse.Namespace) -> int:
    try:
        loaded = load_config(args.config)
    except ConfigError as exc:
        return _error(str(exc))
    from workflow_agent import runner  # the runtime is only needed (and imported) for `run`

    return runner.run(loaded)


def _cmd_check(args: argparse.Namespace) -> int:
    try:
        loaded = load_config(args.config)
    except ConfigError as exc:
        return _error(str(exc))
    cfg = loaded.config
    for level, text in loaded.notices:  # stderr: stdout stays the document alone
        print(f"{level}: {text}", file=sys.stderr)
    document = to_document(cfg, include_defaults=True)
    if args.format == "json":
        # One object, the reference's keys (+ extensions), as a config file would spell them.
        print(json.dumps(document, indent=2))
        return 0
    # YAML-readable text: each value JSON-encoded (valid YAML flow), its origin as a comment.
    print(f"# source: {loaded.source or '(no file: defaults and environment only)'}")
    for key, value in document.items():
        print(f"{key}: {json.dumps(value)}  # {loaded.origins.get(key, 'default')}")
    print(f"# effective health_threshold: {format_duration(cfg.effective_health_threshold)}")
    return 0


def _read_token(args: argparse.Namespace) -> str:
    if args.token_file:
        try:
            token = Path(args.token_file).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or "not readable text"
            raise ConfigError(args.token_file, None, f"cannot read token file: {reason}") from None
        where = args.token_file
    elif args.token_stdin:
        token = sys.stdin.readline().strip()
        where = "stdin"
    elif sys.stdin.isatty():
        token = getpass.getpass("Pulumi runner pool token: ").strip()
        where = "prompt"
    else:
        raise ConfigError(
            "configure", None, "no token: use --token-file, --token-stdin or run interactively"
        )
    if not token:
        raise ConfigError(where, None, "the token is empty")
    return token


def _write_private(path: Path, text: str) -> None:
    """Write text to path with mode 0600, atomically (temp file in the same dir, then rename)."""
    directory = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=directory)  # mkstemp creates 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _cmd_configure(args: argparse.Namespace) -> int:
    out = Path(args.output)
    if out.exists() and not args.force:
        return _error(f"{out}: already exists; use --force to overwrite")
    if not out.parent.is_dir():
        return _error(f"{out}: directory {out.parent} does not exist")
    try:
        data: dict = {"token": _read_token(args)}
        if args.service_url:
            data["service_url"] = args.service_url
        if args.deploy_target:
            data["deploy_target"] = args.deploy_target
        if args.env_forward_allowlist is not None:
            data["env_forward_allowlist"] = args.env_forward_allowlist.replace(",", " ").split()
        validate_mapping(data, source=str(out))
    except ConfigError as exc:
        return _error(str(exc))
    if "service_url" in data:
        data["service_url"] = data["service_url"].strip().rstrip("/")
    header = f"# Written by `{PROG} configure`. Settings: see the agent README.\n"
    try:
        _write_private(out, header + yaml.safe_dump(data, sort_keys=False))
    except OSError as exc:
        return _error(f"{out}: cannot write: {exc.strerror or exc}")
    print(f"wrote {out} (mode 0600)", file=sys.stderr)
    return 0


def _prog() -> str:
    """The name the command was called as, when it is one of ours."""
    name = Path(sys.argv[0] or PROG).name
    return name if name in ALIASES else PROG


def main(argv: list[str] | None = None) -> int:
    parser = _parser(_prog())
    args = parser.parse_args(argv)
    if args.command == "run":
        return _cmd_run(args)
    if args.command == "check":
        return _cmd_check(args)
    if args.command == "configure":
        return _cmd_configure(args)
    if args.command == "version":
        print(_version_text())
        return 0
    parser.print_usage(sys.stderr)
    return _error(f"{parser.prog}: a command is required (run, configure, check, version)")
