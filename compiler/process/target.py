"""A build target as every process of the build names it: one frozen `BuildTarget`.

The main process resolves what `--target`, `--arch`, the config and a function's `targets=` mean
(`compiler/build/targets.py`), once per run; the messages carry the result to the tracing child
(for the cache key) and to the compile child (what TVM compiles for), and the manifest records its
JSON. Nothing here imports TVM: a `tvm.target.Target` is made from `json` where code is generated.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# The TVM target kinds a build can compile for, and where their artifacts run.
DEVICES = {"llvm": "cpu", "cuda": "cuda"}


@dataclass(frozen=True)
class BuildTarget:
    """A TVM target JSON object, kept as its text so that no one can change it after resolution;
    the key order is the one it was resolved in (the manifest writes it so), the cache key hashes
    `canonical`, in which any order of the same keys is the same target."""

    text: str

    @classmethod
    def of(cls, target: Mapping[str, Any]) -> BuildTarget:
        return cls(json.dumps(dict(target)))

    @property
    def json(self) -> dict[str, Any]:
        """The TVM target JSON object (a fresh copy each time)."""
        return json.loads(self.text)

    @property
    def canonical(self) -> str:
        """Sorted-key JSON without spaces: what the cache key hashes."""
        return json.dumps(self.json, sort_keys=True, separators=(",", ":"))

    @property
    def device(self) -> str:
        """`cpu` or `cuda`: where the artifact runs."""
        return DEVICES[self.json["kind"]]

    @property
    def label(self) -> str:
        """The short form for tables and export names: `llvm:rocketlake`, `cuda:sm_90`."""
        target = self.json
        if target["kind"] == "cuda":
            return f"cuda:{target.get('arch', '?')}"
        return f"llvm:{target.get('mcpu', 'generic')}"
