"""`resubmit --edit`'s editor round trip (hpcui.services.terminal.edit_text) with editors that
misbehave: each says what happened, submits nothing, and leaves nothing in the temp dir."""

from __future__ import annotations

import pytest

from hpcui.errors import UsageError
from hpcui.services.terminal import edit_text


@pytest.fixture
def tmpdir_env(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.delenv("VISUAL", raising=False)
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    return tmp_path


@pytest.mark.parametrize(
    ("editor", "said"),
    [
        ("vi 'unclosed", "Cannot read the editor command"),
        ("   ", "is empty"),
        ("/nonexistent/editor", "Cannot start the editor"),
        ("sh -c 'exit 3'", "exited with status 3"),
        ('sh -c \'printf "\\377\\376" > "$0"\'', "not UTF-8"),
        ("sh -c 'rm \"$0\"'", "did not leave the script"),
        ('sh -c \'rm "$0" && mkdir "$0"\'', "did not leave the script"),
    ],
)
def test_a_misbehaving_editor_is_said_in_words_and_leaves_nothing(
    tmpdir_env, monkeypatch, editor, said
):
    monkeypatch.setenv("EDITOR", editor)
    with pytest.raises(UsageError, match=said):
        edit_text("#!/bin/bash\ntrue\n", suffix=".sh")
    assert list(tmpdir_env.iterdir()) == []  # no file, no folder left behind


def test_an_edit_comes_back(tmpdir_env, monkeypatch):
    monkeypatch.setenv("EDITOR", 'sh -c \'echo "#SBATCH --time=5" >> "$0"\'')
    assert edit_text("#!/bin/bash\n", suffix=".sh") == "#!/bin/bash\n#SBATCH --time=5\n"
    assert list(tmpdir_env.iterdir()) == []
