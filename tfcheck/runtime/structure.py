"""Nested inputs and outputs (`tf.nest` structures), flattened and rebuilt without TensorFlow.

An artifact's library takes and returns flat lists of tensors; the manifest records how they nest
(docs/artifact-format.md, "Structures"). Each node of a structure is a JSON object:

    {"kind": "tensor"}
    {"kind": "tuple", "length": 2}                 {"kind": "list", "length": 2}
    {"kind": "dict", "keys": ["a", "b"]}           (sorted, the order `tf.nest` flattens them in)
    {"kind": "namedtuple", "name": "Pair", "fields": ["x", "y"]}   (fields in their own order)

A container whose children are all tensors has no `items` (so flat structures are written exactly
as before nesting was supported); otherwise `items` holds one node per child. The runtime cannot
import the user's namedtuple class, so a namedtuple comes back from `tfcheck.load` as an instance
of a namedtuple class made here with the same name and fields: `out.x`, `out[0]`, unpacking and
`_asdict()` work, `isinstance(out, UserClass)` does not (dispatch through `@tfcheck.aot` rebuilds
the tf.function's own structure, its classes included, with TensorFlow).

Every node comes from a manifest, so it is checked before use: kinds, key and field types, names
that `collections.namedtuple` accepts, and depth.
"""

from __future__ import annotations

import collections
import functools
import keyword
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from tfcheck.runtime.errors import InputError

Node = dict[str, Any]
TENSOR: Node = {"kind": "tensor"}
KINDS = ("tensor", "tuple", "list", "dict", "namedtuple")
MAX_DEPTH = 32
_END = object()


class StructureError(ValueError):
    """A structure node that is not one of the forms above (the message says which part)."""


def children(node: Node) -> list[Node]:
    """The child nodes of a container (empty for a tensor); StructureError for a bad node."""
    if not isinstance(node, dict) or node.get("kind") not in KINDS:
        raise StructureError(f"{node!r} is not a structure node (kind one of {', '.join(KINDS)})")
    count = _child_count(node)
    items = node.get("items")
    if items is None:
        return [TENSOR] * count
    if not isinstance(items, list) or len(items) != count:
        raise StructureError(f"{node['kind']} node has {count} children but 'items' = {items!r}")
    return items


def _child_count(node: Node) -> int:
    kind = node["kind"]
    if kind == "tensor":
        return 0
    if kind in ("tuple", "list"):
        length = node.get("length")
        if not isinstance(length, int) or isinstance(length, bool) or length < 0:
            raise StructureError(f"{kind} node needs a 'length' >= 0, got {length!r}")
        return length
    if kind == "dict":
        keys = node.get("keys")
        if not isinstance(keys, list) or not all(isinstance(key, str) for key in keys) or keys != sorted(set(keys)):
            raise StructureError(f"dict node needs sorted, distinct string 'keys', got {keys!r}")
        return len(keys)
    name, fields = node.get("name"), node.get("fields")
    if not (isinstance(fields, list) and _is_class_name(name)
            and all(_is_field_name(field) for field in fields) and len(set(fields)) == len(fields)):
        raise StructureError(f"namedtuple node needs a 'name' and 'fields' that are Python identifiers, "
                             f"got {node.get('name')!r} and {node.get('fields')!r}")
    return len(node["fields"])


def _is_class_name(name: object) -> bool:
    return isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name)


def _is_field_name(name: object) -> bool:
    """What `collections.namedtuple` accepts as a field name (unlike a class name, no leading `_`)."""
    return _is_class_name(name) and not str(name).startswith("_")


def leaf_count(node: Node, depth: int = 0) -> int:
    """How many tensors the structure holds; StructureError for a bad or too deep node."""
    if depth > MAX_DEPTH:
        raise StructureError(f"nested deeper than {MAX_DEPTH} levels")
    nodes = children(node)  # checks the node
    return 1 if node["kind"] == "tensor" else sum(leaf_count(child, depth + 1) for child in nodes)


def leaf_paths(node: Node, prefix: str) -> list[str]:
    """The name of each tensor in flattening order: `features['ids']`, `pair[0]`, `point.x`."""
    if node["kind"] == "tensor":
        return [prefix]
    return [path for step, child in zip(_steps(node), children(node)) for path in leaf_paths(child, prefix + step)]


def _steps(node: Node) -> list[str]:
    if node["kind"] == "dict":
        return [f"[{key!r}]" for key in node["keys"]]
    if node["kind"] == "namedtuple":
        return [f".{field}" for field in node["fields"]]
    return [f"[{index}]" for index in range(_child_count(node))]


def flatten_value(function: str, node: Node, value: Any, path: str) -> list[Any]:
    """The tensors of one argument in flattening order; InputError naming the nested path
    (`features['ids']`) where the value does not have the recorded structure."""
    kind = node["kind"]
    if kind == "tensor":
        return [value]
    if kind == "dict":
        if not isinstance(value, Mapping):
            raise InputError(f"{function}(): argument {path} must be a dict with keys "
                             f"{', '.join(map(repr, node['keys']))}, got {type(value).__name__}")
        missing = [key for key in node["keys"] if key not in value]
        extra = sorted(repr(key) for key in value if key not in node["keys"])
        if missing or extra:
            raise InputError(f"{function}(): argument {path} " + "; ".join(
                ([f"is missing key(s) {', '.join(map(repr, missing))}"] if missing else [])
                + ([f"has unexpected key(s) {', '.join(extra)}"] if extra else [])))
        parts: Sequence[Any] = [value[key] for key in node["keys"]]
    else:
        if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or len(value) != _child_count(node):
            shape = f"{node['name']}({', '.join(node['fields'])})" if kind == "namedtuple" else kind
            raise InputError(f"{function}(): argument {path} must be a {shape} of {_child_count(node)} "
                             f"item(s), got {_describe(value)}")
        parts = value
    return [leaf for step, child, part in zip(_steps(node), children(node), parts)
            for leaf in flatten_value(function, child, part, path + step)]


def _describe(value: Any) -> str:
    size = f" of {len(value)}" if isinstance(value, Sequence) and not isinstance(value, (str, bytes)) else ""
    return f"{type(value).__name__}{size}"


def pack(node: Node, flat: Sequence[Any]) -> Any:
    """The structure rebuilt from its tensors in flattening order (see the module docstring for
    namedtuples)."""
    leaves = iter(flat)
    result = _pack(node, leaves)
    if next(leaves, _END) is not _END:
        raise StructureError("more values than the structure holds")
    return result


def _pack(node: Node, leaves: Iterator[Any]) -> Any:
    kind = node["kind"]
    if kind == "tensor":
        try:
            return next(leaves)
        except StopIteration:
            raise StructureError("fewer values than the structure holds") from None
    values = [_pack(child, leaves) for child in children(node)]
    if kind == "dict":
        return dict(zip(node["keys"], values))
    if kind == "namedtuple":
        return _namedtuple(node["name"], tuple(node["fields"]))(*values)
    return tuple(values) if kind == "tuple" else values


@functools.cache
def _namedtuple(name: str, fields: tuple[str, ...]) -> type:
    """One class per (name, fields), so that two calls return instances of the same class."""
    return collections.namedtuple(name, fields)  # type: ignore[misc]
