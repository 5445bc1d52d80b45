"""LogFollower: incremental offset reads through a transport (LocalTransport, real files)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from hpcui.errors import UsageError
from hpcui.logs.follow import LogFollower, LogTimeout, ProgressLines, follow_many, log_path
from hpcui.transport.local import LocalTransport


class CountingTransport(LocalTransport):
    """Counts bytes handed out by read_file and the calls made."""

    def __init__(self) -> None:
        self.read_bytes = 0
        self.reads = 0
        self.stats = 0

    def read_file(self, path: str, *, offset: int = 0, length: int | None = None) -> bytes:
        data = super().read_file(path, offset=offset, length=length)
        self.read_bytes += len(data)
        self.reads += 1
        return data

    def stat_size(self, path: str) -> int | None:
        self.stats += 1
        return super().stat_size(path)


def append(path: Path, text: str | bytes) -> None:
    with open(path, "ab") as fh:
        fh.write(text.encode() if isinstance(text, str) else text)


def test_log_path_follows_submitits_layout() -> None:
    assert log_path("/r/jobs/abc", "123_4", 2, "stderr") == "/r/jobs/abc/123_4_2_log.err"
    with pytest.raises(UsageError, match="stdout"):
        log_path("/r", "1", 0, "both")  # type: ignore[arg-type]


def test_incremental_reads_never_read_a_byte_twice(tmp_path: Path) -> None:
    path = tmp_path / "1_0_log.out"
    t = CountingTransport()
    f = LogFollower(t, str(path))
    assert f.read() == "" and not f.exists  # pending job: no file yet
    append(path, "a\nb")
    assert f.read() == "a\nb"
    assert f.read() == ""  # nothing new: a stat, no read
    reads = t.reads
    append(path, "\nc\n")
    assert f.read() == "\nc\n"
    assert t.reads == reads + 1
    assert t.read_bytes == path.stat().st_size == f.offset == f.bytes_read


def test_big_log_is_read_in_bounded_chunks(tmp_path: Path) -> None:
    path = tmp_path / "big.out"
    line = "x" * 99 + "\n"
    path.write_text(line * 5000)  # 500 kB
    t = CountingTransport()
    f = LogFollower(t, str(path), chunk_bytes=64 * 1024)
    chunks = list(f.drain())
    assert "".join(chunks) == line * 5000
    assert max(len(c) for c in chunks) <= 64 * 1024
    assert t.reads == 8  # ceil(500000 / 65536)
    assert t.read_bytes == 500_000  # exactly once


def test_tail_bytes_skips_to_the_last_lines(tmp_path: Path) -> None:
    path = tmp_path / "big.out"
    path.write_text("".join(f"line {i}\n" for i in range(100_000)))
    t = CountingTransport()
    f = LogFollower(t, str(path), tail_bytes=40)
    text = "".join(f.drain())
    assert text == "line 99997\nline 99998\nline 99999\n"
    assert t.read_bytes == 40
    append(path, "after\n")
    assert f.read() == "after\n"


def test_truncation_restarts_from_zero(tmp_path: Path) -> None:
    path = tmp_path / "log.out"
    path.write_text("old line 1\nold line 2\n")
    f = LogFollower(LocalTransport(), str(path))
    assert f.read() == "old line 1\nold line 2\n"
    path.write_text("new\n")  # truncated and rewritten, shorter
    assert f.read() == "new\n"
    assert f.restarts == 1 and f.offset == 4


def test_multibyte_characters_split_across_reads(tmp_path: Path) -> None:
    path = tmp_path / "utf8.out"
    data = "épochs ✓ done\n".encode()
    f = LogFollower(LocalTransport(), str(path), chunk_bytes=1)
    out = []
    for i in range(len(data)):
        append(path, data[i : i + 1])
        out.append(f.read())
    assert "".join(out) == "épochs ✓ done\n"


def test_spool_resumes_without_rereading(tmp_path: Path) -> None:
    path = tmp_path / "log.out"
    spool = tmp_path / "spool" / "1_0.out"
    path.write_text("first\n")
    f1 = LogFollower(LocalTransport(), str(path), spool=spool)
    assert f1.read() == "first\n"
    append(path, "second\n")
    t = CountingTransport()
    f2 = LogFollower(t, str(path), spool=spool)  # e.g. after a reconnect, or a new process
    assert f2.read() == "first\n"  # replayed from the local spool...
    assert t.read_bytes == 0
    assert f2.read() == "second\n"  # ...then only the new bytes travel
    assert t.read_bytes == len("second\n")
    assert spool.read_text() == "first\nsecond\n"
    assert oct(spool.stat().st_mode & 0o777) == "0o600"
    (tmp_path / "other.out").write_text("other\n")
    other = LogFollower(LocalTransport(), str(tmp_path / "other.out"), spool=spool)
    assert other.offset == 0  # the spool belongs to another file: not resumed...
    assert other.read() == "other\n"
    assert spool.read_text() == "other\n"  # ...and its first write starts the spool afresh


def test_two_followers_of_one_file_never_spool_its_bytes_twice(tmp_path: Path) -> None:
    path = tmp_path / "log.out"
    spool = tmp_path / "spool" / "1_0.out"
    path.write_text("a\n")
    app = LogFollower(LocalTransport(), str(path), spool=spool)
    assert app.read() == "a\n"
    cli = LogFollower(LocalTransport(), str(path), spool=spool)  # resumes: replays "a\n"
    assert cli.read() == "a\n"
    append(path, "b\n")
    assert app.read() == "b\n" and cli.read() == "b\n"  # both see it...
    append(path, "c\n")
    assert cli.read() == "c\n" and app.read() == "c\n"
    assert spool.read_text() == "a\nb\nc\n"  # ...the spool holds it once


def test_spool_replay_keeps_only_the_tail(tmp_path: Path) -> None:
    path = tmp_path / "big.out"
    spool = tmp_path / "spool" / "big.log"
    path.write_text("".join(f"line {i}\n" for i in range(1000)))
    f1 = LogFollower(LocalTransport(), str(path), spool=spool, chunk_bytes=512)
    assert "".join(f1.drain()).count("\n") == 1000
    f2 = LogFollower(CountingTransport(), str(path), spool=spool, tail_bytes=100, chunk_bytes=64)
    replay = "".join(iter(f2.read, ""))
    assert replay.endswith("line 999\n") and replay.startswith("line 9")  # whole lines
    assert len(replay) <= 100
    assert f2.transport.read_bytes == 0


def test_follow_yields_lines_in_order_until_done(tmp_path: Path) -> None:
    path = tmp_path / "run.out"
    finished = threading.Event()

    def writer() -> None:
        for i in range(20):
            append(path, f"line {i}\n")
            time.sleep(0.01)
        finished.set()

    t = CountingTransport()
    threading.Thread(target=writer).start()
    text = "".join(LogFollower(t, str(path)).follow(finished.is_set, fast_s=0.005, timeout=10))
    assert text.splitlines() == [f"line {i}" for i in range(20)]
    assert t.read_bytes == path.stat().st_size


def test_follow_many_per_rank(tmp_path: Path) -> None:
    t = LocalTransport()
    followers = {}
    for rank in range(3):
        p = tmp_path / f"9_{rank}_log.out"
        p.write_text(f"rank {rank}\n")
        followers[rank] = LogFollower(t, str(p))
    chunks = list(follow_many(followers, None))  # no done(): read what is there once
    assert [(c.task, c.text, c.offset) for c in chunks] == [
        (0, "rank 0\n", 0),
        (1, "rank 1\n", 0),
        (2, "rank 2\n", 0),
    ]


def test_follow_timeout_says_what_to_do(tmp_path: Path) -> None:
    f = LogFollower(LocalTransport(), str(tmp_path / "never.out"))
    with pytest.raises(LogTimeout, match="has not ended"):
        list(f.follow(lambda: False, fast_s=0.01, slow_s=0.02, timeout=0.1))


def test_progress_bars_collapse_to_their_last_state() -> None:
    p = ProgressLines()
    assert p.feed("epoch 1\n  0%|     |\r 50%|##   |") == ["epoch 1"]
    assert p.current == " 50%|##   |"
    assert p.feed("\r100%|#####|\n") == ["100%|#####|"]
    assert p.feed("done\r\n") == ["done"]
    assert p.current == ""


def test_tails_notices_are_known_by_the_mark_in_the_name_it_was_given():
    from hpcui.logs.push import NoticeCutter, new_token, push_command, spelled

    token = new_token()
    assert len({new_token() for _ in range(20)}) == 20
    assert os.path.normpath(spelled("/x/y/1_0_log.out", token)) == "/x/y/1_0_log.out"
    assert os.path.normpath(spelled("jobs/1_0_log.out", token)) == "jobs/1_0_log.out"
    cmd = push_command("/x/my log", 41, token)
    assert b"-c +42 -F" in cmd and token.encode() in cmd and b"2>&1" in cmd

    cut = NoticeCutter("/x/log", token)
    name = spelled("/x/log", token).encode()
    # the job's own lines that look like tail's are the file's bytes
    job = b"detail: tail: the list\ntail: /x/log: file truncated\n"
    assert cut.feed(job) == (job, None)
    # a notice mid-line, cut across reads: the bytes before it, then the notice alone
    assert cut.feed(b"partial tail: " + name[:9]) == (b"partial ", None)
    data, notice = cut.feed(name[9:] + b": file truncated\nnew file\n")
    assert data == b"" and notice is not None and notice.resync
    assert notice.text == b"tail: " + name + b": file truncated\n"
    assert cut.feed(b"") == (b"new file\n", None)  # what follows a notice: the next call
    quoted = NoticeCutter("/x/log", token)
    got = quoted.feed(b"a\ntail: '" + name + b"' has been replaced;  following new file\nb")
    assert got[0] == b"a\n" and got[1] is not None and got[1].resync
    gone = NoticeCutter("/x/log", token).feed(b"tail: '" + name + b"' has become inaccessible\n")
    assert gone[1] is not None and gone[1].named and not gone[1].resync  # tail goes on
    # tail's words that name no file end the reader too (polls read on from the file)
    data, notice = NoticeCutter("/x/log", token).feed(b"x\ntail: inotify resources exhausted\n")
    assert data == b"x\n" and notice is not None and not notice.named
    held = NoticeCutter("/x/log", token)
    assert held.feed(b"ends with ta") == (b"ends with ", None)  # may begin a notice
    assert held.feed(b"ble\n") == (b"table\n", None)


def _read_all(transport, path: Path, spool: Path) -> bytes:
    """One `hpcui logs` of an ended job: every chunk a fresh follower gives, as bytes."""
    f = LogFollower(transport, str(path), spool=spool)
    return "".join(c.text for c in follow_many({0: f})).encode()


def test_a_log_read_again_from_its_spool_is_whole(tmp_path: Path) -> None:
    """The spool's replay is one chunk; the read must go on to the remote end (it once
    stopped there: 1 MiB of a 3 MB log, 7 of 12 lines of a short one)."""
    path = tmp_path / "1_0_log.out"
    spool = tmp_path / "spool" / "1_0.out"
    path.write_bytes(b"".join(b"line %06d of a long log\n" % i for i in range(120_000)))
    assert path.stat().st_size > 2 * (1 << 20)
    first = _read_all(LocalTransport(), path, spool)
    assert first == path.read_bytes()
    t = CountingTransport()
    second = _read_all(t, path, spool)  # replayed from the spool: nothing read remotely
    assert second == path.read_bytes() and t.read_bytes == 0
    with open(path, "ab") as fh:  # still running: more after the spool's end
        fh.write(b"tail line\n")
    assert _read_all(LocalTransport(), path, spool) == path.read_bytes()


def test_a_short_log_read_while_running_then_after_its_end(tmp_path: Path) -> None:
    path = tmp_path / "2_0_log.out"
    spool = tmp_path / "spool" / "2_0.out"
    path.write_text("".join(f"line {i}\n" for i in range(7)))
    assert _read_all(LocalTransport(), path, spool) == path.read_bytes()
    append(path, "".join(f"line {i}\n" for i in range(7, 12)))
    assert _read_all(LocalTransport(), path, spool).decode().count("\n") == 12


def test_a_follow_interrupted_midway_then_a_plain_read(tmp_path: Path) -> None:
    path = tmp_path / "3_0_log.out"
    spool = tmp_path / "spool" / "3_0.out"
    path.write_bytes(b"x" * 100 + b"\n" + b"y" * (3 << 20) + b"\n")
    f = LogFollower(LocalTransport(), str(path), spool=spool, chunk_bytes=4096)
    chunks = follow_many({0: f}, done=lambda: False, fast_s=0.001, slow_s=0.001)
    for _ in range(3):  # `logs -f` interrupted after three chunks
        next(chunks)
    chunks.close()
    assert 0 < f.offset < path.stat().st_size
    assert _read_all(LocalTransport(), path, spool) == path.read_bytes()
