"""submit, run, script: a new job (or the script it would be), from the command line."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcui.cli import EXIT_OK
from hpcui.cli import output as out
from hpcui.cli.common import cluster_name, connect, resource_kwargs

if TYPE_CHECKING:
    from hpcui.cluster import Cluster
    from hpcui.job import Job


def _usage(message: str) -> Exception:
    from hpcui.errors import UsageError

    return UsageError(message)


def load_function(spec: str) -> Callable[..., Any]:
    """`pkg.mod:func`, `mod:Class.method` or `path/to/file.py:func`, imported locally.

    The current directory is importable (as with `python -m`); the function's own code
    then travels with the job by value, so the cluster needs none of your files.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise _usage(f"Expected MODULE:FUNCTION (e.g. train:main), got {spec!r}.")
    try:
        if module_name.endswith(".py"):
            path = Path(module_name)
            if not path.is_file():
                raise _usage(f"No such file: {module_name}.")
            name = path.stem
            mod_spec = importlib.util.spec_from_file_location(name, path)
            assert mod_spec is not None and mod_spec.loader is not None
            module = importlib.util.module_from_spec(mod_spec)
            sys.modules[name] = module
            sys.path.insert(0, str(path.resolve().parent))
            mod_spec.loader.exec_module(module)
        else:
            if "" not in sys.path and os.getcwd() not in sys.path:
                sys.path.insert(0, os.getcwd())
            module = importlib.import_module(module_name)
    except Exception as exc:
        if type(exc).__name__ == "UsageError":
            raise
        raise _usage(
            f"Cannot import {module_name!r}: {type(exc).__name__}: {exc}. Run hpcui from the "
            "directory that contains it, or install it."
        ) from exc
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise _usage(f"{module_name!r} has no attribute {attr!r}.")
        obj = getattr(obj, part)
    if not callable(obj):
        raise _usage(f"{spec} is a {type(obj).__name__}, not a function.")
    return obj


def _json_arg(text: str, what: str, kind: type) -> Any:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _usage(f"--{what} is not valid JSON ({exc}): {text!r}.") from None
    if not isinstance(value, kind):
        want = (
            "a JSON list, e.g. '[1, \"a\"]'"
            if kind is list
            else "a JSON object, e.g. '{\"lr\": 0.1}'"
        )
        raise _usage(f"--{what} must be {want}, got {type(value).__name__}.")
    return value


def cmd_submit(args: argparse.Namespace) -> int:
    call_args = _json_arg(args.args, "args", list)
    call_kwargs = _json_arg(args.kwargs, "kwargs", dict)
    fn = load_function(args.function)
    cluster = connect(cluster_name(args))
    return _submit(args, cluster, fn, call_args, call_kwargs, resource_kwargs(args))


def cmd_run(args: argparse.Namespace) -> int:
    from hpcui.compute.runscript import run_script

    path = Path(args.script)
    if not path.is_file():
        raise _usage(f"No such script: {args.script}.")
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise _usage(f"Cannot read {args.script}: {exc}.") from None
    try:
        compile(source, str(path), "exec")  # a syntax error fails here, not after the queue
    except SyntaxError as exc:
        raise _usage(f"{args.script} does not compile: {exc}.") from None
    script_args = list(args.script_args)
    if script_args[:1] == ["--"]:
        script_args = script_args[1:]
    res = resource_kwargs(args)
    res.setdefault("name", path.stem)
    cluster = connect(cluster_name(args))
    return _submit(args, cluster, run_script, [source, path.name, script_args], {}, res)


