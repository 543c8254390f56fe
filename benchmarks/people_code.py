"""TensorFlow code as people write it, from public GitHub repositories at pinned commits (issue 36).

    .venv/bin/python benchmarks/people_code.py fetch --dest /tmp/people-corpus [--mirrors /work/.mirror]
    .venv/bin/python benchmarks/people_code.py count /tmp/people-corpus      # the corpus table, markdown

The corpus for measuring precision on code nobody on tfcheck wrote and nobody polished for a release:
training scripts and research repositories, tutorials and notebooks, input pipelines and tests, with a
minority of libraries. It is disjoint from the corpus of `real_code.py` (no repository of a package
there, no TensorFlow or Keras source) and from the held-out repositories in `FORBIDDEN`, which the
script refuses by name.

`fetch` exports, for each entry of `REPOS`, the `.py` and `.ipynb` files of its pinned commit (only the
listed folders, less the excluded ones) into DEST/<owner>+<name>/. The commit comes from a local bare
mirror when one holds it (`MIRRORS/<owner>+<name>/repo`, as the session's `fetch` tool leaves them),
otherwise from a blob-less clone of https://github.com/<owner>/<name> that checks out only those files.
Either way the same rules pick the files, so both give the same corpus:
- files of `MAX_BYTES` or more are left out (the mirrors lack them; they are notebooks full of output);
- for an entry with `tf_only` (a repository that mixes frameworks: PyTorch, JAX, scikit-learn, Beam),
  only files whose code (a notebook's code cells) says `tensorflow` or `keras` are kept;
- symbolic links and submodules are never followed, and no path may leave DEST.
Nothing is built, installed or run: the corpus is read by the linter. Never commit the corpus.

`count` prints per repository the files, lines of `.py`, and lines of notebook code cells (nbformat 4,
the notebooks tfcheck reads), then the totals and the share of lines that are not `library` code.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lint_bench import count_lines  # noqa: E402 - a sibling script, not a package

ORIGIN = "https://github.com"
MAX_BYTES = 4 * 1024 * 1024
SUFFIXES = (".py", ".ipynb")
KINDS = ("research", "tutorial", "notebooks", "pipeline", "tests", "library", "app")
# The held-out check of the project (never in this corpus), and the repositories of what real_code.py
# already holds (its wheels, TensorFlow and Keras themselves).
FORBIDDEN = frozenset(name.lower() for name in (
    "tensorflow/agents", "tensorflow/probability", "tensorflow/examples", "OpenNMT/OpenNMT-tf",
    "TensorSpeech/TensorFlowTTS", "TensorSpeech/TensorFlowASR", "tensorflow/similarity",
    "tensorflow/recommenders", "google-research/seed_rl",
    "tensorflow/tensorflow", "keras-team/keras", "keras-team/tf-keras", "keras-team/keras-hub",
    "keras-team/keras-nlp", "tensorflow/addons", "deepmind/sonnet", "google-deepmind/sonnet",
    "tensorflow/gan", "NVlabs/sionna", "danielegrattarola/spektral",
))
# tensorflow/models is allowed without `official/`: that folder is the tf-models-official wheel.
WHEEL_FOLDERS = {"tensorflow/models": "official"}
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*")
_COMMIT = re.compile(r"[0-9a-f]{40}")
_MENTIONS_TF = re.compile(r"tensorflow|keras")


@dataclass(frozen=True)
class Repo:
    """One pinned repository: what is taken from it, and what kind of code it is."""

    name: str  # owner/name on GitHub
    commit: str  # full SHA
    kind: str  # one of KINDS
    folders: tuple[str, ...] = ()  # folders taken; () takes the whole repository
    exclude: tuple[str, ...] = ()  # folders left out of those
    tf_only: bool = False  # keep only files whose code mentions tensorflow or keras

    @property
    def folder(self) -> str:
        """The repository's folder in the corpus: `owner+name`."""
        return self.name.replace("/", "+")


