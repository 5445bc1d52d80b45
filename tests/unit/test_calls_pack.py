"""An array's calls in one file (job_paths.pack_calls): each element reads only its own
bytes; a cut or foreign file is refused, never read as another element's call."""

from __future__ import annotations

import io

import pytest

from hpcui.backends.job_paths import (
    SIGNATURE_TRAILER,
    pack_calls,
    read_call,
    split_signature,
)


def test_every_element_reads_back_its_own_bytes():
    calls = [b"", b"a", bytes(range(256)) * 40, b"last"]
    pack = pack_calls(calls)
    for i, data in enumerate(calls):
        assert read_call(io.BytesIO(pack), i) == data


@pytest.mark.parametrize("index", [-1, 4, 10_000])
def test_an_index_outside_the_pack_is_refused(index):
    with pytest.raises(ValueError, match="not in the pack"):
        read_call(io.BytesIO(pack_calls([b"a", b"b", b"c", b"d"])), index)


@pytest.mark.parametrize("cut", [0, 5, 20, 40, -1])
def test_a_cut_pack_is_refused(cut):
    pack = pack_calls([b"first", b"second"])
    with pytest.raises(ValueError, match=r"header|cut short"):
        read_call(io.BytesIO(pack[:cut]), 1)


def test_the_signature_trailer_splits_off_exactly():
    body = b"\x80\x04pickle-bytes" + SIGNATURE_TRAILER  # a body that contains the marker
    sig = "ab" * 32
    assert split_signature(body + SIGNATURE_TRAILER + sig.encode() + b"\n") == (body, sig)
    assert split_signature(b"plain pickle") == (b"plain pickle", None)
    assert split_signature(b"x" + SIGNATURE_TRAILER + b"short\n")[1] is None
