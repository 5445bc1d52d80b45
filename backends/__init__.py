"""Scheduler dialects as pure functions: text in, typed objects out.

Nothing here does I/O, opens SSH, or imports ``hpcui``: that keeps every parser
testable on verbatim captured outputs.
"""
