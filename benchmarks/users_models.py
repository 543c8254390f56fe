"""`tfcheck build` on models from users' repositories, as their code defines them: the build's
evaluation on code nobody on tfcheck wrote (docs/build.md, "Users' models").

    .venv/bin/python benchmarks/users_models.py fetch --repos /tmp/tfcheck-user-repos [--mirrors /work/.mirror]
    .venv/bin/python benchmarks/users_models.py build --repos /tmp/tfcheck-user-repos [--case yolov3] [--json F]

`fetch` puts each repository of REPOSITORIES at its pinned commit in REPOS/<name>: cloned from a
local bare mirror when MIRRORS/<owner>+<name> (or its `repo/` or `repo/.git`) holds the commit, as
the session's `fetch` tool leaves them, otherwise from GitHub; then it checks out the full commit.
A repository that neither gives is reported and left out (its cases fail to import). It installs
what their code imports besides TensorFlow (`DEPENDENCIES`, with `pip install --target
REPOS/site-packages`, never into the project's environment). `build` runs one `tfcheck build`
process per case of CASES (a module in benchmarks/users_models/ that imports the repository's own
classes and annotates their forward pass with `@tfcheck.aot`), each with an empty cache of its
own, then `tfcheck bench` on what it built (tf.function against the artifact, in turns, in the
same environment), and prints one markdown row per artifact or failure: status, the verification's
largest error relative to the output's scale, the unknown dimensions or the shapes, the median
time as a ratio to tf.function's, the build's seconds and the message. One failing case never
stops the others.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CASES_DIR = HERE / "users_models"
TFCHECK = Path(sys.executable).with_name("tfcheck")
ORIGIN = "https://github.com"

# folder -> (owner/name on GitHub, full commit): the commits read for docs/precision.md and
# docs/build.md. The first six were pinned when the sweep began; the others are the newest commit
# of each default branch that the mirrors held (2026-12).
REPOSITORIES = {
    "YOLOv3_TensorFlow2": ("calmiLovesAI/YOLOv3_TensorFlow2", "7789280e4974f62b20304f9746aa4121be4c5333"),
    "retinanet-tensorflow2.x": ("srihari-humbarwadi/retinanet-tensorflow2.x",
                                "0df3de07405cc8b10f209fcfdb51b76236595180"),
    "adain-tensorflow2.x": ("srihari-humbarwadi/adain-tensorflow2.x", "bc31428315f708a3ab582be87c0d1556ee2c090b"),
    "TimeGAN-tensorflow2": ("mcps5601/TimeGAN-tensorflow2", "6f68f9ae9d9eb6f7f9e0992a5dde75c697fc0655"),
    "MusicTransformer-tensorflow2.0": ("jason9693/MusicTransformer-tensorflow2.0",
                                       "f7c06c0cb2e9cdddcbf6db779cb39cd650282778"),
    "mask2former_tensorflow2": ("syrax90/mask2former_tensorflow2", "8c176f06fe7731b8c6c401f9270360f6fbfe7a5a"),
    "keras-unet-collection": ("yingkaisha/keras-unet-collection", "13e0e7e0b3c12d2be58d4a3157f3468652e00969"),
    "CycleGAN-Tensorflow-2": ("LynnHo/CycleGAN-Tensorflow-2", "093dc9dab9223ea3d08977bff1c509290ea9571a"),
    "keras-ocr": ("faustomorales/keras-ocr", "9661d6f29c063eb1c9261029d3593e583b0abdac"),
    "vision-transformer": ("emla2805/vision-transformer", "9e6e7823e688edd9e2ef8a62c0ec88f775403033"),
    "spleeter": ("deezer/spleeter", "64daa5a9172aa33ba155f051184528c4e969ad8e"),
    "gpt-2-tensorflow2.0": ("akanyaani/gpt-2-tensorflow2.0", "ab93122396a02bfd76530ac6b414a525970bba96"),
    "bert-for-tf2": ("kpe/bert-for-tf2", "55f6a6fd5d8ea14f96ee19938b7a1bf0cb26aaea"),
    "yolov3-tf2": ("zzh8829/yolov3-tf2", "2784050f2fc1ff060f4c8b3ac2db231370569aa8"),
    "TensorFlow2.0_ResNet": ("calmisential/TensorFlow2.0_ResNet", "6136d57c7580d24c9ee3e55ca0b820822565ce17"),
    "tensorflow-yolov4-tflite": ("hunglc007/tensorflow-yolov4-tflite", "9f16748aa3f45ff240608da4bd9b1216a29127f5"),
    "Time-series-prediction": ("LongxingTan/Time-series-prediction", "1d1324b4dfc05accc0385cc250ae3a7b2bb2669e"),
    "DeepRL-TensorFlow2": ("marload/DeepRL-TensorFlow2", "876266d9a5fcf7d8a7c7e3afd8b110085b32b615"),
}
# What the repositories' model code imports besides TensorFlow: tf_keras for the tf.keras 2 code,
# easydict for retinanet's and YOLOv4's configs, tensorflow-addons (and the typeguard it needs) for
# CycleGAN's instance norm and the ViT's gelu, pandas (and pytz) for spleeter's and tfts's
# imports, py-params, params-flow (and the tqdm it imports) for bert-for-tf2. py-params is an sdist whose setup.py needs
# an older setuptools than pip's isolated build gets: it is built with the environment's own.
DEPENDENCIES = ["tf_keras==2.21.0", "easydict==1.14", "tensorflow-addons==0.23.0", "typeguard==2.13.3",
                "pandas==3.1.1", "pytz==2026.6", "py-params==0.10.2", "params-flow==0.8.2", "tqdm==4.67.1"]
# case -> whether its repository is tf.keras 2 code (run with TF_USE_LEGACY_KERAS=1)
CASES = {
    "yolov3": False,
    "retinanet_detect": True,
    "adain_stylize": True,
    "timegan_embedder": False,
    "music_transformer": False,
    "mask2former_segment": True,
    "unet_collection": False,
    "cyclegan_generator": True,
    "keras_ocr_recognizer": True,
    "vit_classifier": True,
    "spleeter_unet": True,
    "gpt2_decoder": True,
    "bert_encoder": True,
    "yolov3_tf2_detect": False,
    "resnet_tutorial": False,
    "yolov4_tiny": True,
    "tfts_forecast": False,
    "deeprl_policy": False,
}


# -- fetch --------------------------------------------------------------------------------------------
def fetch(repos: Path, mirrors: Path | None, origin: str = ORIGIN) -> list[str]:
    """Put every repository at its commit in REPOS/<name> (from a mirror when one holds it), then
    install the extras; returns the folders that could not be had."""
    repos.mkdir(parents=True, exist_ok=True)
    missing = []
    for folder, (name, commit) in REPOSITORIES.items():
        target = repos / folder
        try:
            absent = _materialise(target, name, commit, mirrors, origin)
        except subprocess.CalledProcessError as error:
            shutil.rmtree(target, ignore_errors=True)
            missing.append(folder)
            print(f"{name}@{commit[:12]}: not materialisable ({' '.join(map(str, error.cmd[:3]))}... "
                  f"exited {error.returncode})", file=sys.stderr)
            continue
        print(f"{name}@{commit[:12]}: {target}" + (f" ({len(absent)} files absent from the clone, left out: "
              f"{', '.join(absent[:4])}{' ...' if len(absent) > 4 else ''})" if absent else ""), file=sys.stderr)
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--upgrade", "--no-deps", "--no-build-isolation",
                    "--target", str(repos / "site-packages"), *DEPENDENCIES], check=True)
    return missing


def _materialise(target: Path, name: str, commit: str, mirrors: Path | None, origin: str) -> list[str]:
    """A clone of `name` at `commit` in `target` (kept if it already has the commit checked out);
    returns the files of the commit whose contents the clone lacks (a mirror's largest files may be
    listed but absent), which are left out of the checkout."""
    if target.is_dir() and _git(target, "rev-parse", "HEAD", check=False).strip() == commit:
        return []
    if not (target / ".git").exists():
        shutil.rmtree(target, ignore_errors=True)
        mirror = mirror_of(name, commit, mirrors)
        source = str(mirror) if mirror is not None else f"{origin}/{name}.git"
        subprocess.run(["git", "clone", "--quiet", "--no-checkout", source, str(target)], check=True,
                       env={**os.environ, "GIT_TERMINAL_PROMPT": "0"})
    listing = _git(target, "ls-tree", "-r", "-z", "--full-tree", commit)
    entries = [record.split("\t", 1) for record in listing.split("\0") if record]
    blobs = [(meta.split()[2], path) for meta, path in entries if meta.split()[1] == "blob"]
    present = subprocess.run(["git", "-C", str(target), "cat-file", "--batch-check"], capture_output=True, text=True,
                             input="".join(f"{blob}\n" for blob, _ in blobs), check=True).stdout.splitlines()
    absent = [path for (_, path), line in zip(blobs, present) if line.endswith(" missing")]
    _git(target, "update-ref", "--no-deref", "HEAD", commit)  # detached at the commit, whatever is absent
    if absent:
        paths = "\0".join(path for _, path in blobs if path not in set(absent))
        subprocess.run(["git", "-C", str(target), "checkout", "--quiet", "--force", commit, "--pathspec-from-file=-",
                        "--pathspec-file-nul"], input=paths, text=True, check=True,
                       env={**os.environ, "GIT_LITERAL_PATHSPECS": "1"})
    else:
        _git(target, "checkout", "--quiet", "--force", commit)
    return absent


def mirror_of(name: str, commit: str, mirrors: Path | None) -> Path | None:
    """The bare mirror of `name` under MIRRORS if it holds `commit` (as benchmarks/people_code.py finds them)."""
    if mirrors is None:
        return None
    base = mirrors / name.replace("/", "+")
    for candidate in (base / "repo" / ".git", base / "repo", base):
        if (candidate / "objects").is_dir():
            found = subprocess.run(["git", "--git-dir", str(candidate), "cat-file", "-e", f"{commit}^{{commit}}"],
                                   capture_output=True, check=False)
            return candidate if found.returncode == 0 else None
    return None


def _git(work_tree: Path, *args: str, check: bool = True) -> str:
    completed = subprocess.run(["git", "-C", str(work_tree), *args], capture_output=True, text=True, check=False)
    if check and completed.returncode:
        raise subprocess.CalledProcessError(completed.returncode, ["git", "-C", str(work_tree), *args],
                                            completed.stdout, completed.stderr)
    return completed.stdout


# -- build and bench ----------------------------------------------------------------------------------
def environment_of(case: str, repos: Path) -> dict[str, str]:
    """The environment a case builds and runs in: the repositories, the extras, legacy Keras or not."""
    environment = {**os.environ, "TFCHECK_USER_REPOS": str(repos), "PYTHONPATH": str(repos / "site-packages")}
    if CASES[case]:
        environment["TF_USE_LEGACY_KERAS"] = "1"
    return environment


def build_case(case: str, repos: Path, seconds: float = 0.0) -> list[dict[str, Any]]:
    """One case's `tfcheck build --format json` records, built in a temporary folder; with
    `seconds`, each built record gets `bench`: tf.function's and the artifact's median times."""
    environment = environment_of(case, repos)
    with tempfile.TemporaryDirectory(prefix=f"tfcheck-users-{case}-") as work:
        out = Path(work) / "out"
        completed = subprocess.run(
            [str(TFCHECK), "build", str(CASES_DIR / f"{case}.py"), "--format", "json", "--no-lint",
             "--cache-dir", str(Path(work) / "cache"), "--out", str(out)],
            capture_output=True, text=True, env=environment, check=False)
        try:
            records = json.loads(completed.stdout)["functions"]
        except (json.JSONDecodeError, KeyError):
            tail = completed.stderr.strip()[-2000:] or f"tfcheck build exited {completed.returncode}"
            return [{"function": case, "status": "failed", "message": tail}]
        if seconds and any(record["status"] == "built" for record in records) and out.is_dir():
            attach_bench(records, bench(out, environment, seconds))
    return records


def bench(out: Path, environment: dict[str, str], seconds: float) -> list[dict[str, Any]]:
    """`tfcheck bench OUT --backends tf.function,tvm` (in turns, compiler/bench/turns.py): one
    result per artifact, or one error record."""
    completed = subprocess.run(
        [str(TFCHECK), "bench", str(out), "--backends", "tf.function,tvm", "--seconds", str(seconds),
         "--min-runs", "5", "--format", "json"],
        capture_output=True, text=True, env=environment, check=False)
    try:
        return json.loads(completed.stdout)
    except json.JSONDecodeError:
        return [{"error": completed.stderr.strip()[-600:] or f"tfcheck bench exited {completed.returncode}"}]


def attach_bench(records: list[dict[str, Any]], results: list[dict[str, Any]]) -> None:
    """Give each built record the bench result of its function and input shapes."""
    by_key = {(r.get("function"), _shapes(r.get("inputs"))): r for r in results if "function" in r}
    failure = next((r["error"] for r in results if "error" in r), None)
    for record in records:
        if record["status"] != "built":
            continue
        result = by_key.get((record["function"], _shapes(record.get("inputs"))))
        if result is None:  # a symbolic artifact is timed at the smallest size of each unknown dimension
            result = next((r for r in results if r.get("function") == record["function"]), None)
        record["bench"] = result if result is not None else {"error": failure or "not timed"}


def _shapes(inputs: list[dict[str, Any]] | None) -> str:
    return json.dumps([(spec.get("shape"), spec.get("dtype")) for spec in inputs or []])


def ratio_cell(record: dict[str, Any]) -> str:
    """`0.42x (12.3 / 29.1 ms)`: the artifact's median over tf.function's, or why there is none."""
    result = record.get("bench")
    if not result:
        return ""
    if "error" in result:
        return f"not timed: {result['error'][:120]}"
    by_backend = {m["backend"]: m for m in result.get("measurements", [])}
    tvm, reference = by_backend.get("tvm"), by_backend.get("tf.function")
    if tvm is None or reference is None or tvm.get("error") or reference.get("error"):
        broken = next((m for m in (tvm, reference) if m and m.get("error")), None)
        return f"not timed: {(broken or {}).get('error', 'no measurement')[:120]}"
    timed = "" if not record.get("dims") else " at " + ", ".join(
        f"{spec['dtype']}{spec['shape']}" for spec in result.get("inputs", []))
    return f"{tvm['ratio']:.2f}x ({tvm['median_ms']:.3g} / {reference['median_ms']:.3g} ms{timed})"


def markdown_row(record: dict[str, Any]) -> str:
    """One artifact (or failure) as a row of docs/build.md's table."""
    dims = ", ".join(f"{name} {d['min']}-{d['max'] or 'any'}" + (f" step {d['step']}" if d.get("step", 1) > 1 else "")
                     for name, d in (record.get("dims") or {}).items())
    shapes = "; ".join(str(spec["shape"]) for spec in record.get("inputs") or [])
    error = record.get("max_rel_error")
    status = record["status"]
    if status == "built" and record.get("verified"):
        status = "verified"
    message = (record.get("message") or "").replace("|", "\\|").replace("\n", " ")
    return (f"| {record['function']} | {status} | {dims or shapes} | "
            f"{'' if error is None else f'{error:.1e}'} | {ratio_cell(record)} | {record.get('seconds', '')} | "
            f"{message[:600]} |")


