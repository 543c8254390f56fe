"""Many threads at once, and a fresh process that loads and calls without TensorFlow or `tvm`."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import tfcheck


def test_many_threads_get_the_single_threaded_results(artifacts):
    lib = tfcheck.load(artifacts(("scale", (1, 4)), ("scale", (3, 4)), ("addmul", (2, 3))))
    rng = np.random.default_rng(0)
    calls = [("scale", (rng.standard_normal((1 + 2 * (i % 2), 4)).astype(np.float32),))
             if i % 3 else ("addmul", tuple(rng.standard_normal((2, 2, 3)).astype(np.float32)))
             for i in range(600)]
    expected = [lib[name](*args) for name, args in calls]
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda call: lib[call[0]](*call[1]), calls))
    for want, got in zip(expected, results):
        if isinstance(want, dict):
            assert want.keys() == got.keys()
            for key in want:
                np.testing.assert_array_equal(want[key], got[key])
        else:
            np.testing.assert_array_equal(want, got)


def test_fresh_process_runs_without_tensorflow_tvm_or_the_compiler(artifacts):
    out = artifacts(("addmul", (2, 3)), ("pair", (2, 3)))
    script = textwrap.dedent(f"""
        import json, sys
        import numpy as np
        import tfcheck
        lib = tfcheck.load({str(out)!r})
        x = np.arange(6, dtype=np.float32).reshape(2, 3)
        result = lib.addmul(x, x)
        pair = lib.pair(np.ones((2, 3), np.int32))
        heavy = sorted(m for m in sys.modules
                       if m.split(".")[0] in ("tensorflow", "tvm", "keras")
                       or m.startswith("tfcheck.compiler"))
        print(json.dumps({{"sum": result["sum"].tolist(), "pair": pair[1].tolist(),
                          "heavy": heavy}}))
    """)
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                               check=True, timeout=120)
    report = json.loads(completed.stdout)
    assert report["heavy"] == []
    assert report["sum"] == (2 * np.arange(6).reshape(2, 3)).tolist()
    assert report["pair"] == [[1, 1, 1], [1, 1, 1]]


def test_import_tfcheck_imports_nothing_heavy():
    script = ("import sys, tfcheck; "
              "print(sorted(m for m in sys.modules if m.split('.')[0] in "
              "('numpy', 'tensorflow', 'tvm', 'tvm_ffi', 'libcst', 'rich', 'click')))")
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                               check=True, timeout=60)
    assert completed.stdout.strip() == "[]"
