"""benchmarks/verdicts.py: a verdict stays attached to its finding when lines move, and the table counts it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import verdicts  # noqa: E402 - a script of benchmarks/, not a package

BUGGY = "import tensorflow as tf\n@tf.function\ndef f(x):\n    print(x)\n    return x\n"


def _report(corpus: Path, line: int, out: Path) -> Path:
    finding = {"path": str(corpus / "a.py"), "line": line, "code": "TFC001", "message": "print() runs only while tracing"}
    out.write_text(json.dumps([finding]))
    return out


def test_verdict_survives_a_line_move_and_counts(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.py").write_text(BUGGY)
    first = verdicts.judgeables(_report(corpus, 4, tmp_path / "f1.json"), corpus)
    record = {"key": first[0].key, "verdict": "TRUE", "reason": "prints once", "judge": "t", "judged_at": "abc"}
    book = tmp_path / "v.jsonl"
    assert verdicts.add([json.dumps(record)], book) == 1
    (corpus / "a.py").write_text("# a comment moves every line\n" + BUGGY)
    moved = verdicts.judgeables(_report(corpus, 5, tmp_path / "f2.json"), corpus)
    known = verdicts.read_verdicts(book)
    assert moved[0].key == first[0].key and not list(verdicts.pending(moved, known, 30, 36))
    assert "| TFC001 | 1 | - | 1 | 1 | 0 | 0 | 1.00 |" in verdicts.table(moved, known, None)


def test_sample_is_seeded_per_rule() -> None:
    items = [verdicts.Judgeable(f"k{i}", "a.py", i, "TFC002", "", "") for i in range(50)]
    assert verdicts.sampled(items, 30, 1) == verdicts.sampled(items, 30, 1)
    assert len(verdicts.sampled(items, 30, 1)) == 30 and len(verdicts.sampled(items[:10], 30, 1)) == 10


def test_recall_counts_a_site_found_when_its_rule_is_on_its_line(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.py").write_text(BUGGY)
    hunt = tmp_path / "hunt.jsonl"
    sites = [{"path": "a.py", "line": 4, "rule": "TFC001", "real": True, "reason": "print", "hunter": "h"},
             {"path": "a.py", "line": 5, "rule": "TFC009", "real": True, "reason": "made up", "hunter": "h"},
             {"path": "a.py", "line": 3, "rule": "TFC002", "real": False, "reason": "no", "hunter": "h"}]
    hunt.write_text("".join(json.dumps(site) + "\n" for site in sites))
    table = verdicts.recall(hunt, _report(corpus, 4, tmp_path / "f.json"), corpus, Path("."))
    assert "| TFC001 | 1 | 1 | 0 | 1.00 |" in table and "| TFC009 | 1 | 0 | 1 | 0.00 |" in table
    assert "- a.py:5 TFC009: made up" in table and "3 candidate sites read, 2 real pitfalls" in table
