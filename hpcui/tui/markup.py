"""Text from outside (a runtime's lines, a job's reason, a path) placed inside markup.

Rich's `escape` protects only tags that start with a lower-case letter, but Textual's markup
also takes `[INFO]` (enroot's prefix) or `[E]` as a tag and drops it: every `[` is escaped.
"""

from __future__ import annotations


def escape(text: str) -> str:
    """`text` shown as it is inside Textual markup. A trailing backslash gets a space after
    it, or it would escape the closing tag that follows."""
    out = text.replace("[", "\\[")
    return out + " " if out.endswith("\\") else out
