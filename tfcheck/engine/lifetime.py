"""How long an object's Python state lives, seen from graph code: one trace, or longer.

Graph code writing to `self` is a pitfall only when the object outlives the trace. Two shapes do not
(JUDGING.md: "the state touched belongs to an object created during this same call", "the state is
written and read within the same trace only"), and the writes they make are neither a side effect a
later call misses (TFC002) nor a tensor read out of its graph (TFC009):

- **Objects made per call**: a class whose every instance the file makes inside graph code, kept in
  a local and used there only as a receiver. tf_agents' `BatchSquash` (networks/utils.py, copied into
  many projects) caches a tensor's shape in `flatten` for `unflatten`, and is built where it is used;
  an input processor built inside a `Dataset.map` function is another.
- **Scratch attributes**: an attribute that every graph method writing it stores into before it reads
  it (`self.endpoints = {...}`, `self.endpoints['head'] = x`), never in a graph loop, and that the file
  reads only in the trace that wrote it: in that method, or on the object just called (`block(x)`,
  then `block.endpoints`). TensorFlow's reference EfficientNet
  (tensorflow/tpu efficientnet_model.py, copied into many repositories) fills `self.endpoints` in each
  block's `call` and the model's `call` reads `block.endpoints` in the same trace. Written but never
  read in the file, it is kept for someone else, and stays a finding.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from tfcheck.engine.graphcode import GraphCode
from tfcheck.engine.index import FileIndex
from tfcheck.engine.kinds import MUTATING_METHODS
from tfcheck.engine.loops import may_be_graph_loop
from tfcheck.engine.scopes import ClassInfo, FunctionInfo

Callers = Callable[[FunctionInfo], "list[tuple[ast.Call, FunctionInfo | None]]"]


class Lifetimes:
    """Per-call classes and scratch attributes of one file, each computed once and on first use."""

    def __init__(self, index: FileIndex, graph: GraphCode, callers: Callers) -> None:
        self.index = index
        self.graph = graph
        self.callers = callers
        self._per_call: dict[ClassInfo, bool] = {}
        self._scratch: dict[tuple[ClassInfo, str], bool] = {}
        self._creations: dict[ClassInfo, list[tuple[ast.Call, FunctionInfo | None]]] | None = None
        self._attribute_reads: dict[str, list[ast.Attribute]] | None = None
        self._subclasses: dict[ClassInfo, list[ClassInfo]] | None = None
        self._touches: dict[str, list[tuple[ast.Attribute, FunctionInfo]]] | None = None

    # -- objects made per call ----------------------------------------------------------------------
    def made_per_call(self, cls: ClassInfo) -> bool:
        """Whether every instance of `cls` (or of a class of the file built on it) that the file makes
        is made in graph code and lives in a local only as long as that call; at least one is."""
        if cls not in self._per_call:
            creations = [found for c in self._descendants(cls) for found in self._creations_of().get(c, [])]
            self._per_call[cls] = bool(creations) and all(self._lives_in_call(call, caller) for call, caller in creations)
        return self._per_call[cls]

    def _creations_of(self) -> dict[ClassInfo, list[tuple[ast.Call, FunctionInfo | None]]]:
        if self._creations is None:
            self._creations = {}
            for call, caller in self.index.calls:
                cls = self.index.called_class(call)
                if cls is not None:
                    self._creations.setdefault(cls, []).append((call, caller))
        return self._creations

    def _descendants(self, cls: ClassInfo) -> list[ClassInfo]:
        """`cls` and the classes of the file built on it (one pass over the file's classes, once)."""
        if self._subclasses is None:
            self._subclasses = {}
            for c in self.index.classes:
                for base in self.index.class_chain(c):
                    self._subclasses.setdefault(base, []).append(c)
        return self._subclasses.get(cls, [cls])

    def _lives_in_call(self, call: ast.Call, caller: FunctionInfo | None) -> bool:
        """`C(...)` in graph code, used at once as a receiver or kept in a local used only as one."""
        if caller is None or not self.graph.is_graph_function(caller):
            return False
        parent = self.index.parent(call)
        if _used_as_receiver(call, parent):
            return True
        if not (isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name)):
            return False
        name = parent.targets[0].id
        if name in caller.scope.global_names or name in caller.scope.nonlocal_names or self._in_graph_loop(call, caller):
            return False
        uses = self.index.uses_of(name, caller)
        return all(_used_as_receiver(use, self.index.parent(use)) and not self._in_graph_loop(use, caller) for use in uses)

    def _in_graph_loop(self, node: ast.AST, function: FunctionInfo) -> bool:
        """Inside a loop of `function` that AutoGraph may turn into a graph loop: its body is a graph of
        its own, so what it stores and what is read after the loop are in two graphs (tensorflow#37444)."""
        return any(may_be_graph_loop(self.index, loop) for loop in self.index.loops_around(node, within=function.node))

    # -- scratch attributes -------------------------------------------------------------------------
    def is_scratch(self, cls: ClassInfo, attr: str) -> bool:
        """Whether `self.<attr>` of `cls` is each trace's own scratch: stored into before it is read by
        every graph method that writes it, and read in the file only by the trace that wrote it."""
        key = (cls, attr)
        if key not in self._scratch:
            related = self._related(cls)
            writers = self._graph_writers(related, attr)
            self._scratch[key] = self._read_within_trace(attr, writers, related) and all(
                self._written_first(method, attr) and not self._written_in_graph_loop(method, attr)
                for method in writers)
        return self._scratch[key]

    def _graph_writers(self, related: set[int], attr: str) -> set[FunctionInfo]:
        """The graph functions that store into `self.<attr>` of the `related` classes (a class, its bases
        and subclasses): methods, and functions nested in them (a `recompute_grad` closure in `call`)."""
        writers = set()
        for touch, function in self._self_touches().get(attr, []):
            owner = self.index.class_of_self(touch)
            if owner is not None and id(owner) in related and self._stores(touch) and self.graph.is_graph_function(function):
                writers.add(function)
        return writers

    def _related(self, cls: ClassInfo) -> set[int]:
        """`cls`, its bases and the classes built on it, by identity: those whose `self` may be `cls`'s."""
        return {id(c) for c in self._descendants(cls)} | {id(c) for c in self.index.class_chain(cls)}

    def _self_touches(self) -> dict[str, list[tuple[ast.Attribute, FunctionInfo]]]:
        """Every `self.<attr>` in the file's functions, by attribute name (once per file)."""
        if self._touches is None:
            self._touches = {}
            for function in self.index.functions:
                for node in function.nodes:
                    if isinstance(node, ast.Attribute) and self.index.is_self_attribute(node):
                        self._touches.setdefault(node.attr, []).append((node, function))
        return self._touches

    def _written_in_graph_loop(self, method: FunctionInfo, attr: str) -> bool:
        """Whether `method` stores into `self.<attr>` inside a graph loop (tensorflow#57756: TensorArrays
        written in a `tf.range` loop, on `self`), or is called from inside one (tensorflow#37444)."""
        if any(caller is not None and self._in_graph_loop(call, caller) for call, caller in self.callers(method)):
            return True
        return any(self._in_graph_loop(node, method) for node in method.nodes if isinstance(node, ast.Attribute)
                   and node.attr == attr and self.index.is_self_attribute(node)
                   and (not isinstance(node.ctx, ast.Load) or _stored_into(node, self.index.parent(node))))

    def _written_first(self, method: FunctionInfo, attr: str) -> bool:
        """Whether the method's first touch of `self.<attr>`, in the order Python evaluates it, stores
        into it (`self.endpoints = {...}`, `self.endpoints[k] = v`, `.update(...)`): what the trace reads
        back is then what it wrote. A read first (`self.x += 1`, `if self.cache:`) sees an older trace."""
        touches = self._touches_in(method, attr)
        if not touches:
            return False
        first = min(touches, key=self._evaluation_order)
        return self._stores(first)

    def _evaluation_order(self, node: ast.Attribute) -> tuple[int, int]:
        """Where a touch happens: an assignment's targets after its value, everything else in place."""
        statement = self.index.enclosing_statement(node)
        value = getattr(statement, "value", None)
        if isinstance(statement, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and value is not None \
                and not self.index.is_inside(node, value):
            return statement.end_lineno or statement.lineno, statement.end_col_offset or 0
        return node.lineno, node.col_offset

    def _touches_in(self, method: FunctionInfo, attr: str) -> list[ast.Attribute]:
        """`self.<attr>` in `method`, but for reads of its static shape or dtype (`self.bias.shape`, to
        draw a new sample of the same shape), which see no tensor of another trace."""
        return [node for node, function in self._self_touches().get(attr, []) if function is method
                and not self._metadata_read(node)]

    def _metadata_read(self, node: ast.Attribute) -> bool:
        parent = self.index.parent(node)
        return isinstance(parent, ast.Attribute) and parent.value is node and parent.attr in ("shape", "dtype")

    def _stores(self, node: ast.Attribute) -> bool:
        """A store into `self.<attr>` that reads nothing first (an augmented assignment reads)."""
        if isinstance(node.ctx, ast.Load):
            return _stored_into(node, self.index.parent(node))
        return not isinstance(self.index.parent(node), ast.AugAssign)

    def _read_within_trace(self, attr: str, writers: set[FunctionInfo], related: set[int]) -> bool:
        """Whether `.<attr>` is read in the file, each time by the trace that wrote it: in a graph method
        that starts it afresh, or on an object (`block.endpoints`) that the reading graph function
        called earlier (`block(x)`), in the same trace."""
        reads = self._reads_of().get(attr, [])
        return bool(reads) and all(self._same_trace_read(read, writers, related) for read in reads)

    def _same_trace_read(self, read: ast.Attribute, writers: set[FunctionInfo], related: set[int]) -> bool:
        if self.index.is_self_attribute(read) and id(self.index.class_of_self(read)) not in related:
            return True  # another class's attribute of the same name
        function = self.index.function_of(read)
        if function is None or not self.graph.is_graph_function(function):
            return False
        if self.index.is_self_attribute(read):
            return function in writers or self._writer_called_before(read, function, writers)
        receiver = self.index.text(read.value)
        return any(isinstance(node, ast.Call) and (node.lineno, node.col_offset) < (read.lineno, read.col_offset)
                   and receiver in self._called_objects(node.func) for node in function.nodes)

    def _writer_called_before(self, read: ast.Attribute, function: FunctionInfo, writers: set[FunctionInfo]) -> bool:
        """`self.call_weights()` earlier in `function`, a method that writes what `read` reads (edward2's
        layers draw their weights so, then read them)."""
        return any(isinstance(node, ast.Call) and (node.lineno, node.col_offset) < (read.lineno, read.col_offset)
                   and isinstance(node.func, ast.Attribute) and self.index.is_self_attribute(node.func)
                   and self.index.called_function(node) in writers for node in function.nodes)

    def _called_objects(self, func: ast.expr) -> tuple[str, ...]:
        """What a call may run, as source text: `self._head` for `self._head(x)` (the object called) and
        `block` for `block.call(x)` (a method of the object)."""
        if isinstance(func, ast.Attribute):
            return self.index.text(func), self.index.text(func.value)
        return (self.index.text(func),)

    def _reads_of(self) -> dict[str, list[ast.Attribute]]:
        """Every `<anything>.<attr>` read in the file, by attribute name (once per file); storing into
        it (`x.attr[k] = v`, `x.attr.append(v)`) is no read."""
        if self._attribute_reads is None:
            self._attribute_reads = {}
            for node, _ in self.index.all_nodes():
                if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) \
                        and not _stored_into(node, self.index.parent(node)):
                    self._attribute_reads.setdefault(node.attr, []).append(node)
        return self._attribute_reads


def _used_as_receiver(node: ast.AST, parent: ast.AST | None) -> bool:
    """`node.attr` or `node(...)`: the object is used, not passed on, stored or returned."""
    return (isinstance(parent, ast.Attribute) and parent.value is node) or \
        (isinstance(parent, ast.Call) and parent.func is node)


def _stored_into(node: ast.AST, parent: ast.AST | None) -> bool:
    """`node[k] = v`, `del node[k]`, `node.append(v)`: a write into the container `node` holds."""
    if isinstance(parent, ast.Subscript) and parent.value is node:
        return not isinstance(parent.ctx, ast.Load)
    return isinstance(parent, ast.Attribute) and parent.value is node and parent.attr in MUTATING_METHODS
