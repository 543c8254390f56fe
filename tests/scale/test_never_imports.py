"""The code being linted is never imported or run: every file here would leave a mark if it were."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def _marking(marker: Path, name: str) -> str:
    return f"open({str(marker / name)!r}, 'w').write('imported')\n"


def _tree(root: Path, marker: Path) -> None:
    files = {
        "evil/__init__.py": _marking(marker, "package"),
        "evil/helpers.py": _marking(marker, "helpers") + "def scale(x):\n    print(x)\n    return x\n",
        "main.py": _marking(marker, "main") + (
            "import tensorflow as tf\nimport evil.helpers\nfrom evil import helpers\n\n"
            "@tf.function\ndef step(x):\n    return helpers.scale(x) + evil.helpers.scale(x)\n"),
        "tensorflow.py": _marking(marker, "tensorflow"),  # shadows the real one if anything imported it
        "conftest.py": _marking(marker, "conftest"),
        "setup.py": _marking(marker, "setup"),
        "__main__.py": _marking(marker, "dunder_main"),
        "sitecustomize.py": _marking(marker, "sitecustomize"),
        "tfcheck_plugin.py": _marking(marker, "plugin"),
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_linting_never_imports_the_linted_code(tmp_path: Path) -> None:
    root, marker = tmp_path / "project", tmp_path / "marks"
    root.mkdir(), marker.mkdir()
    _tree(root, marker)
    base = [sys.executable, "-m", "tfcheck", "check", "--no-show-source"]
    runs = [[*base, "."], [*base, "."], [*base, "--no-cache", "-j", "2", "."], [*base, "--shard", "1/2", "."],
            [*base, "--shard", "2/2", "--format", "sarif", "."], [*base, "main.py", "evil/helpers.py"]]
    outputs = [subprocess.run(command, cwd=root, capture_output=True, text=True) for command in runs]
    assert sorted(p.name for p in marker.iterdir()) == []
    assert all(output.returncode in (0, 1) for output in outputs), [output.stderr for output in outputs]
    first = outputs[0]
    assert first.returncode == 1
    assert "evil/helpers.py:3:5: TFC001" in first.stdout  # found through the cross-file pass, not by importing


def _imported_modules(path: Path) -> set[str]:
    """Every module an `import` or `from ... import` in `path` names (absolute imports)."""
    import ast

    modules = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            modules.add(node.module)
    return modules


def test_the_runtime_never_imports_tvm_or_the_compiler() -> None:
    """`pip install tfcheck[runtime]` has neither apache-tvm nor apache-tvm-ffi: no module of
    tfcheck/runtime may import `tvm`, `tvm_ffi` or the compiler, even lazily inside a function
    (TensorFlow only from dispatch, which runs the tf.function itself when there is no artifact)."""
    runtime = Path(__file__).resolve().parents[2] / "tfcheck" / "runtime"
    forbidden = ("tvm", "tvm_ffi", "tfcheck.compiler")
    found = {f"{path.name}: {module}" for path in sorted(runtime.glob("*.py"))
             for module in _imported_modules(path)
             if any(module == name or module.startswith(name + ".") for name in forbidden)}
    assert found == set()
