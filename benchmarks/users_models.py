"""`tfcheck build` on models from users' repositories, as their code defines them: the build's
evaluation on code nobody on tfcheck wrote (docs/build.md, "Users' models").

    .venv/bin/python benchmarks/users_models.py fetch --repos /tmp/tfcheck-user-repos
    .venv/bin/python benchmarks/users_models.py build --repos /tmp/tfcheck-user-repos [--case yolov3] [--json F]

`fetch` clones each repository of REPOSITORIES at its pinned commit into REPOS/<name> and installs
what their code imports besides TensorFlow (`DEPENDENCIES`, with `pip install --target
REPOS/site-packages`, never into the project's environment). `build` runs one `tfcheck build`
process per case of CASES (a module in benchmarks/users_models/ that imports the repository's own
classes and annotates their forward pass with `@tfcheck.aot`), each with an empty cache of its
own, and prints one markdown row per artifact or failure: status, the verification's largest
error, the unknown dimensions, the build's seconds and the message. One failing case never
stops the others.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CASES_DIR = HERE / "users_models"
TFCHECK = Path(sys.executable).with_name("tfcheck")

# name -> (clone URL, commit): the commits read for docs/precision.md and docs/build.md.
REPOSITORIES = {
    "YOLOv3_TensorFlow2": ("https://github.com/calmiLovesAI/YOLOv3_TensorFlow2",
                           "7789280e4974f62b20304f9746aa4121be4c5333"),
    "retinanet-tensorflow2.x": ("https://github.com/srihari-humbarwadi/retinanet-tensorflow2.x",
                                "0df3de07405cc8b10f209fcfdb51b76236595180"),
    "adain-tensorflow2.x": ("https://github.com/srihari-humbarwadi/adain-tensorflow2.x",
                            "bc31428315f708a3ab582be87c0d1556ee2c090b"),
    "TimeGAN-tensorflow2": ("https://github.com/mcps5601/TimeGAN-tensorflow2",
                            "6f68f9ae9d9eb6f7f9e0992a5dde75c697fc0655"),
    "MusicTransformer-tensorflow2.0": ("https://github.com/jason9693/MusicTransformer-tensorflow2.0",
                                       "f7c06c0cb2e9cdddcbf6db779cb39cd650282778"),
    "mask2former_tensorflow2": ("https://github.com/syrax90/mask2former_tensorflow2",
                                "8c176f06fe7731b8c6c401f9270360f6fbfe7a5a"),
}
# What the repositories' model code imports besides TensorFlow: tf_keras for the tf.keras 2 code,
# easydict for retinanet's config.
DEPENDENCIES = ["tf_keras==2.21.0", "easydict==1.14"]
# case -> whether its repository is tf.keras 2 code (run with TF_USE_LEGACY_KERAS=1)
CASES = {
    "yolov3": False,
    "retinanet_detect": True,
    "adain_stylize": True,
    "timegan_embedder": False,
    "music_transformer": False,
    "mask2former_segment": True,
}


def fetch(repos: Path) -> None:
    """Clone every repository at its commit (skipping those already there) and install the extras."""
    repos.mkdir(parents=True, exist_ok=True)
    for name, (url, commit) in REPOSITORIES.items():
        target = repos / name
        if not target.exists():
            subprocess.run(["git", "clone", "--quiet", url, str(target)], check=True)
        subprocess.run(["git", "-C", str(target), "checkout", "--quiet", commit], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
                    str(repos / "site-packages"), *DEPENDENCIES], check=True)


def build_case(case: str, repos: Path) -> list[dict[str, Any]]:
    """One case's `tfcheck build --format json` records, built in a temporary folder."""
    environment = {**os.environ, "TFCHECK_USER_REPOS": str(repos), "PYTHONPATH": str(repos / "site-packages")}
    if CASES[case]:
        environment["TF_USE_LEGACY_KERAS"] = "1"
    with tempfile.TemporaryDirectory(prefix=f"tfcheck-users-{case}-") as work:
        completed = subprocess.run(
            [str(TFCHECK), "build", str(CASES_DIR / f"{case}.py"), "--format", "json", "--no-lint",
             "--cache-dir", str(Path(work) / "cache"), "--out", str(Path(work) / "out")],
            capture_output=True, text=True, env=environment, check=False)
    try:
        return json.loads(completed.stdout)["functions"]
    except (json.JSONDecodeError, KeyError):
        return [{"function": case, "status": "failed", "message": completed.stderr.strip()[-2000:]}]


def markdown_row(record: dict[str, Any]) -> str:
    """One artifact (or failure) as a row of docs/build.md's table."""
    dims = ", ".join(f"{name} {d['min']}-{d['max'] or 'any'}" for name, d in (record.get("dims") or {}).items())
    shapes = "; ".join(str(spec["shape"]) for spec in record.get("inputs") or [])
    error = record.get("max_abs_error")
    message = (record.get("message") or "").replace("|", "\\|").replace("\n", " ")
    return (f"| {record['function']} | {record['status']} | {dims or shapes} | "
            f"{'' if error is None else f'{error:.1e}'} | {record.get('seconds', '')} | {message[:400]} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["fetch", "build"])
    parser.add_argument("--repos", type=Path, required=True, help="where the repositories are (or go)")
    parser.add_argument("--case", action="append", choices=sorted(CASES), help="only these cases (repeatable)")
    parser.add_argument("--json", type=Path, help="also write every record here")
    arguments = parser.parse_args()
    if arguments.command == "fetch":
        fetch(arguments.repos)
        return
    records = []
    print("| function | status | dimensions or shapes | max error | seconds | message |\n|---|---|---|---:|---:|---|")
    for case in arguments.case or CASES:
        for record in build_case(case, arguments.repos.resolve()):
            records.append(record)
            print(markdown_row(record), flush=True)
    if arguments.json:
        arguments.json.write_text(json.dumps(records, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