# Pinned 2026-08: the newest commit of each default branch that the mirrors held.
REPOS = (
    # research and training code
    Repo("google-research/federated", "a5af8c4433c9ee2d2b1565f1bcc68c89e2000a6b", "research", tf_only=True),
    Repo("google/uncertainty-baselines", "163351d4c92340a80e572bc376ec837d8e96399d", "research", tf_only=True),
    Repo("NVIDIA/DeepLearningExamples", "729963dd47e7c8bd462ad10bfac7a7b0b604e6dd", "research",
         folders=("TensorFlow2",)),
    Repo("google/automl", "6a54c8741e7c3265d4547c4f35f47a0391122dc5", "research"),
    Repo("google-research/deeplab2", "64bc1c1a6505b6cd1779b65f9127180840b8a4fa", "research"),
    Repo("magenta/ddsp", "88621d2725e5af05114c4b322bc187ffae8c1f56", "research"),
    Repo("deepmind/acme", "a6d719904aaf2d5dfc3e9a597c58ef7584671309", "research", tf_only=True),
    Repo("david8862/keras-YOLOv3-model-set", "96b59be4bbb3ef5272ef4ff1e9d4efd15fc87e50", "research"),
    Repo("keiohta/tf2rl", "43523930b3328b28fcf2ce64e6a9a8cf4a403044", "research"),
    Repo("danijar/dreamerv2", "07d906e9c4322c6fc2cd6ed23e247ccd6b7c8c41", "research"),
    Repo("google-research/simclr", "383d4143fd8cf7879ae10f1046a9baeb753ff438", "research", folders=("tf2",)),
    Repo("zzh8829/yolov3-tf2", "2784050f2fc1ff060f4c8b3ac2db231370569aa8", "research"),
    Repo("hunglc007/tensorflow-yolov4-tflite", "9f16748aa3f45ff240608da4bd9b1216a29127f5", "research"),
    Repo("pythonlessons/TensorFlow-2.x-YOLOv3", "9f29d73ee24cd5db4ead280f95ff06f66d538fc2", "research"),
    Repo("LynnHo/CycleGAN-Tensorflow-2", "093dc9dab9223ea3d08977bff1c509290ea9571a", "research"),
    Repo("google-research/meta-dataset", "167609505780a3dc604f50206253d65839093be9", "research"),
    Repo("google-research/text-to-text-transfer-transformer", "e081111ccd51df425aa7124e8e311ed6d403d767",
         "research"),
    Repo("xuannianz/EfficientDet", "030fb7e10ab69a297c7723120c2d1be856a852c0", "research"),
    Repo("LynnHo/DCGAN-LSGAN-WGAN-GP-DRAGAN-Tensorflow-2", "2bf0c8b6adbc5f0b9b0abb2149fe9cf47a978976", "research"),
    Repo("marload/DeepRL-TensorFlow2", "876266d9a5fcf7d8a7c7e3afd8b110085b32b615", "research"),
    Repo("akanyaani/gpt-2-tensorflow2.0", "ab93122396a02bfd76530ac6b414a525970bba96", "research"),
    Repo("calmisential/TensorFlow2.0_ResNet", "6136d57c7580d24c9ee3e55ca0b820822565ce17", "research"),
    Repo("emla2805/vision-transformer", "9e6e7823e688edd9e2ef8a62c0ec88f775403033", "research"),
    # tutorials, courses and notebooks
    Repo("tensorflow/docs", "7c3650212740204359d4ceae481abc79345541be", "notebooks", folders=("site",)),
    Repo("GoogleCloudPlatform/vertex-ai-samples", "cc0d791ef25a4f8a9bbd9b6c9ef4928b8b96c35a", "notebooks",
         tf_only=True),
    Repo("GoogleCloudPlatform/training-data-analyst", "a3083130c24bbce167714c8630eaf21598c9c9a7", "tutorial",
         folders=("courses/machine_learning/deepdive2", "courses/fast-and-lean-data-science", "quests",
                  "self-paced-labs/vertex-ai"), tf_only=True),
    Repo("GoogleCloudPlatform/asl-ml-immersion", "238875ef017c0f4981861226dc75a1e5761b72da", "notebooks",
         tf_only=True),
    Repo("GoogleCloudPlatform/practical-ml-vision-book", "793a208917f1fbeaf6db46265c6719648363b850",
         "notebooks"),
    Repo("GoogleCloudPlatform/ml-design-patterns", "060eb9f9be1d7f7e2d7e103a29a01386723c22fe", "notebooks"),
    Repo("tensorflow/workshops", "fc5b415387a540b0eba7b61322f9837d81f9f899", "notebooks"),
    Repo("ageron/handson-ml2", "1e2115277b50f6c584cd668fa30e3af309a5b136", "notebooks", tf_only=True),
    Repo("ageron/handson-ml3", "e3f3f9e66d58cfa1d068a498433063a1d3fba9ef", "notebooks", tf_only=True),
    Repo("fchollet/deep-learning-with-python-notebooks", "dea84a4e12cc3bb3cb61ce952a0168bca113d315",
         "notebooks"),
    Repo("mrdbourke/tensorflow-deep-learning", "bd065b806249f7b1155e5b1fabd130c5cfc9d184", "notebooks",
         exclude=("docs",)),  # docs/ repeats the notebooks at the top
    Repo("https-deeplearning-ai/tensorflow-1-public", "025abb3e6bd63c63b65d6133286e2d033c9c7da4", "notebooks"),
    Repo("https-deeplearning-ai/tensorflow-3-public", "4b189038317df3857527816cc5af264b2872142d", "notebooks"),
    Repo("lmoroney/dlaicourse", "f9bb5f236da306d9f8a7c978ed37292105fd7254", "notebooks"),
    Repo("aws/amazon-sagemaker-examples", "2d519b52c3a2c2361f2b87f0d3de46fd6c0232a5", "notebooks", tf_only=True),
    Repo("wandb/examples", "5cab88702fc51edfb4afc79a1de89e9acf6cb605", "notebooks", tf_only=True),
    Repo("d2l-ai/d2l-tensorflow-colab", "6f353791019b0b3b93a2c93f9e3773596258949a", "notebooks", tf_only=True),
    Repo("Hvass-Labs/TensorFlow-Tutorials", "d5f33973570fe6ef9c78c8a38c7449a932c81010", "notebooks"),
    Repo("jeffheaton/t81_558_deep_learning", "e674d07b85289b0cfb4cc57ff213228fd2ae4dc4", "notebooks"),
    Repo("https-deeplearning-ai/tensorflow-2-public", "0af47f7c38762afd293f4f4a0e65a14b538b88b6", "notebooks"),
    Repo("ageron/tf2_course", "cb9a7263c76bbad302cd177835895992a556c4b9", "notebooks"),
    Repo("sayakpaul/Supervised-Contrastive-Learning-in-TensorFlow-2", "9c67014ff6177d040ae084ad3cb095f830f90cab",
         "notebooks"),
    Repo("sayakpaul/SimCLR-in-TensorFlow-2", "29c725616adb386b203ab5eb653e0d36b297b34a", "notebooks"),
    Repo("IvanBongiorni/TensorFlow2.0_Notebooks", "e3c18362fca602d291c06f91ddb5aa919ba00102", "notebooks"),
    Repo("lazyprogrammer/machine_learning_examples", "9c35878543c99be13dd5201a5d1bebf492bcd2b4", "tutorial",
         tf_only=True),
    Repo("PacktPublishing/Deep-Learning-with-TensorFlow-2-and-Keras", "e23d2b4a4292386b70977473805acb2f93ef16ca",
         "tutorial"),
    Repo("rasbt/python-machine-learning-book-3rd-edition", "bf62496f44a92a21d23250d5ed13d2d2e617e0e2",
         "tutorial", tf_only=True),
    Repo("dragen1860/TensorFlow-2.x-Tutorials", "9861a308283d17693d497fdfaab20b92c0b26d08", "tutorial"),
    Repo("YunYang1994/TensorFlow2.0-Examples", "299fd6689f242d0f647a96b8844e86325e9fcb46", "tutorial"),
    Repo("aymericdamien/TensorFlow-Examples", "6dcbe14649163814e72a22a999f20c5e247ce988", "notebooks",
         folders=("tensorflow_v2",)),
    Repo("timsainb/tensorflow2-generative-models", "9ef283b168a2c5d262bcc48eeba511ac357c0349", "notebooks"),
    # pipelines, tests, applications
    Repo("tensorflow/tfx", "58435d68d561e9ba6c657a0ec111adba5176ee98", "pipeline", tf_only=True),
    Repo("GoogleCloudPlatform/mlops-on-gcp", "9008dcf2f9195ee0b8653e1713dc0591391ca957", "pipeline", tf_only=True),
    Repo("horovod/horovod", "2626dc87a3a8eb8fb7d2216198ce45bce0f9e65a", "tests", folders=("test", "examples"),
         tf_only=True),
    Repo("deezer/spleeter", "64daa5a9172aa33ba155f051184528c4e969ad8e", "app"),
    # libraries (with their tests and examples)
    Repo("tensorflow/federated", "19114c5c851394e8468573ab12b0b9f9dec226a3", "library"),
    Repo("keras-team/keras-cv", "94b0a551d03ee9de3d81663e2c1a680cb113f7f1", "library"),
    Repo("tensorflow/gnn", "5d7251e28998f7759d5145b80a63600dda11519b", "library"),
    Repo("tensorflow/graphics", "ad932c3e609ba77c74a61bd83880e730aaab4eeb", "library"),
    Repo("tensorflow/model-optimization", "6fbc2cec3984877251aa6ce961aceb7049cf2b25", "library"),
    Repo("tensorflow/privacy", "03035d5d4a271ac795dab80f5bc1cef82fc3d462", "library"),
    Repo("tensorflow/neural-structured-learning", "c60d48b403009d94178826d15a12cc050a0b2dc5", "library"),
    Repo("tensorflow/io", "e42be7b4b10616d4801a04422193264a3566343c", "library"),
    Repo("tensorflow/ranking", "5b1d1338c1cb76507466d062e2d48bae57b17ac4", "library"),
    Repo("tensorflow/text", "17c38bf014810b80abbb7c13ff1c2ac3cd9f710f", "library"),
    Repo("tensorflow/quantum", "cb76b44dd50953cc3085c99cf8053ab1f90ede8e", "library"),
    Repo("tensorflow/decision-forests", "ad5a8dccc3f9e73d14aef7b53d4e90970859012a", "library"),
    Repo("tensorflow/compression", "dda8cb4c4364e657d13491227e886ff8014f7243", "library"),
    Repo("tensorflow/hub", "26c94f67716f457efaa70c63b4d1b561a08be9f1", "library"),
    Repo("NVIDIA-Merlin/models", "eb1e54196a64a70950b2a7e7744d2150e052d53e", "library", tf_only=True),
    Repo("google/edward2", "ee025600cb3cf288230f34929d8a7110e719686b", "library"),
    Repo("tensorlayer/TensorLayer", "0681633252667b317a23b803c11a8a060a44bf31", "library"),
    Repo("leondgarse/keras_cv_attention_models", "687943d88f7a7beea4807e8f4db00f4b49da9ea8", "library"),
    Repo("SeldonIO/alibi-detect", "5ff45c3f9cdc4390fa3d08de4814f95459e15ed9", "library", tf_only=True),
    Repo("keras-team/keras-tuner", "417e5b5e8df924d428a3c64007f3ed47bd4c7026", "library"),
    Repo("LongxingTan/Time-series-prediction", "1d1324b4dfc05accc0385cc250ae3a7b2bb2669e", "library"),
    Repo("shenweichen/DeepCTR", "1b5fe40e158d1ee6af8b1d9df217a5ed5aea9136", "library"),
    Repo("bojone/bert4keras", "c1ae0dc5eff66d329ab3c5c7ee369124ddbb6f87", "library"),
    Repo("kpe/bert-for-tf2", "55f6a6fd5d8ea14f96ee19938b7a1bf0cb26aaea", "library"),
    Repo("yingkaisha/keras-unet-collection", "13e0e7e0b3c12d2be58d4a3157f3468652e00969", "library"),
    Repo("faustomorales/keras-ocr", "9661d6f29c063eb1c9261029d3593e583b0abdac", "library"),
)


