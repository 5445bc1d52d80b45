"""Pushed log following (`tail -F` per file on the login node) against the dev cluster's
real sshd: what is written arrives once, in order, through truncation, rotation, a dropped
link and eight files at once; the readers do not outlive the follow; no polling while
the reader pushes."""

from __future__ import annotations

import shlex
import subprocess
import threading
import time
import uuid

import pytest

from hpcui.logs.follow import LogFollower
from hpcui.logs.push import follow_pushed
from hpcui.transport.ssh.session import SshTransport
from tests.conftest import DEVCLUSTER

pytestmark = pytest.mark.devcluster


def _transport() -> SshTransport:
    return SshTransport.from_config(
        "hpcui-dev", ssh_config=str(DEVCLUSTER / "ssh" / "config"), login_shell=False
    )


class Follow:
    """follow_pushed in a thread: the text it delivers per task, until `stop()`."""

    def __init__(self, followers: dict[int, LogFollower]) -> None:
        self.text = dict.fromkeys(followers, "")
        self._done = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(followers,))
        self.thread.start()

    def _run(self, followers: dict[int, LogFollower]) -> None:
        try:
            for chunk in follow_pushed(followers, self._done.is_set, timeout=60):
                self.text[chunk.task] += chunk.text
        except BaseException as exc:  # the test reports it
            self.error = exc

    def wait_for(self, task: int, text: str, seconds: float = 10) -> None:
        ends = time.monotonic() + seconds
        while text not in self.text[task]:
            if time.monotonic() > ends or self.error:
                raise AssertionError(f"{text!r} never arrived: {self.text[task]!r} {self.error}")
            time.sleep(0.02)

    def stop(self) -> dict[int, str]:
        self._done.set()
        self.thread.join(timeout=30)
        assert not self.thread.is_alive() and self.error is None, self.error
        return self.text


@pytest.fixture
def link():
    reader, writer = _transport(), _transport()
    path = f"/tmp/hpcui-push-{uuid.uuid4().hex[:8]}"
    yield reader, writer, path
    writer.run(f"rm -f {path}*")
    reader.close()
    writer.close()


def _readers(writer: SshTransport, path: str) -> list[str]:
    name = path.rsplit("/", 1)[1]  # tail is given the path spelled with its reader's mark
    return writer.run(f"pgrep -f 'tail -s 0.2 -c .* -F -- .*/{name}' || true").stdout.split()


def test_lines_are_pushed_without_polls_and_the_reader_ends_with_the_follow(link):
    reader, writer, path = link
    writer.run(f"printf 'first\\n' > {path}").check()
    stats = []
    original = reader.stat_size
    reader.stat_size = lambda p: stats.append(p) or original(p)  # type: ignore[method-assign]
    follow = Follow({0: LogFollower(reader, path)})
    follow.wait_for(0, "first\n")
    polls_before = len(stats)
    for i in range(20):
        writer.run(f"printf 'line {i}\\n' >> {path}").check()
        time.sleep(0.03)
    follow.wait_for(0, "line 19\n")
    assert len(stats) == polls_before  # pushed: not one stat while the reader ran
    assert _readers(writer, path)  # a tail on the login node, one per file
    text = follow.stop()[0]
    assert text == "first\n" + "".join(f"line {i}\n" for i in range(20))
    for _ in range(40):  # its channel closed: cat saw EOF and killed tail
        if not _readers(writer, path):
            break
        time.sleep(0.05)
    assert not _readers(writer, path)


def test_truncation_and_rotation_are_followed(link):
    reader, writer, path = link
    writer.run(f"printf 'a\\nb\\n' > {path}").check()
    follow = Follow({0: LogFollower(reader, path)})
    follow.wait_for(0, "b\n")
    writer.run(f": > {path}; sleep 0.3; printf 'c\\n' >> {path}").check()  # truncated
    follow.wait_for(0, "c\n")
    writer.run(f"mv {path} {path}.1; printf 'd\\n' > {path}").check()  # rotated
    follow.wait_for(0, "d\n")
    writer.run(f"printf 'e\\n' >> {path}").check()
    follow.wait_for(0, "e\n")
    assert follow.stop()[0] == "a\nb\nc\nd\ne\n"


