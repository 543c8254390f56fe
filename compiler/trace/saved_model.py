"""SavedModel folders as build inputs: their signatures, read without TensorFlow.

`tfcheck build path/to/saved_model [--signature NAME]` compiles each requested signature (all by
default). The main process never imports TensorFlow, so the signature names are read from
`saved_model.pb` with a minimal protocol-buffer reader: a `SavedModel` (field 2: `meta_graphs`)
holds `MetaGraphDef`s whose field 5, `signature_def`, is a map from name to `SignatureDef`; map
entries keep the key in field 1. Only those fields are decoded, over a memoryview, so a large
graph is neither copied nor parsed. The tracing child loads the SavedModel with TensorFlow
(`compiler/trace/bridge.py`, `load_saved_signature`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path

from tfcheck.compiler.trace.discover import AnnotatedFunction

SAVED_MODEL_PB = "saved_model.pb"
_META_GRAPHS, _SIGNATURE_DEF, _MAP_KEY = 2, 5, 1
_LENGTH_DELIMITED = 2


class SavedModelError(ValueError):
    """`saved_model.pb` is not a SavedModel protocol buffer this reader understands."""


def is_saved_model(path: Path) -> bool:
    return path.is_dir() and (path / SAVED_MODEL_PB).is_file()


def signature_names(folder: Path) -> list[str]:
    """The signatures of the SavedModel in `folder`, sorted, without TensorFlow's internal
    `__saved_model_init_op`; SavedModelError for a file that does not parse."""
    data = memoryview((folder / SAVED_MODEL_PB).read_bytes())
    names = {
        bytes(key).decode("utf-8", "replace")
        for meta_graph in _submessages(data, _META_GRAPHS)
        for entry in _submessages(meta_graph, _SIGNATURE_DEF)
        for key in _submessages(entry, _MAP_KEY)
    }
    return sorted(name for name in names if not name.startswith("__"))


def _submessages(data: memoryview, number: int) -> Iterator[memoryview]:
    """The length-delimited values of field `number` in the message `data`."""
    position = 0
    while position < len(data):
        key, position = _varint(data, position)
        field, wire_type = key >> 3, key & 7
        if wire_type == 0:
            _, position = _varint(data, position)
            continue
        if wire_type in (1, 5):
            position += 8 if wire_type == 1 else 4
        elif wire_type == _LENGTH_DELIMITED:
            length, position = _varint(data, position)
            if field == number and position + length <= len(data):
                yield data[position:position + length]
            position += length
        else:
            raise SavedModelError(f"unsupported protocol buffer wire type {wire_type}")
        if position > len(data):
            raise SavedModelError("truncated protocol buffer")


def _varint(data: memoryview, position: int) -> tuple[int, int]:
    value = shift = 0
    while position < len(data) and shift < 64:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, position
        shift += 7
    raise SavedModelError("truncated or overlong varint")


def module_label(folder: Path) -> str:
    """The folder's name as an identifier (`my-model` -> `my_model`): the `module` part of its
    signatures' labels (`my_model.serving_default`), as in the config's `shapes` keys."""
    name = re.sub(r"\W", "_", folder.resolve().name) or "saved_model"
    return f"_{name}" if name[0].isdigit() else name


def saved_model_functions(folder: Path, wanted: Sequence[str]) -> tuple[list[AnnotatedFunction], list[str]]:
    """One build entry per requested signature (every signature when `wanted` is empty), and the
    errors that stop the run (an unreadable `saved_model.pb`). A requested signature that the
    SavedModel lacks, or whose name is not an identifier, fails that entry alone."""
    try:
        names = signature_names(folder)
    except (OSError, SavedModelError) as error:
        return [], [f"{folder}: cannot read {SAVED_MODEL_PB}: {error}"]
    module = module_label(folder)
    functions = []
    for name in wanted or names:
        problem = None
        if name not in names:
            problem = (f"{module}.{name}: the SavedModel {folder} has no signature {name!r}; its signatures: "
                       f"{', '.join(names) or '(none)'}")
        elif not name.isidentifier():
            problem = (f"{module}.{name}: signature name {name!r} is not a Python identifier, and an artifact is "
                       "named after its signature (names are identifiers, never paths); re-export it under "
                       "another name")
        functions.append(AnnotatedFunction(path=folder, module=module, root=folder.resolve().parent, qualname=name,
                                           line=0, end_line=0, problem=problem, saved_model=True))
    return functions, []