def check(repos: tuple[Repo, ...]) -> None:
    """Refuse a malformed or forbidden entry before anything is fetched or counted."""
    seen: set[str] = set()
    for repo in repos:
        if not _NAME.fullmatch(repo.name) or any(part in (".", "..") for part in repo.name.split("/")):
            raise SystemExit(f"{repo.name!r}: not an owner/name")
        if repo.name.lower() in FORBIDDEN:
            raise SystemExit(f"{repo.name}: forbidden in this corpus (held out, or already in real_code.py)")
        if repo.name.lower() in seen:
            raise SystemExit(f"{repo.name}: listed twice")
        seen.add(repo.name.lower())
        if not _COMMIT.fullmatch(repo.commit):
            raise SystemExit(f"{repo.name}: {repo.commit!r} is not a full commit SHA")
        if repo.kind not in KINDS:
            raise SystemExit(f"{repo.name}: kind {repo.kind!r} is not one of {', '.join(KINDS)}")
        for folder in (*repo.folders, *repo.exclude):
            _check_folder(repo, folder)
        wheel = WHEEL_FOLDERS.get(repo.name.lower())
        if wheel and (not repo.folders or any(_within(wheel, folder) or _within(folder, wheel)
                                               for folder in repo.folders)):
            raise SystemExit(f"{repo.name}: `{wheel}/` is a wheel of real_code.py; list other folders only")


