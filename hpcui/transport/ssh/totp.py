"""Unattended 2FA where a site allows it: a cluster's `totp_command` (`oathtool --totp`
over a seed file, a password manager's CLI) answers the login's code prompt, so cron jobs
and CI can log in. Its secret stays where the command keeps it: hpcui's config holds only
the command, and the code it prints is never logged or kept.

The risk (docs/cli.md, "Unattended 2FA"): whoever can run the command as you has your
second factor; keep the secret in a password manager or a 0600 file, and ask the site
whether it allows this (some centres forbid automating the second factor)."""

from __future__ import annotations

import re
import shlex
import subprocess
from collections.abc import Callable, Sequence
from typing import Any

from hpcui.errors import AuthenticationError, PromptNeededError

Prompt = Callable[[str, str, list[tuple[str, bool]]], list[str]]

#: what a one-time code's prompt says (OpenSSH's PAM modules: "Verification code:",
#: privacyIDEA "OTP:", Duo "Passcode", LinOTP "One Time Password", "Token code")
_CODE = re.compile(r"code|token|otp|one[- ]time|passcode|verification|authenticator", re.I)
#: the longest the command may take (a password manager may ask to unlock: not here)
TIMEOUT_S = 30.0


def is_code_prompt(text: str) -> bool:
    return bool(_CODE.search(text))


def argv(command: str | Sequence[str]) -> list[str]:
    """The command as words: a list as given, a string split as a shell would (no shell
    runs it: `$(...)` and pipes need `["sh", "-c", "..."]`)."""
    return shlex.split(command) if isinstance(command, str) else list(command)


class TotpPrompt:
    """Answers code prompts with `command`'s output and hands any other prompt (a
    password) to `fallback`, which may be None where nobody can answer."""

    def __init__(self, command: str | Sequence[str], fallback: Prompt | None, cluster: str) -> None:
        self.command, self.fallback, self.cluster = command, fallback, cluster

    def for_caller(self) -> TotpPrompt:
        """The agent's prompt answers for the thread connecting: keep that binding."""
        bind = getattr(self.fallback, "for_caller", None)
        return TotpPrompt(self.command, bind() if bind else self.fallback, self.cluster)

    def __call__(self, title: str, instructions: str, prompts: list[tuple[str, bool]]) -> list[str]:
        answers: list[str | None] = [None] * len(prompts)
        others = [(i, p) for i, p in enumerate(prompts) if not is_code_prompt(p[0])]
        for i, (text, _echo) in enumerate(prompts):
            if is_code_prompt(text):
                answers[i] = self.code()
        if others:
            if self.fallback is None:
                raise PromptNeededError(
                    f"{self.cluster} asks {others[0][1][0].strip()!r} besides the code its "
                    "totp_command gives, and this session cannot prompt. Run it in a terminal."
                )
            given = self.fallback(title, instructions, [p for _, p in others])
            for (i, _), answer in zip(others, given, strict=False):
                answers[i] = answer
        return [a or "" for a in answers]

    def code(self) -> str:
        words = argv(self.command)
        try:
            done = subprocess.run(
                words, capture_output=True, text=True, timeout=TIMEOUT_S,
                stdin=subprocess.DEVNULL, check=False,
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise AuthenticationError(
                f"totp_command of {self.cluster} ({words[0] if words else '?'}) could not run: "
                f"{exc}. Fix it in the cluster's table (run it in a terminal to see), or "
                "remove it to be asked for the code."
            ) from None
        lines = [ln.strip() for ln in done.stdout.splitlines() if ln.strip()]
        if done.returncode != 0 or not lines:
            said = (done.stderr.strip().splitlines() or ["no output"])[0][:200]
            raise AuthenticationError(
                f"totp_command of {self.cluster} ({words[0]}) failed (exit {done.returncode}: "
                f"{said}). Fix it in the cluster's table (run it in a terminal to see), or "
                "remove it to be asked for the code."
            )
        return lines[-1]


def with_totp(prompt: Any, command: str | Sequence[str] | None, cluster: str) -> Any:
    """`prompt` wrapped so the cluster's totp_command answers its code prompts."""
    return prompt if not command else TotpPrompt(command, prompt, cluster)