HEADER = ("| function | status | dimensions or shapes | max error (of the output's scale) | time vs tf.function "
          "| build s | message |\n|---|---|---|---:|---|---:|---|")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["fetch", "build"])
    parser.add_argument("--repos", type=Path, required=True, help="where the repositories are (or go)")
    parser.add_argument("--mirrors", type=Path, default=None,
                        help="fetch: folder of local bare mirrors, <owner>+<name>[/repo] (e.g. /work/.mirror)")
    parser.add_argument("--case", action="append", choices=sorted(CASES), help="only these cases (repeatable)")
    parser.add_argument("--seconds", type=float, default=3.0,
                        help="build: seconds of timing per backend for each artifact (0: no timing)")
    parser.add_argument("--json", type=Path, help="also write every record here")
    arguments = parser.parse_args()
    if arguments.command == "fetch":
        missing = fetch(arguments.repos, arguments.mirrors)
        if missing:
            print(f"not materialisable: {', '.join(missing)}", file=sys.stderr)
        return
    records = []
    print(HEADER)
    for case in arguments.case or CASES:
        for record in build_case(case, arguments.repos.resolve(), arguments.seconds):
            records.append(record)
            print(markdown_row(record), flush=True)
            if arguments.json:  # after every case: a long sweep stopped halfway keeps what it had
                arguments.json.write_text(json.dumps(records, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
