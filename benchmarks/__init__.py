"""Benchmarks: each prints its figures beside a reference measured in the same run, and none
asserts a timing. ``--quick`` runs every one of them with small sizes in seconds; the test
suite does (tests/system/test_benchmarks.py, and on the dev cluster
tests/integration/test_benchmarks_quick.py), so a rename breaks a test, not a figure nobody
looks at. The full mode prints as before."""

from __future__ import annotations

import sys
from typing import TypeVar

T = TypeVar("T")

#: ``--quick`` on the command line: small sizes, seconds
QUICK = "--quick" in sys.argv[1:]


def sized(full: T, quick: T) -> T:
    """`full` normally, `quick` under ``--quick``."""
    return quick if QUICK else full
