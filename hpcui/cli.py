"""Headless commands. Thin: parse arguments, call the core, print. Imports stay lazy."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="hpcui",
        description="Drive Slurm/PBS supercomputers from your laptop. With no command, opens the app.",
    )
    p.add_argument(
        "--cluster", "-c", help="cluster name from the config (default: the configured default)"
    )
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    s = sub.add_parser("clusters", help="list configured clusters")
    s.add_argument("--json", action="store_true")
    s = sub.add_parser("jobs", help="jobs hpcui submitted (from the local registry)")
    s.add_argument("--json", action="store_true")
    s = sub.add_parser(
        "trust", help="accept a cluster's SSH host key after checking its fingerprint"
    )
    s.add_argument("name", help="cluster name")
    s.add_argument(
        "--yes", action="store_true", help="accept without asking (fingerprint still printed)"
    )
    s = sub.add_parser("run", help="run a shell command on the login node")
    s.add_argument("cmd", nargs=argparse.REMAINDER)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from hpcui.errors import HpcuiError

    try:
        return _dispatch(args)
    except HpcuiError as exc:
        if args.debug:
            raise
        print(f"hpcui: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


def _dispatch(args: argparse.Namespace) -> int:
    if args.command is None:
        from hpcui.tui.app import run_app

        run_app(args.cluster)
        return 0
    if args.command == "clusters":
        from hpcui.config import load_config

        cfg = load_config()
        rows = [
            {
                "name": n,
                "host": c.host or "(this machine)",
                "profile": c.profile or "",
                "default": n == (cfg.default or "local"),
            }
            for n, c in sorted(cfg.clusters.items())
        ]
        if args.json:
            print(json.dumps(rows, indent=2))
        else:
            for r in rows:
                print(
                    f"{'*' if r['default'] else ' '} {r['name']:<16} {r['host']:<24} {r['profile']}"
                )
        return 0
    if args.command == "jobs":
        from hpcui.registry import Registry

        recs = Registry().list(args.cluster)
        if args.json:
            print(json.dumps([r.model_dump(exclude={"meta"}) for r in recs], indent=2))
        else:
            for r in recs:
                print(f"{r.cluster:<12} {r.job_id or '-':<14} {r.state.value:<11} {r.name}")
        return 0
    if args.command == "trust":
        return _trust(args.name, args.yes)
    if args.command == "run":
        res = _connect(args.cluster).run(args.cmd)
        sys.stdout.write(res.stdout)
        sys.stderr.write(res.stderr)
        return res.exit_status
    raise AssertionError(args.command)


def _terminal_prompt(title: str, instructions: str, prompts: list[tuple[str, bool]]) -> list[str]:
    """Keyboard-interactive (2FA) answers from the terminal; nothing is echoed or kept."""
    import getpass

    if instructions.strip():
        print(instructions.strip(), file=sys.stderr)
    return [input(q) if echo else getpass.getpass(q) for q, echo in prompts]


def _connect(name: str | None, **kwargs: object):  # type: ignore[no-untyped-def]
    """A cluster that can ask 2FA questions when a person is at the terminal, else fails clearly."""
    from hpcui.api import connect

    prompt = _terminal_prompt if sys.stdin.isatty() else None
    return connect(name, prompt=prompt, **kwargs)


def _trust(name: str, yes: bool) -> int:
    def ask(host: str, key_type: str, fingerprint: str) -> bool:
        print(f"{host} offers {key_type} key {fingerprint}")
        if yes:
            return True
        if not sys.stdin.isatty():
            print(
                "hpcui: not a terminal; re-run with --yes after checking the fingerprint",
                file=sys.stderr,
            )
            return False
        return input("Is this the fingerprint your site publishes? [y/N] ").strip().lower() == "y"

    _connect(name, on_unknown_host=ask).run("true").check("connection test")
    print(f"{name}: host key trusted, connection works")
    return 0


if __name__ == "__main__":
    sys.exit(main())
