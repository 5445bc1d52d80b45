import subprocess

import pytest

from hpcui.backends.batch import BatchSpec, format_duration
from hpcui.backends.slurm.script import directives, parse_find_token, render_script
from hpcui.transport.quoting import quote_argv, quote_bytes

NASTY = ["a b", "it's", "$(id)", "`id`", "x;y", "new\nline", "", "*", "é", "--flag"]


@pytest.mark.parametrize("arg", NASTY)
def test_quote_round_trips_through_a_real_shell(arg):
    out = subprocess.run(
        b"printf %s " + quote_bytes(arg), shell=True, capture_output=True, check=True
    )
    assert out.stdout == arg.encode()


def test_quote_bytes_not_utf8():
    raw = b"\xff\xfe\x80"
    out = subprocess.run(
        b"printf %s " + quote_argv([raw]), shell=True, capture_output=True, check=True
    )
    assert out.stdout == raw


def test_format_duration():
    assert format_duration(59) == "00:01:00"
    assert format_duration(3600) == "01:00:00"
    assert format_duration(86400 + 61) == "1-00:02:00"


def test_slurm_script_carries_token_resources_and_quotes_paths():
    spec = BatchSpec(
        folder="/home/u/my jobs/abc",
        token="abc",
        name="train",
        nodes=2,
        tasks_per_node=4,
        cpus_per_task=20,
        gpus_per_node=4,
        mem_mb=8000,
        time_s=5400,
        qos="acc_debug",
        account="bsc99",
        array_size=None,
    )
    d = directives(spec)
    assert "--gres=gpu:4" in d and "--comment=hpcui:abc" in d and "--time=01:30:00" in d
    assert "--qos=acc_debug" in d and "--account=bsc99" in d and "--nodes=2" in d
    script = render_script(spec)
    assert "'/home/u/my jobs/abc'" in script
    assert "ln -sf task.pkl '/home/u/my jobs/abc'/\"${SLURM_JOB_ID}\"_submitted.pkl" in script
    gpn = render_script(
        BatchSpec(
            folder="/f",
            token="t",
            name="n",
            gpus_per_node=8,
            gpu_directive="gpus-per-node",
            array_size=10,
            array_parallelism=2,
        )
    )
    assert "#SBATCH --gpus-per-node=8" in gpn and "#SBATCH --array=0-9%2" in gpn
    assert "%A_%a_%t_log.out" in gpn


def test_newline_in_directive_is_refused():
    with pytest.raises(ValueError, match="newline"):
        render_script(BatchSpec(folder="/f", token="t", name="bad\n#SBATCH --qos=x"))


def test_parse_find_token():
    text = "12|hpcui:aaa\n13|hpcui:bbb\n14|\n"
    assert parse_find_token(text, "bbb") == "13"
    assert parse_find_token(text, "zzz") is None


def test_the_bundle_is_checked_by_its_sha256_before_anything_runs(tmp_path):
    """The check that render_script puts before srun, run by a real sh and sha256sum."""
    import hashlib

    from hpcui.backends.shell import verify_lines

    bundle = tmp_path / "it's a bundle.zip"
    bundle.write_bytes(b"the bundle hpcui uploaded")
    good = hashlib.sha256(bundle.read_bytes()).hexdigest()
    spec = BatchSpec(folder="/f", token="t", name="n", verified=((str(bundle), good),))
    script = render_script(spec)
    check = verify_lines(spec.verified)[0]
    assert script.index(check) < script.index("srun ")
    assert (
        subprocess.run(["sh", "-c", check + "; echo ran"], capture_output=True).stdout == b"ran\n"
    )
    bundle.write_bytes(b"a bundle someone put there")
    swapped = subprocess.run(["sh", "-c", check + "; echo ran"], capture_output=True, text=True)
    assert swapped.returncode == 97 and swapped.stdout == ""
    assert "is not the file hpcui uploaded" in swapped.stderr
    with pytest.raises(ValueError, match="SHA-256"):
        verify_lines(((str(bundle), "abc; rm -rf ~"),))
