"""Headless `hpcui`: parse arguments, call the core, print. Nothing heavy at import.

`hpcui --help` imports only argparse (no pydantic, paramiko, textual or torch); each
command imports what it needs when it runs.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
import warnings
from collections.abc import Sequence

from hpcui.common.units import UnitWarning
from hpcui.errors import HpcuiError, UsageError

#: Exit codes (docs/cli.md). They follow `HpcuiError.exit_code`, plus 6 for a timeout.
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_CONNECTION = 3
EXIT_SCHEDULER = 4
EXIT_JOB_FAILED = 5
EXIT_TIMEOUT = 6
EXIT_INTERRUPTED = 130

_COMMANDS = {
    "submit": "hpcui.cli.cmd_submit",
    "run": "hpcui.cli.cmd_submit",
    "script": "hpcui.cli.cmd_submit",
    "jobs": "hpcui.cli.cmd_jobs",
    "show": "hpcui.cli.cmd_jobs",
    "logs": "hpcui.cli.cmd_logs",
    "metrics": "hpcui.cli.cmd_metrics",
    "result": "hpcui.cli.cmd_jobs",
    "wait": "hpcui.cli.cmd_jobs",
    "cancel": "hpcui.cli.cmd_jobs",
    "stop": "hpcui.cli.cmd_jobs",
    "hold": "hpcui.cli.cmd_control",
    "release": "hpcui.cli.cmd_control",
    "requeue": "hpcui.cli.cmd_control",
    "update": "hpcui.cli.cmd_control",
    "resubmit": "hpcui.cli.cmd_control",
    "shell": "hpcui.cli.cmd_files",
    "files": "hpcui.cli.cmd_files",
    "download": "hpcui.cli.cmd_files",
    "upload": "hpcui.cli.cmd_files",
    "sync": "hpcui.cli.cmd_files",
    "usage": "hpcui.cli.cmd_usage",
    "top": "hpcui.cli.cmd_usage",
    "quota": "hpcui.cli.cmd_site",
    "modules": "hpcui.cli.cmd_site",
    "partitions": "hpcui.cli.cmd_site",
    "free": "hpcui.cli.cmd_standing",
    "budget": "hpcui.cli.cmd_standing",
    "clusters": "hpcui.cli.cmd_site",
    "profiles": "hpcui.cli.cmd_site",
    "trust": "hpcui.cli.cmd_site",
    "clean": "hpcui.cli.cmd_site",
    "env": "hpcui.cli.cmd_env",
    "exec": "hpcui.cli.cmd_site",
    "serve": "hpcui.cli.cmd_serve",
    "forward": "hpcui.cli.cmd_services",
    "jupyter": "hpcui.cli.cmd_services",
    "tensorboard": "hpcui.cli.cmd_services",
    "agent": "hpcui.cli.cmd_agent",
    "proxy": "hpcui.cli.cmd_nodes",
    "ssh-config": "hpcui.cli.cmd_nodes",
    "code": "hpcui.cli.cmd_nodes",
    "mcp": "hpcui.cli.cmd_mcp",
    "init": "hpcui.cli.cmd_add",
    "add": "hpcui.cli.cmd_add",
    "sweep": "hpcui.cli.cmd_sweep",
    "track": "hpcui.cli.cmd_track",
}


def exit_code_for(exc: BaseException) -> int:
    """The documented exit code of an error (HpcuiError.exit_code: WaitTimeout's is 6)."""

    if isinstance(exc, HpcuiError):
        return exc.exit_code
    return EXIT_ERROR


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `hpcui` script; returns the exit code."""
    from hpcui.cli.parser import (
        attach_dashed_values,
        shared_parser,
    )

    words = attach_dashed_values(list(sys.argv[1:] if argv is None else argv))
    args = shared_parser().parse_args(words)  # usage errors: message + exit 2 (argparse)
    try:
        return _dispatch(args)
    except KeyboardInterrupt:
        print("hpcui: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `hpcui jobs | head`: the reader left, not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except Exception as exc:
        if args.debug:
            raise

        if isinstance(exc, UnicodeEncodeError) and "surrogates" in str(exc.reason):
            bad = exc.object[exc.start : exc.end] if isinstance(exc.object, str) else ""
            shown = bad.encode("utf-8", "surrogateescape") if bad else b""
            exc = UsageError(
                f"An argument holds bytes that are not UTF-8 text ({shown!r}): job ids, "
                "names and options must be text. Check the command line (a pasted id?)."
            )
        if isinstance(exc, HpcuiError):
            print(f"hpcui: {exc}", file=sys.stderr)
        else:
            print(
                f"hpcui: unexpected {type(exc).__name__}: {exc}. Re-run with --debug for the "
                "traceback and report it.",
                file=sys.stderr,
            )
        return exit_code_for(exc)
    finally:
        from hpcui.cli import common

        common.close_all()


def _logging(debug: bool) -> None:
    """Library code logs, the CLI prints. Without --debug the logs stay silent (else
    Python's last-resort handler would repeat every error as a warning on stderr)."""

    if debug:
        logging.basicConfig(level=logging.WARNING, format="%(name)s %(levelname)s: %(message)s")
        logging.getLogger("hpcui").setLevel(logging.DEBUG)
    elif not any(isinstance(h, logging.NullHandler) for h in logging.getLogger().handlers):
        logging.getLogger().addHandler(logging.NullHandler())  # once (the agent calls often)


def _say_warnings() -> None:
    """hpcui's own warnings (a value read the old way) as one `hpcui: warning:` line on
    stderr, not Python's file:line form; every other warning as Python shows it."""

    shown = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, UnitWarning):
            print(f"hpcui: warning: {message}", file=sys.stderr)
        else:
            shown(message, category, filename, lineno, file, line)

    warnings.showwarning = show


def _dispatch(args: argparse.Namespace) -> int:
    _logging(args.debug)
    _say_warnings()
    if args.command is None:
        from hpcui.tui.app import run_app

        run_app(args.cluster)
        return EXIT_OK
    if args.command == "completion":
        from hpcui.cli.completion import script

        sys.stdout.write(script(args.shell))
        return EXIT_OK
    if getattr(args, "json_schema", False):
        from hpcui.cli.models import print_schema

        print_schema(args)
        return EXIT_OK

    module = importlib.import_module(_COMMANDS[args.command])
    return int(getattr(module, f"cmd_{args.command.replace('-', '_')}")(args))
