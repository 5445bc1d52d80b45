"""The totp_command's prompt: codes from the command, anything else from the person (or a
clear error without one), the agent's per-caller binding kept."""

from __future__ import annotations

import sys

import pytest

from hpcui.errors import AuthenticationError, PromptNeededError
from hpcui.transport.ssh.totp import TotpPrompt, is_code_prompt, with_totp

PRINTS = [sys.executable, "-c", "print('noise'); print('123456')"]


def test_code_prompts_are_told_from_password_prompts():
    for text in ("Verification code: ", "OTP: ", "Token code:", "Passcode or option (1-3): "):
        assert is_code_prompt(text), text
    for text in ("Password: ", "Password for bsc012345@glogin1: "):
        assert not is_code_prompt(text), text


def test_the_command_answers_codes_and_the_person_the_password():
    asked: list[list[tuple[str, bool]]] = []

    def person(title, instructions, prompts):
        asked.append(prompts)
        return ["hunter2"]

    ask = TotpPrompt(PRINTS, person, "mn5")
    got = ask("", "", [("Password: ", False), ("Verification code: ", False)])
    assert got == ["hunter2", "123456"]  # the last line of its output
    assert asked == [[("Password: ", False)]]
    with pytest.raises(PromptNeededError, match="'Password:' besides the code"):
        TotpPrompt(PRINTS, None, "mn5")("", "", [("Password: ", False)])


def test_no_command_no_wrapper_and_the_agents_binding_is_kept():
    def person(title, instructions, prompts):
        return []

    assert with_totp(person, None, "mn5") is person

    class Agents:
        def for_caller(self):
            return person

    bound = with_totp(Agents(), "true", "mn5").for_caller()
    assert isinstance(bound, TotpPrompt) and bound.fallback is person


def test_a_silent_command_fails_clearly():
    with pytest.raises(AuthenticationError, match=r"totp_command of mn5 \(true\) failed \(exit 0"):
        TotpPrompt(["true"], None, "mn5").code()