def _check_folder(repo: Repo, folder: str) -> None:
    path = PurePosixPath(folder)
    if (not folder or path.is_absolute() or "\\" in folder or "\0" in folder or str(path) != folder
            or any(part in (".", "..") for part in path.parts)):
        raise SystemExit(f"{repo.name}: folder {folder!r} is not a plain relative path")


def _within(path: str, folder: str) -> bool:
    """Whether `path` is `folder` or lies under it (repository paths, `/`-separated)."""
    return path == folder or path.startswith(folder + "/")


# -- fetch --------------------------------------------------------------------------------------------
def fetch(destination: Path, mirrors: Path | None, origin: str) -> None:
    """Export every pinned repository's Python files into DEST/<owner>+<name>/."""
    check(REPOS)
    destination.mkdir(parents=True, exist_ok=True)
    root = destination.resolve()
    for repo in REPOS:
        target = (root / repo.folder).resolve()
        if target.parent != root:
            raise SystemExit(f"{repo.name}: {target} is not a folder directly in {root}")
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir()
        with _git_dir(repo, mirrors, origin) as git_dir:
            kept, dropped = _export(repo, git_dir, target)
        print(f"{repo.name}@{repo.commit[:12]}: {kept} files" + (f" ({dropped} left out)" if dropped else ""),
              file=sys.stderr)


