"""Bad input gets a clear message, and the run goes on to lint every other file."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

BAD = "import tensorflow as tf\n\n@tf.function\ndef f(x):\n    print(x)\n    return x\n"
GRAPH = "import tensorflow as tf\n\n@tf.function\ndef f(x):\n"


def _write_bad_inputs(root: Path) -> dict[str, str | None]:
    """Write one file per kind of bad input; returns file -> expected TFC000 message (None: lints clean)."""
    files: dict[str, bytes] = {
        "syntax.py": b"def f(:\n    pass\n",
        "latin1.py": b"name = '\xe9t\xe9'\n",
        "unknown_codec.py": b"# -*- coding: no-such-codec -*-\nx = 1\n",
        "nul.py": b"x = 1\n\x00y = 2\n",
        "empty.py": b"",
        "binary.py": b"\x89PNG\r\n\x1a\n" + bytes(range(256)),
        "huge.py": (GRAPH + "    y = x\n" * 150_000 + "    return y\n").encode(),
        "nested_parens.py": b"x = " + b"(" * 1000 + b"1" + b")" * 1000 + b"\n",
        "long_chain.py": (GRAPH + "    return x" + " + x" * 20_000 + "\n").encode(),
        "nested_blocks.py": (GRAPH + "".join("    " * (i + 1) + "if x:\n" for i in range(90))
                             + "    " * 91 + "print(x)\n").encode(),
    }
    for name, data in files.items():
        (root / name).write_bytes(data)
    (root / "dangling.py").symlink_to(root / "missing_target.py")
    (root / "loop.py").symlink_to(root / "loop.py")
    os.mkfifo(root / "pipe.py")
    return {
        "syntax.py": "syntax error", "latin1.py": "encoding", "unknown_codec.py": "encoding",
        "nul.py": "NUL byte", "binary.py": "", "nested_parens.py": "", "dangling.py": "broken symbolic link",
        "loop.py": "symbolic link loop", "pipe.py": "not a regular file", "empty.py": None, "huge.py": None,
        "long_chain.py": "", "nested_blocks.py": "",
    }


def test_every_bad_input_is_reported_and_the_run_continues(project, run_cli) -> None:
    root = project({"bad.py": BAD})
    expected = _write_bad_inputs(root)
    result = run_cli(root, "check", "--format", "json", "--no-cache", ".", "no_such_dir/", "gone.py")
    assert result.exit_code == 2  # the missing paths
    assert "gone.py: no such file or directory" in result.stderr and "no_such_dir" in result.stderr
    assert "internal error" not in result.stderr
    findings = json.loads(result.stdout)
    assert ("bad.py", "TFC001") in {(f["path"], f["code"]) for f in findings}
    parse_errors = {f["path"]: f["message"] for f in findings if f["code"] == "TFC000"}
    for name, message in expected.items():
        if message is None:
            assert name not in parse_errors, parse_errors[name]
        elif message:
            assert message in parse_errors.get(name, ""), (name, parse_errors.get(name))
    assert parse_errors["binary.py"] and parse_errors["nested_parens.py"]


def test_a_bad_file_named_on_the_command_line(project, run_cli) -> None:
    root = project({"bad.py": BAD})
    (root / "dangling.py").symlink_to(root / "nowhere.py")
    result = run_cli(root, "check", "--no-show-source", "--no-cache", "dangling.py", "bad.py")
    assert result.exit_code == 1
    assert "dangling.py:1:1: TFC000 cannot read file: broken symbolic link" in result.stdout
    assert "bad.py:5:5: TFC001" in result.stdout


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_an_unreadable_file(project, run_cli) -> None:
    root = project({"bad.py": BAD, "secret.py": "x = 1\n"})
    (root / "secret.py").chmod(0)
    result = run_cli(root, "check", "--no-show-source", "--no-cache", ".")
    assert "secret.py:1:1: TFC000 cannot read file: Permission denied" in result.stdout
    assert "bad.py:5:5: TFC001" in result.stdout


def test_a_symlinked_folder_loop_is_not_followed(project, run_cli) -> None:
    root = project({"pkg/bad.py": BAD})
    (root / "pkg/again").symlink_to(root / "pkg", target_is_directory=True)
    result = run_cli(root, "check", "--no-show-source", "--no-cache", ".")
    assert result.exit_code == 1 and result.stdout.count("TFC001") == 1
