"""The lint cache: per-file results keyed by content, so unchanged files are never analysed twice.

Layout under the cache folder (`.tfcheck_cache/` by default; `tfcheck clean --lint-cache` removes it):

    lint/v1/<run key>/<2 hex>/<entry key>.json   what `analyze` returned for one file
    lint/v1/stat.json                            path -> (stat signature, content hash)

The run key digests everything besides the file that decides its findings: the tfcheck version, the
Python version (its `ast` differs between versions), `Config.fingerprint()` (select/ignore included),
and the source of tfcheck and of its rules, so editing or adding a rule (even in an editable install
whose version never changes) invalidates. The entry key adds the file's content hash, its display path and module name
(findings carry both), the path per-file ignores match, and the extra graph roots the project pass
gave it.

The stat manifest is what makes a warm run fast: a file whose (size, mtime, ctime, inode, mode) match
the manifest is not even read; its content hash comes from the manifest. Like git's index, a file
changed within `RACY_SECONDS` of being recorded is not recorded, since a second change in the same
clock tick could leave its stat unchanged.

Nothing read from the cache is trusted: an entry starts with its own key and the SHA-256 of its body,
and findings are type-checked while they are rebuilt; an entry that is truncated, altered, misplaced or
malformed counts as a miss, is analysed again and rewritten. Writes go to a temporary file renamed over the entry, so
concurrent runs see either the old or the new entry, never half of one.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfcheck import __version__
from tfcheck.atomic import write_atomic
from tfcheck.config import Config
from tfcheck.findings import FileResult, Finding
from tfcheck.gitignore import mark_ignored
from tfcheck.jobs import FileJob

FORMAT = "v1"
SUBFOLDER = "lint"  # everything the cache stores is under here, plus its .gitignore marker
WHAT = "the lint cache"  # named in that marker
RACY_SECONDS = 2.0
# The packages whose code can decide a file's findings (the engine, the runner, the rules): all their
# sources are hashed (~1 ms), rather than a hand-kept list of modules that would miss a new helper.
_CODE_PACKAGES = ("tfcheck", "tfcheck.rules")

StatSignature = tuple[int, int, int, int, int]


def default_cache_dir(config: Config) -> Path:
    """`cache-dir` from the config file, relative to that file; without a config file, to the cwd."""
    base = config.root if config.source is not None else Path.cwd()
    return base / config.cache_dir


def stat_signature(stat: os.stat_result) -> StatSignature:
    """What must stay the same for a file to count as unchanged without reading it."""
    return (stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino, stat.st_mode)


def content_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def run_key(config: Config) -> str:
    """The digest of everything except the file itself that decides a file's findings.

    The rules that run follow from their sources and the config's select/ignore, both digested here,
    so the rules are not imported for the key: a warm run never pays for importing them.
    """
    digest = hashlib.sha256()
    for part in (FORMAT, __version__, sys.version, config.fingerprint()):
        digest.update(part.encode() + b"\0")
    for package in _CODE_PACKAGES:
        folder = Path(importlib.util.find_spec(package).origin).parent
        for file in sorted(folder.rglob("*.py")):
            try:
                digest.update(file.relative_to(folder).as_posix().encode() + b"\0" + file.read_bytes())
            except OSError:  # a source that cannot be read cannot be known unchanged: never hit
                digest.update(os.urandom(16))
    return digest.hexdigest()[:32]


@dataclass(frozen=True)
class LintCache:
    """One run's view of the cache folder. Picklable, so worker processes read and write it too."""

    folder: Path
    key: str

    @classmethod
    def open(cls, folder: Path, config: Config) -> LintCache:
        return cls(Path(folder), run_key(config))

    @property
    def base(self) -> Path:
        return self.folder / SUBFOLDER / FORMAT

    def entry_key(self, sha: str, job_identity: tuple[Any, ...]) -> str:
        """The key of one file's entry: its content hash and how the run sees it (paths, module, roots)."""
        identity = json.dumps([sha, *job_identity])
        return hashlib.sha256(identity.encode()).hexdigest()

    def _entry_path(self, entry_key: str) -> str:
        """A string, not a Path: a warm run builds one per file, and pathlib costs ~10x os.path here."""
        return os.path.join(self.folder, SUBFOLDER, FORMAT, self.key, entry_key[:2], f"{entry_key}.json")

    def load(self, entry_key: str) -> dict[str, Any] | None:
        """A stored entry, or None when it is missing or cannot be trusted."""
        try:
            with open(self._entry_path(entry_key), "rb") as stream:
                raw = stream.read()
        except OSError:
            return None
        head, _, body = raw.partition(b"\n\n")
        if head != _header(entry_key, body):
            return None
        try:
            data = json.loads(body)
        except ValueError:
            return None
        return data if isinstance(data, dict) else None

    def load_result(self, job: FileJob, sha: str) -> FileResult | None:
        """The cached result of `job` for this content; a summary request (another shard's file) is
        also answered by a full entry."""
        for report in (True, False) if not job.report else (True,):
            data = self.load(self._result_key(job, sha, report))
            if data is not None:
                result = _result_from_payload(job.display, data)
                if result is not None:
                    return result
        return None

    def store_result(self, job: FileJob, sha: str, result: FileResult) -> None:
        self.store(self._result_key(job, sha, job.report), _result_payload(result))

    def _result_key(self, job: FileJob, sha: str, report: bool) -> str:
        return self.entry_key(sha, (job.display, job.relative, job.module, job.is_package, job.extra_roots,
                                    job.foreign_kinds, job.reaching_arguments, report))

    def store(self, entry_key: str, payload: Mapping[str, Any]) -> None:
        """Write an entry atomically; a cache that cannot be written only costs speed."""
        body = json.dumps(payload, separators=(",", ":")).encode()
        self._write_atomic(self._entry_path(entry_key), _header(entry_key, body) + b"\n\n" + body)

    def _write_atomic(self, path: Path | str, data: bytes) -> None:
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            mark_ignored(self.folder, WHAT)
            write_atomic(Path(path), data)
        except OSError:
            pass

    # The stat manifest -------------------------------------------------------------------------

    @property
    def _manifest_path(self) -> Path:
        return self.base / "stat.json"

    def load_manifest(self) -> dict[str, tuple[StatSignature, str]]:
        """path -> (stat signature, content hash); malformed rows are dropped, a bad file is empty."""
        try:
            data = json.loads(self._manifest_path.read_bytes())
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict):
            return {}
        return {path: (tuple(row[0]), row[1]) for path, row in data.items() if _valid_manifest_row(row)}

    def save_manifest(self, seen: Mapping[str, tuple[StatSignature, str]], started: float,
                      loaded: Mapping[str, tuple[StatSignature, str]]) -> None:
        """Record what this run read, merged into what other runs recorded (theirs may be newer paths).

        `loaded` is the manifest as this run found it: when it already says everything, nothing is
        written, so a warm run writes nothing at all.
        """
        fresh = {path: row for path, row in seen.items() if not _racy(row[0], started) and loaded.get(path) != row}
        if not fresh:
            return
        manifest = self.load_manifest()
        manifest.update(fresh)
        rows = {path: [list(signature), sha] for path, (signature, sha) in manifest.items()}
        self._write_atomic(self._manifest_path, json.dumps(rows, separators=(",", ":")).encode())