def _git(git_dir: Path | None, *args: str, data: bytes | None = None) -> bytes:
    command = ["git", *(("--git-dir", str(git_dir)) if git_dir else ()), *args]
    environment = {**os.environ, "GIT_LITERAL_PATHSPECS": "1", "GIT_TERMINAL_PROMPT": "0"}
    return subprocess.run(command, input=data, capture_output=True, check=True, env=environment).stdout


@contextlib.contextmanager
def _git_dir(repo: Repo, mirrors: Path | None, origin: str) -> Iterator[Path]:
    """A git directory holding the pinned commit: the local mirror, else a temporary blob-less clone."""
    mirror = _mirror(repo, mirrors)
    if mirror is not None:
        yield mirror
        return
    with tempfile.TemporaryDirectory(prefix="people-code-") as folder:
        clone = Path(folder) / "clone"
        subprocess.run(["git", "clone", "--quiet", "--filter=blob:none", "--no-checkout",
                        f"{origin}/{repo.name}.git", str(clone)], check=True)
        git_dir = clone / ".git"
        paths = [path for _, _, path in _entries(repo, git_dir)]
        if paths:  # one checkout fetches the blobs of these paths in batches
            subprocess.run(["git", "-C", str(clone), "-c", "gc.auto=0", "checkout", "--quiet", repo.commit,
                            "--pathspec-from-file=-", "--pathspec-file-nul"],
                           input=b"\0".join(path.encode() for path in paths), check=True,
                           env={**os.environ, "GIT_LITERAL_PATHSPECS": "1"})
        yield git_dir


