"""`tfcheck.load` and `import tfcheck` need none of the linter's dependencies (issue 40, item 9):
production installs `tfcheck[runtime]`, which brings libcst, click and rich along as the base
dependencies, but loading and running an artifact imports none of them (README, "Quick start")."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from tests.conftest import REPO, hiding_modules

# The base dependencies of the distribution (and theirs) that only the linter and the CLI use.
LINTER_MODULES = ("libcst", "click", "rich", "pygments", "markdown_it", "mdurl", "tomli", "yaml",
                  "pygls", "lsprotocol", "cattrs", "attrs", "attr")


def test_load_runs_an_artifact_without_the_linter_dependencies(artifacts) -> None:
    folder = artifacts(("scale", (1, 4)))
    script = hiding_modules(LINTER_MODULES) + textwrap.dedent(f"""
        import json
        import numpy as np
        import tfcheck
        lib = tfcheck.load({str(folder)!r})
        result = lib.scale(np.arange(4, dtype=np.float32).reshape(1, 4))
        assert callable(tfcheck.aot)
        imported = sorted(name for name in sys.modules if name.partition('.')[0] in _HIDDEN)
        print(json.dumps({{"result": result.tolist(), "imported": imported}}))
    """)
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout) == {"result": [[1.0, 3.0, 5.0, 7.0]], "imported": []}


def test_the_readme_says_what_the_runtime_extra_installs() -> None:
    """Not "NumPy only": the one distribution's base dependencies come along."""
    assert not [doc.name for doc in (REPO / "docs").glob("*.md") if "NumPy only" in doc.read_text()]
    readme = (REPO / "README.md").read_text()
    assert "NumPy only" not in readme
    runtime = next(item for item in readme.split("\n- ") if item.startswith("`pip install 'tfcheck[runtime]'`"))
    assert "NumPy, plus the base dependencies above" in runtime and "never libcst, click or rich" in runtime