def _submit(
    args: argparse.Namespace,
    cluster: Cluster,
    fn: Callable[..., Any],
    call_args: list[Any],
    call_kwargs: dict[str, Any],
    res: dict[str, Any],
) -> int:
    from hpcui.cli.cmd_jobs import collect_result, print_result
    from hpcui.cli.models import SubmitOutput
    from hpcui.resources import explain

    alloc = cluster.plan(
        **res
    )  # validated before the network; advice is shown, not printed by core
    summary, *rest = explain(alloc).splitlines()
    advice = [a.message for a in alloc.advice]
    if not args.json and not args.quiet:
        for line in rest:
            (out.warn if line.startswith("advice:") else out.note)(line)
    job = cluster.submit(fn, *call_args, kwargs=call_kwargs, **res)
    record = SubmitOutput(
        cluster=cluster.name,
        job_id=job.job_id,
        name=job.name,
        folder=job.folder,
        num_tasks=job.num_tasks,
        state=job.state,
        allocation=summary,
        advice=advice,
    )
    if args.quiet and not args.json:
        print(job.job_id, flush=True)
    elif not args.json:
        print(f"submitted job {job.job_id} on {cluster.name} ({job.name}: {summary})", flush=True)
    if not (args.wait or args.follow):
        if args.json:
            out.emit_json(SubmitOutput, record)
        return EXIT_OK
    if args.follow:
        # the log goes where it does not break the JSON document on stdout
        target = sys.stderr if args.json else sys.stdout
        for text in job.follow("stdout", timeout=args.timeout):
            target.write(text)
            target.flush()
    else:
        _progress(job, args.timeout, quiet=args.quiet or args.json)
    result, code = collect_result(job, args.timeout)
    record.result = result
    record.state = result.state
    if args.json:
        out.emit_json(SubmitOutput, record)
    elif not args.quiet and args.command == "submit":  # `run` returns 0: nothing to show
        print_result(result)
    return code


def _progress(job: Job, timeout: float | None, *, quiet: bool) -> None:
    """State and elapsed time on stderr until the job ends: one line rewritten on a
    terminal, a line per state change otherwise (CI logs). The status service polls
    adaptively in the background; this loop only reads its answer."""
    from hpcui.errors import JobTimeoutError

    tty = sys.stderr.isatty()
    start = time.monotonic()
    last = None
    while True:
        state = job.state
        elapsed = time.monotonic() - start
        if not quiet:
            line = f"{job.job_id} {state.value} {out.duration(elapsed)}"
            if tty:
                shown = out.state(state.value, sys.stderr)
                sys.stderr.write(f"\r{job.job_id} {shown} {out.duration(elapsed)}\x1b[K")
                sys.stderr.flush()
            elif state != last:
                print(line, file=sys.stderr, flush=True)
        last = state
        if state.is_final:
            break
        if timeout is not None and elapsed >= timeout:
            if tty and not quiet:
                sys.stderr.write("\n")
            raise JobTimeoutError(
                f"Job {job.job_id} on {job.cluster.name} is still {state.value} after {timeout:g} s. "
                f"`hpcui result {job.job_id}` waits again; `hpcui cancel {job.job_id}` ends it.",
                job_id=job.job_id,
            )
        time.sleep(0.5)
    if tty and not quiet:
        sys.stderr.write("\n")


def cmd_script(args: argparse.Namespace) -> int:
    from hpcui.cli.models import ScriptOutput
    from hpcui.resources import batch_spec, explain

    cluster = connect(cluster_name(args))
    alloc = cluster.plan(**resource_kwargs(args))
    # placeholders for what only a submit knows: the probed home, the token, the bundle hash
    base = cluster.config.remote_base.rstrip("/").replace("~", "HOME", 1).replace("$HOME", "HOME")
    spec = batch_spec(
        alloc,
        folder=f"{base}/jobs/TOKEN",
        token="TOKEN",
        array_size=args.array,
        python=cluster.python,
        setup=cluster.setup,
        pythonpath=(f"{base}/runtime/BUNDLE.zip",),
    )
    text = cluster.scheduler.render_script(spec)
    summary = explain(alloc)
    if args.json:
        out.emit_json(
            ScriptOutput,
            ScriptOutput(cluster=cluster.name, allocation=alloc, summary=summary, script=text),
        )
        return EXIT_OK
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    sys.stdout.flush()
    for line in summary.splitlines():
        (out.warn if line.startswith("advice:") else out.note)(f"# {line}")
    return EXIT_OK