def test_a_file_truncated_before_its_reader_starts_is_read_once(link):
    """Cut and rewritten between the last poll and the reader's start: tail says so and
    sends the new bytes; they once arrived before its notice (sshd sends stdout first, and
    the notice was on stderr) and came twice."""
    reader, writer, path = link
    writer.run(f"printf 'a\\nb\\n' > {path}").check()
    f = LogFollower(reader, path)
    assert f.read() == "a\nb\n"
    pushed: list[list[bytes]] = []  # per reader, what it pushed
    original = reader.open_stream

    def open_after_the_cut(cmd):
        if not pushed:  # the first reader only
            writer.run(f": > {path}; printf 'c\\n' >> {path}").check()
        stream, got = original(cmd), []
        pushed.append(got)
        read = stream.read

        def recorded():
            data, err = read()
            got.append(data)
            return data, err

        stream.read = recorded
        return stream

    reader.open_stream = open_after_the_cut  # type: ignore[method-assign]
    follow = Follow({0: f})
    follow.wait_for(0, "c\n")
    writer.run(f"printf 'd\\n' >> {path}").check()
    follow.wait_for(0, "d\n")
    assert follow.stop()[0] == "c\nd\n"
    assert f.restarts == 1 and f.offset == 4
    first = b"".join(pushed[0])  # the notice, in order with the bytes: nothing taken
    assert b": file truncated\n" in first, first
    # the new bytes follow the notice in the first stream, or (the reader restarted on the
    # notice before tail read them: a loaded machine) in the second one; the follower took
    # them once either way (stop() above)
    assert len(pushed) == 2
    after = first.split(b": file truncated\n", 1)[1] + b"".join(pushed[1])
    assert b"c\n" in after, pushed


def test_a_dropped_link_loses_and_doubles_nothing(link):
    reader, writer, path = link
    writer.run(f"printf 'before\\n' > {path}").check()
    follow = Follow({0: LogFollower(reader, path)})
    follow.wait_for(0, "before\n")
    session = reader.run("echo $PPID").stdout.strip()
    subprocess.run(["kill", "-9", session], check=False)
    writer.run(f"printf 'during\\n' >> {path}").check()
    time.sleep(0.5)
    writer.run(f"printf 'after\\n' >> {path}").check()
    follow.wait_for(0, "after\n", 20)
    assert follow.stop()[0] == "before\nduring\nafter\n"
    assert reader.connects == 2


def test_eight_ranks_on_one_connection(link):
    reader, writer, path = link
    paths = [f"{path}.{r}" for r in range(8)]
    writer.run("; ".join(f": > {p}" for p in paths)).check()
    follow = Follow({r: LogFollower(reader, p) for r, p in enumerate(paths)})
    for step in range(3):
        writer.run(
            "; ".join(f"printf 'rank {r} step {step}\\n' >> {p}" for r, p in enumerate(paths))
        )
        time.sleep(0.1)
    for r in range(8):
        follow.wait_for(r, f"rank {r} step 2\n")
    text = follow.stop()
    assert all(text[r] == "".join(f"rank {r} step {s}\n" for s in range(3)) for r in range(8))
    assert reader.connects == 1


def test_output_that_looks_like_tails_notices_is_output(link):
    """A job may print "tail: " (even inside "detail: ") or a line like tail's own notice of
    a truncated file: it is shown as printed, once, and the follow does not restart."""
    reader, writer, path = link
    writer.run(f"printf 'start\\n' > {path}").check()
    f = LogFollower(reader, path)
    follow = Follow({0: f})
    follow.wait_for(0, "start\n")
    lines = [
        "detail: tail: the end of the list",
        f"tail: {path}: file truncated",
        "tail: '/x' has appeared;  following new file",
        "after the notices",
    ]
    for line in lines:
        writer.run(f"printf '%s\\n' {shlex.quote(line)} >> {path}").check()
        time.sleep(0.05)
    follow.wait_for(0, "after the notices\n")
    text = follow.stop()[0]
    assert text == "start\n" + "".join(f"{line}\n" for line in lines)
    assert f.restarts == 0 and f.offset == len(text.encode())