def _result_payload(result: FileResult) -> dict[str, object]:
    return {"lines": result.lines, "findings": [f.to_dict(with_source=True) for f in result.findings],
            "suppressed": [f.to_dict(with_source=True) for f in result.suppressed],
            "external_calls": [list(call) for call in result.external_calls],
            "class_kinds": [list(pair) for pair in result.class_kinds], "foreign_bases": result.foreign_bases,
            "asked_arguments": [list(pair) for pair in result.asked_arguments],
            "parameter_sinks": [list(pair) for pair in result.parameter_sinks]}


def _result_from_payload(display: str, data: dict[str, object]) -> FileResult | None:
    """Rebuild a FileResult from a cache entry; None when anything in it is malformed."""
    try:
        calls = [(str(target), str(caller), int(line)) for target, caller, line in data["external_calls"]]  # type: ignore[union-attr]
        class_kinds = [(str(name), str(kind)) for name, kind in data["class_kinds"]]  # type: ignore[union-attr]
        foreign_bases = [str(name) for name in data["foreign_bases"]]  # type: ignore[union-attr]
        asked = [(str(target), str(argument)) for target, argument in data["asked_arguments"]]  # type: ignore[union-attr]
        sinks = [(str(name), str(argument)) for name, argument in data["parameter_sinks"]]  # type: ignore[union-attr]
        lines = data["lines"]
        if not isinstance(lines, int):
            return None
        return FileResult(display, lines, decode_findings(data["findings"]), decode_findings(data["suppressed"]),
                          external_calls=calls, class_kinds=class_kinds, foreign_bases=foreign_bases,
                          asked_arguments=asked, parameter_sinks=sinks, cached=True)
    except (KeyError, TypeError, ValueError):
        return None


def _valid_manifest_row(row: Any) -> bool:
    return (isinstance(row, list) and len(row) == 2 and isinstance(row[1], str) and isinstance(row[0], list)
            and len(row[0]) == 5 and all(isinstance(v, int) for v in row[0]))


def _racy(signature: StatSignature, started: float) -> bool:
    """Changed so recently that another change in the same clock tick would not show in the stat."""
    newest = max(signature[1], signature[2]) / 1e9
    return newest >= started - RACY_SECONDS


def _header(entry_key: str, body: bytes) -> bytes:
    """The first line of an entry: its key and the digest of its body, so any damage reads as a miss."""
    return f"{entry_key} {hashlib.sha256(body).hexdigest()}".encode()


def decode_findings(items: Any) -> list[Finding]:
    """Findings from a cache entry; raises ValueError on anything malformed."""
    if not isinstance(items, list):
        raise ValueError("findings must be a list")
    try:
        findings = [Finding.from_dict(item) for item in items]
    except (TypeError, KeyError, AttributeError) as exc:
        raise ValueError(f"malformed finding: {exc}") from None
    for finding in findings:
        if not all(isinstance(getattr(finding, name), int) for name in _INT_FIELDS) or \
                not all(isinstance(getattr(finding, name), str) for name in _STR_FIELDS) or \
                not isinstance(finding.source, (str, type(None))) or \
                not all(isinstance(getattr(finding, name), (int, type(None))) for name in _OPTIONAL_INT_FIELDS):
            raise ValueError(f"malformed finding: {finding!r}")
    return findings


_INT_FIELDS = ("line", "column", "end_line", "end_column")
_STR_FIELDS = ("path", "code", "name", "message")
_OPTIONAL_INT_FIELDS = ("cell", "file_line", "file_end_line")