def _mirror(repo: Repo, mirrors: Path | None) -> Path | None:
    """The mirror's git directory if it exists and holds the pinned commit."""
    if mirrors is None:
        return None
    for candidate in (mirrors / repo.folder / "repo" / ".git", mirrors / repo.folder / "repo", mirrors / repo.folder):
        if (candidate / "objects").is_dir():
            result = subprocess.run(["git", "--git-dir", str(candidate), "cat-file", "-e", f"{repo.commit}^{{commit}}"],
                                    capture_output=True)
            return candidate if result.returncode == 0 else None
    return None


def _entries(repo: Repo, git_dir: Path) -> list[tuple[str, str, str]]:
    """(mode, blob, path) of the commit's `.py`/`.ipynb` files in the listed folders, less the excluded."""
    listing = _git(git_dir, "ls-tree", "-r", "-z", "--full-tree", repo.commit, "--", *repo.folders)
    entries = []
    for record in listing.decode("utf-8", "surrogateescape").split("\0"):
        if not record:
            continue
        meta, path = record.split("\t", 1)
        mode, kind, blob = meta.split()
        if kind == "blob" and path.endswith(SUFFIXES) and not any(_within(path, f) for f in repo.exclude):
            entries.append((mode, blob, path))
    for folder in repo.folders:
        if not any(_within(path, folder) for _, _, path in entries):
            raise SystemExit(f"{repo.name}@{repo.commit[:12]}: no Python file under {folder!r}")
    return entries


def _export(repo: Repo, git_dir: Path, target: Path) -> tuple[int, int]:
    """Write the chosen files under `target`; returns (kept, left out)."""
    files = [(blob, path) for mode, blob, path in _entries(repo, git_dir) if mode in ("100644", "100755")]
    kept = dropped = 0
    for (blob, path), data in zip(files, _blobs(git_dir, [blob for blob, _ in files])):
        if data is None or len(data) >= MAX_BYTES or (repo.tf_only and not _mentions_tf(path, data)):
            dropped += 1
            continue
        destination = (target / path).resolve()
        if not destination.is_relative_to(target):
            raise SystemExit(f"{repo.name}: {path!r} points outside {target}")
        destination.parent.mkdir(parents=True, exist_ok=True)
        destination.write_bytes(data)
        kept += 1
    return kept, dropped


