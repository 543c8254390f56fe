"""The build extra installs no TensorFlow over the user's (issue 40, item 13): `tfcheck build`
accepts the installed `tensorflow` or `tensorflow-cpu` within a range, and says what to install
when it is missing, outside the range, or installed twice."""

from __future__ import annotations

import re
import tomllib

import pytest

from tests.conftest import REPO
from tfcheck import requirements
from tfcheck.requirements import TENSORFLOW_DISTRIBUTIONS, TENSORFLOW_RANGE, tensorflow_problem


def _extra(name: str) -> list[str]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"][name]


def _distribution(requirement: str) -> str:
    return re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0].lower()


def test_the_build_extra_installs_no_tensorflow_and_the_dev_extra_does() -> None:
    assert not {_distribution(r) for r in _extra("build")} & set(TENSORFLOW_DISTRIBUTIONS)
    assert {_distribution(r) for r in _extra("dev")} & set(TENSORFLOW_DISTRIBUTIONS)


def test_the_range_is_the_one_the_docs_state() -> None:
    assert TENSORFLOW_RANGE == ">=2.16,<2.22"
    assert f"tensorflow{TENSORFLOW_RANGE}" in (REPO / "README.md").read_text()
    assert f"tensorflow{TENSORFLOW_RANGE}" in (REPO / "docs" / "cli.md").read_text()


@pytest.mark.parametrize("installed", [{"tensorflow": "2.16.1"}, {"tensorflow-cpu": "2.21.0"},
                                       {"tensorflow": "2.20.0rc1"},
                                       {"tensorflow": "2.19.0", "tensorflow-intel": "2.19.0"}])
def test_a_tensorflow_in_range_is_accepted(installed: dict[str, str]) -> None:
    assert tensorflow_problem(installed, importable=True) is None


def test_this_environment_is_in_range() -> None:
    assert tensorflow_problem(requirements.installed_tensorflow(), importable=True) is None


@pytest.mark.parametrize(("installed", "message"), [
    ({"tensorflow": "2.15.1"},
     "needs TensorFlow >=2.16,<2.22, and this environment has tensorflow 2.15.1: pip install 'tensorflow>=2.16,<2.22'"),
    ({"tensorflow-cpu": "2.22.0"},
     "needs TensorFlow >=2.16,<2.22, and this environment has tensorflow-cpu 2.22.0: "
     "pip install 'tensorflow-cpu>=2.16,<2.22'"),
    ({"tf-nightly": "2.22.0.dev20260101"},
     "needs TensorFlow >=2.16,<2.22, and this environment has tf-nightly 2.22.0.dev20260101: "
     "pip install 'tensorflow>=2.16,<2.22'"),
    ({"tensorflow": "2.20.0", "tensorflow-cpu": "2.21.0"},
     "needs one TensorFlow, and tensorflow 2.20.0, tensorflow-cpu 2.21.0 are installed side by side, overwriting "
     "each other's files: uninstall them all, then pip install 'tensorflow>=2.16,<2.22' (or tensorflow-cpu)"),
])
def test_a_tensorflow_out_of_range_or_twice_says_what_to_install(installed: dict[str, str], message: str) -> None:
    assert tensorflow_problem(installed, importable=True) == message


def test_no_tensorflow_says_what_to_install() -> None:
    assert tensorflow_problem({}, importable=False) == (
        "needs TensorFlow, which the build extra leaves to your environment: "
        "pip install 'tensorflow>=2.16,<2.22' (or tensorflow-cpu)")
    assert tensorflow_problem({}, importable=True) is None  # built from source: cannot be read unimported


@pytest.mark.parametrize("name", ["build", "inspect", "bench"])
def test_the_build_commands_check_the_version_when_they_start(project, run_cli, monkeypatch, name: str) -> None:
    monkeypatch.setattr(requirements, "installed_tensorflow", lambda: {"tensorflow": "2.15.1"})
    result = run_cli(project({"src.py": "x = 1\n"}), name, "src.py")
    assert result.exit_code == 2
    assert result.stderr == (f"tfcheck: error: tfcheck {name} needs TensorFlow >=2.16,<2.22, and this environment "
                             "has tensorflow 2.15.1: pip install 'tensorflow>=2.16,<2.22'\n")