def _blobs(git_dir: Path, blobs: list[str]) -> Iterator[bytes | None]:
    """The contents of `blobs`, in order, from one `git cat-file --batch`; None for one the repository lacks."""
    with tempfile.TemporaryFile() as requests:
        requests.write("".join(f"{blob}\n" for blob in blobs).encode())
        requests.seek(0)
        with subprocess.Popen(["git", "--git-dir", str(git_dir), "cat-file", "--batch"], stdin=requests,
                              stdout=subprocess.PIPE) as batch:
            assert batch.stdout is not None
            for _ in blobs:
                header = batch.stdout.readline().split()
                if header[-1] == b"missing":
                    yield None
                    continue
                data = batch.stdout.read(int(header[2]) + 1)  # the contents and a newline
                yield data[:-1]
        if batch.returncode:
            raise SystemExit(f"git cat-file failed in {git_dir} ({batch.returncode})")


def _mentions_tf(path: str, data: bytes) -> bool:
    """Whether a file's code (a notebook's code cells) says `tensorflow` or `keras`."""
    text = data.decode("utf-8", "replace")
    if path.endswith(".ipynb"):
        text = "\n".join(_code_cells(text))
    return _MENTIONS_TF.search(text) is not None


def _code_cells(text: str) -> list[str]:
    """The code cells of an nbformat 4 notebook (what tfcheck reads); none for anything else."""
    try:
        notebook = json.loads(text)
    except ValueError:
        return []
    if not isinstance(notebook, dict) or notebook.get("nbformat") != 4:
        return []
    cells = []
    for cell in notebook.get("cells", ()):
        if isinstance(cell, dict) and cell.get("cell_type") == "code":
            source = cell.get("source", "")
            cells.append("".join(source) if isinstance(source, list) else str(source))
    return cells


# -- count --------------------------------------------------------------------------------------------
def notebook_lines(path: Path) -> int:
    """Lines of a notebook's code cells."""
    return sum(len(cell.splitlines()) for cell in _code_cells(path.read_text("utf-8", "replace")))


def count(destination: Path) -> str:
    """The corpus table: per repository its files, lines of `.py` and of notebook code; the totals."""
    check(REPOS)
    rows = ["| repository | commit | kind | files | lines (.py) | notebook code lines | lines |",
            "|---|---|---|---:|---:|---:|---:|"]
    totals = [0, 0, 0]
    library = 0
    for repo in REPOS:
        folder = destination / repo.folder
        if not folder.is_dir():
            raise SystemExit(f"{folder} is missing: run `fetch --dest {destination}` first")
        python = sorted(folder.rglob("*.py"))
        notebooks = sorted(folder.rglob("*.ipynb"))
        counts = [len(python) + len(notebooks), count_lines(python), sum(map(notebook_lines, notebooks))]
        totals = [total + n for total, n in zip(totals, counts)]
        library += counts[1] + counts[2] if repo.kind == "library" else 0
        rows.append(f"| {repo.name} | `{repo.commit[:12]}` | {repo.kind} | {counts[0]:,} | {counts[1]:,} | "
                    f"{counts[2]:,} | {counts[1] + counts[2]:,} |")
    lines = totals[1] + totals[2]
    rows.append(f"| **total: {len(REPOS)} repositories** | | | **{totals[0]:,}** | **{totals[1]:,}** | "
                f"**{totals[2]:,}** | **{lines:,}** |")
    share = (lines - library) / lines if lines else 0.0
    return "\n".join(rows) + f"\n\nLines that are not `library` code: {lines - library:,} of {lines:,} ({share:.1%})."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    fetching = commands.add_parser("fetch", help="export the pinned repositories' Python files")
    fetching.add_argument("--dest", type=Path, required=True, help="folder to export into (created; parts replaced)")
    fetching.add_argument("--mirrors", type=Path, default=None,
                          help="folder of local bare mirrors, <owner>+<name>/repo (e.g. /work/.mirror)")
    fetching.add_argument("--origin", default=ORIGIN, help=argparse.SUPPRESS)  # another host, for tests
    commands.add_parser("count", help="print the corpus table").add_argument("dest", type=Path)
    args = parser.parse_args()
    if args.command == "fetch":
        fetch(args.dest, args.mirrors, args.origin)
    print(count(args.dest))


if __name__ == "__main__":
    main()
