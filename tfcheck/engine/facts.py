"""FileFacts: everything the rules need to know about one file, computed once.

Construction parses nothing and walks the tree once (scopes.py); graph-code regions are found right
after, because every rule asks for them. Other facts (value kinds, attribute assignments, loop
kinds) are computed on first use and cached, so a file with no graph code costs one walk.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property

from tfcheck.engine import tfcalls, tfobjects, values
from tfcheck.engine.names import BUILTIN_NAMES, TF_FUNCTION, canonical
from tfcheck.engine.scopes import Binding, ClassInfo, FunctionInfo, Scope, collect_scopes
from tfcheck.engine.source import SourceFile
from tfcheck.engine.state import OuterMutation, find_explicit_traces, find_outer_mutations

_MODEL_BASES = frozenset({"keras.Model", "keras.models.Model", "keras.Sequential", "keras.models.Sequential"})
_LAYER_BASES = frozenset({"keras.layers.Layer", "keras.Layer", "keras.engine.base_layer.Layer"})
KERAS_STEP_METHODS = frozenset({"train_step", "test_step", "predict_step"})

# Functional control flow: the argument positions and keywords that take functions traced as graph code.
CONTROL_FLOW_FUNCTION_ARGS: dict[str, tuple[tuple[int, ...], tuple[str, ...]]] = {
    "tensorflow.map_fn": ((0,), ("fn",)),
    "tensorflow.vectorized_map": ((0,), ("fn",)),
    "tensorflow.while_loop": ((0, 1), ("cond", "body")),
    "tensorflow.cond": ((1, 2), ("true_fn", "false_fn")),
    "tensorflow.switch_case": ((1,), ("branch_fns", "default")),
    "tensorflow.case": ((0,), ("pred_fn_pairs", "default")),
    "tensorflow.scan": ((0,), ("fn",)),
    "tensorflow.foldl": ((0,), ("fn",)),
    "tensorflow.foldr": ((0,), ("fn",)),
}
# tf.data methods whose function argument is traced.
DATASET_FUNCTION_ARGS: dict[str, tuple[tuple[int, ...], tuple[str, ...]]] = {
    "map": ((0,), ("map_func",)),
    "filter": ((0,), ("predicate",)),
    "flat_map": ((0,), ("map_func",)),
    "interleave": ((0,), ("map_func",)),
    "reduce": ((1,), ("reduce_func",)),
    "scan": ((1,), ("scan_func",)),
}
# Functions whose function argument runs eagerly, outside the graph.
EAGER_FUNCTION_ARGS: dict[str, tuple[tuple[int, ...], tuple[str, ...]]] = {
    "tensorflow.py_function": ((0,), ("func",)),
    "tensorflow.numpy_function": ((0,), ("func",)),
}


@dataclass(frozen=True)
class EngineSettings:
    """The configuration that changes what the engine considers graph code."""

    function_aliases: tuple[str, ...] = ()
    keras_call_is_graph: bool = False


@dataclass
class ExternalCall:
    """A call from graph code to a function defined in another module (resolved by the project pass)."""

    target: str
    caller: str
    line: int


@dataclass
class GraphCode:
    """Which functions are graph code, why, and what they call outside this file."""

    reasons: dict[FunctionInfo, str] = field(default_factory=dict)
    eager: set[FunctionInfo] = field(default_factory=set)
    external_calls: list[ExternalCall] = field(default_factory=list)


class FileFacts:
    """Facts about one parsed file. Rules read these; they never re-walk scopes or imports."""

    def __init__(self, source: SourceFile, module_name: str, settings: EngineSettings | None = None,
                 extra_roots: Mapping[str, str] | None = None, is_package: bool = False) -> None:
        self.source = source
        self.path = source.path
        self.module_name = module_name
        self.settings = settings or EngineSettings()
        self.tf_function_names = frozenset({TF_FUNCTION, *map(canonical, self.settings.function_aliases)})
        table = collect_scopes(source.tree, module_name, is_package)
        self.module_scope: Scope = table.module
        self.functions: list[FunctionInfo] = table.functions
        self.classes: list[ClassInfo] = table.classes
        self.imports = {local: canonical(name) for local, name in table.imports.items()}
        self._parents = table.parents
        self._name_scopes = table.name_scopes
        self._module_nodes = table.module_nodes
        self._by_node = table.by_node
        self._class_by_node = {cls.node: cls for cls in self.classes}
        self._init_scope_cache: dict[FunctionInfo, frozenset[ast.AST]] = {}
        self._loads_cache: dict[ast.AST, dict[str, list[ast.Name]]] = {}
        self.graph = _find_graph_code(self, extra_roots or {})

    # -- tree navigation -------------------------------------------------------------------------
    def parent(self, node: ast.AST) -> ast.AST | None:
        return self._parents.get(node)

    def ancestors(self, node: ast.AST) -> Iterator[ast.AST]:
        parent = self._parents.get(node)
        while parent is not None:
            yield parent
            parent = self._parents.get(parent)

    def function_of(self, node: ast.AST) -> FunctionInfo | None:
        """The innermost function whose body contains `node` (decorators belong to the outer one)."""
        previous = node
        for ancestor in self.ancestors(node):
            info = self._by_node.get(ancestor)
            if info is not None and _in_body(ancestor, previous):
                return info
            previous = ancestor
        return None

    def function_info(self, node: ast.AST) -> FunctionInfo | None:
        return self._by_node.get(node)

    def class_info(self, node: ast.AST) -> ClassInfo | None:
        return self._class_by_node.get(node)

    def all_nodes(self) -> Iterator[tuple[ast.AST, FunctionInfo | None]]:
        """Every node with the function it belongs to (None at module level)."""
        for node in self._module_nodes:
            yield node, None
        for info in self.functions:
            for node in info.nodes:
                yield node, info

    # -- names ------------------------------------------------------------------------------------
    def loads_under(self, function: FunctionInfo | None) -> Mapping[str, list[ast.Name]]:
        """The names read anywhere in a function's tree (its decorators, defaults and nested functions
        included), or in the whole module for None, by identifier (in no particular order).

        Built on first use, once per function: a rule looking for the uses of names would otherwise
        walk the module once per module-level function, quadratic in the file's size. The module's
        names were all seen by the scope walk, so its index needs no walk of its own.
        """
        node = function.node if function is not None else self.source.tree
        found = self._loads_cache.get(node)
        if found is None:
            found = self._loads_cache[node] = {}
            names = self._name_scopes if function is None else ast.walk(node)
            for child in names:
                if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Load):
                    found.setdefault(child.id, []).append(child)
        return found

    def scope_of_name(self, name: ast.Name) -> Scope | None:
        return self._name_scopes.get(name)

    def lookup(self, name: str, scope: Scope | None) -> tuple[Scope | None, list[Binding]]:
        """Python's LEGB lookup from `scope`: the scope that binds `name` and its bindings.

        Class scopes are skipped for code nested inside them, as Python does.
        """
        start = scope
        if scope is not None and name in scope.global_names:
            return self.module_scope, self.module_scope.bindings.get(name, [])
        while scope is not None:
            if (scope is start or scope.kind != "class") and name in scope.bindings:
                return scope, scope.bindings[name]
            scope = scope.parent
        return None, []

    def bindings_of(self, name: ast.Name) -> list[Binding]:
        return self.lookup(name.id, self._name_scopes.get(name))[1]

    def binding_scope(self, name: ast.Name) -> Scope | None:
        return self.lookup(name.id, self._name_scopes.get(name))[0]

    def resolve(self, expr: ast.AST) -> str | None:
        """The canonical dotted name `expr` refers to (`tf.print` -> `tensorflow.print`), or None.

        Module-level functions and classes of this file resolve to `<module>.<name>`, builtins that
        are not shadowed to `builtins.<name>`; locals and values that are not names resolve to None.
        """
        if isinstance(expr, ast.Attribute):
            base = self.resolve(expr.value)
            if base is None:
                return None
            return canonical(f"{base}.{expr.attr}") if base[:1] in "tk" else f"{base}.{expr.attr}"
        if not isinstance(expr, ast.Name):
            return None
        scope, bindings = self.lookup(expr.id, self._name_scopes.get(expr))
        if scope is None:
            return f"builtins.{expr.id}" if expr.id in BUILTIN_NAMES else None
        if any(b.kind == "import" for b in bindings):
            return self.imports.get(expr.id)
        if scope is self.module_scope and bindings and all(b.kind in ("def", "class") for b in bindings):
            return f"{self.module_name}.{expr.id}" if self.module_name else expr.id
        return None

    @cached_property
    def tensorflow_alias(self) -> str | None:
        """The name this module imports TensorFlow as at module level (`tf`), for fixes that call it."""
        for local, qualified in self.imports.items():
            if qualified == "tensorflow" and any(b.kind == "import" for b in self.module_scope.bindings.get(local, [])):
                return local
        return None

    # -- functions and classes --------------------------------------------------------------------
    def function_target(self, expr: ast.AST) -> list[FunctionInfo]:
        """The functions of this file that an expression used as a callable can be."""
        if isinstance(expr, ast.Lambda):
            return [self._by_node[expr]]
        if isinstance(expr, (ast.List, ast.Tuple)):
            return [info for element in expr.elts for info in self.function_target(element)]
        if isinstance(expr, ast.Dict):
            return [info for value in expr.values for info in self.function_target(value)]
        if isinstance(expr, ast.Call) and self.resolve(expr.func) == "functools.partial" and expr.args:
            return self.function_target(expr.args[0])
        if isinstance(expr, ast.Attribute) and self.is_self_attribute(expr):
            cls = self.class_of_self(expr)
            method = self.method_of(cls, expr.attr) if cls is not None else None
            return [method] if method is not None else []
        if isinstance(expr, ast.Name):
            found = []
            for binding in self.bindings_of(expr):
                if binding.kind == "def":
                    found.append(self._by_node[binding.node])
                elif binding.value is not None and isinstance(binding.value, (ast.Lambda, ast.Call)) \
                        and not any(node is expr for node in ast.walk(binding.value)):  # f = tf.function(f)
                    found.extend(self._wrapped_function(binding.value))
            return found
        return []

    def _wrapped_function(self, value: ast.expr) -> list[FunctionInfo]:
        """`f = lambda ...` or `f = tf.function(g)`: the function behind the name."""
        if isinstance(value, ast.Lambda):
            return [self._by_node[value]]
        if isinstance(value, ast.Call) and self.resolve(value.func) in self.tf_function_names and value.args:
            return self.function_target(value.args[0])
        return []

    def called_function(self, call: ast.Call) -> FunctionInfo | None:
        targets = self.function_target(call.func)
        return targets[0] if len(targets) == 1 else None

    def called_class(self, call: ast.Call) -> ClassInfo | None:
        if not isinstance(call.func, ast.Name):
            return None
        for binding in self.bindings_of(call.func):
            if binding.kind == "class":
                return self._class_by_node.get(binding.node)
        return None

    def method_of(self, cls: ClassInfo, name: str) -> FunctionInfo | None:
        """A method of `cls` or of a base class defined in this file."""
        seen: set[int] = set()
        while cls is not None and id(cls) not in seen:
            seen.add(id(cls))
            if name in cls.methods:
                return cls.methods[name]
            cls = self._local_base(cls)
        return None

    def class_chain(self, cls: ClassInfo) -> Iterator[ClassInfo]:
        """`cls`, then its base classes as far as they are defined in this file."""
        seen: set[int] = set()
        current: ClassInfo | None = cls
        while current is not None and id(current) not in seen:
            seen.add(id(current))
            yield current
            current = self._local_base(current)

    def _local_base(self, cls: ClassInfo) -> ClassInfo | None:
        for base in cls.node.bases:
            if isinstance(base, ast.Name):
                for binding in self.bindings_of(base):
                    if binding.kind == "class" and binding.node in self._class_by_node:
                        return self._class_by_node[binding.node]
        return None

    @cached_property
    def _class_kinds(self) -> dict[ClassInfo, str]:
        return {cls: self._compute_class_kind(cls, 0) for cls in self.classes}

    def class_kind(self, cls: ClassInfo) -> str:
        """`model`, `layer` or `object`: what instances of a class of this file are."""
        return self._class_kinds.get(cls) or self._compute_class_kind(cls, 0)

    def _compute_class_kind(self, cls: ClassInfo, depth: int) -> str:
        for base in cls.node.bases:
            name = self.resolve(base)
            if name in _MODEL_BASES:
                return values.MODEL
            if name in _LAYER_BASES:
                return values.LAYER
        local = self._local_base(cls)
        if local is not None and depth < 8:
            return self._compute_class_kind(local, depth + 1)
        return values.OBJECT

    def is_self_attribute(self, expr: ast.AST) -> bool:
        """`self.x` where `self` is the first parameter of the enclosing method."""
        if not (isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name)):
            return False
        method = self._method_owning(expr.value)
        return method is not None and bool(method.params) and method.params[0] == expr.value.id

    def class_of_self(self, expr: ast.Attribute) -> ClassInfo | None:
        method = self._method_owning(expr.value) if isinstance(expr.value, ast.Name) else None
        return method.cls if method is not None else None

    def _method_owning(self, name: ast.Name) -> FunctionInfo | None:
        scope = self.binding_scope(name)
        info = self._by_node.get(scope.node) if scope is not None else None
        return info if info is not None and info.cls is not None else None

    @cached_property
    def _self_attributes(self) -> dict[tuple[ClassInfo, str], list[tuple[ast.AST, ast.expr | None]]]:
        """`self.attr = value` (and `self.attr += ...`) in every method, by (class, attr)."""
        found: dict[tuple[ClassInfo, str], list[tuple[ast.AST, ast.expr | None]]] = {}
        for info in self.functions:
            if info.cls is None:
                continue
            for node in info.nodes:
                for target, value in _assigned_targets(node):
                    if isinstance(target, ast.Attribute) and self.is_self_attribute(target):
                        found.setdefault((info.cls, target.attr), []).append((node, value))
        return found

    def self_attribute_values(self, cls: ClassInfo, attr: str) -> list[tuple[ast.AST, ast.expr | None]]:
        """Every assignment to `self.<attr>` in the methods of `cls` and its local bases."""
        result = []
        seen: set[int] = set()
        while cls is not None and id(cls) not in seen:
            seen.add(id(cls))
            result.extend(self._self_attributes.get((cls, attr), []))
            cls = self._local_base(cls)
        return result

    # -- values ------------------------------------------------------------------------------------
    def kinds(self, expr: ast.AST) -> set[str]:
        """What `expr` can hold: see the kinds in tfcheck.engine.values."""
        return values.expr_kinds(self, expr)  # type: ignore[arg-type]

    def is_rebound(self, scope: Scope, name: str) -> bool:
        """Whether `name` gets a new value after its first binding in `scope`.

        Alternative branches (`try: import x` / `except ImportError: x = None`, `if`/`else`) count as
        one binding; a binding in a loop, an augmented assignment, or an assignment from another
        function through `global`/`nonlocal` counts as a rebinding.
        """
        bindings = scope.bindings.get(name, [])
        statements: set[ast.AST] = set()
        for binding in bindings:
            if binding.kind in ("augassign", "del") or self._bound_elsewhere(binding, scope):
                return True
            statement = self._top_statement(binding.node, scope.node)
            if isinstance(statement, (ast.For, ast.AsyncFor, ast.While)):
                return True
            statements.add(statement)
        return len(statements) > 1

    def _bound_elsewhere(self, binding: Binding, scope: Scope) -> bool:
        """A binding made from a nested function through `global` or `nonlocal`."""
        if binding.kind == "param":
            return False
        owner = self.function_of(binding.node)
        owner_node = owner.node if owner is not None else self.source.tree
        return owner_node is not scope.node and binding.kind != "def"

    def _top_statement(self, node: ast.AST, scope_node: ast.AST) -> ast.AST:
        previous = node
        for ancestor in self.ancestors(node):
            if ancestor is scope_node:
                return previous
            previous = ancestor
        return previous

    # -- graph code ---------------------------------------------------------------------------------
    @property
    def graph_functions(self) -> dict[FunctionInfo, str]:
        """Graph-code functions of this file, with why each is graph code."""
        return self.graph.reasons

    def is_graph_function(self, info: FunctionInfo | None) -> bool:
        return info is not None and info in self.graph.reasons

    def _excluded_for(self, info: FunctionInfo) -> frozenset[ast.AST]:
        """Nodes of a function that run eagerly even in graph code: the bodies of `with tf.init_scope():`."""
        cached = self._init_scope_cache.get(info)
        if cached is None:
            excluded: set[ast.AST] = set()
            for node in info.nodes:
                if isinstance(node, (ast.With, ast.AsyncWith)) and self._is_init_scope(node):
                    for stmt in node.body:
                        excluded.update(ast.walk(stmt))
            cached = self._init_scope_cache[info] = frozenset(excluded)
        return cached

    @cached_property
    def _excluded(self) -> frozenset[ast.AST]:
        """Nodes of graph functions that run eagerly (see _excluded_for)."""
        return frozenset().union(*(self._excluded_for(info) for info in self.graph.reasons))

    def _is_init_scope(self, node: ast.With | ast.AsyncWith) -> bool:
        return any(isinstance(item.context_expr, ast.Call)
                   and self.resolve(item.context_expr.func) == "tensorflow.init_scope" for item in node.items)

    def in_graph_code(self, node: ast.AST) -> bool:
        """Whether `node` runs as traced graph code."""
        return self.is_graph_function(self.function_of(node)) and node not in self._excluded

    @cached_property
    def _graph_nodes_by_type(self) -> dict[type, list[tuple[ast.AST, FunctionInfo]]]:
        buckets: dict[type, list[tuple[ast.AST, FunctionInfo]]] = {}
        excluded = self._excluded
        for info in self.graph.reasons:
            for node in info.nodes:
                if node not in excluded:
                    buckets.setdefault(type(node), []).append((node, info))
        return buckets

    def graph_nodes(self, *types: type) -> list[tuple[ast.AST, FunctionInfo]]:
        """Nodes of the given types in graph code, each with the graph function it belongs to."""
        buckets = self._graph_nodes_by_type
        return [pair for kind in types for pair in buckets.get(kind, ())]

    def graph_calls(self, *qualified: str) -> Iterator[tuple[ast.Call, FunctionInfo]]:
        """Calls in graph code whose callee resolves to one of `qualified`."""
        wanted = set(qualified)
        for node, info in self.graph_nodes(ast.Call):
            assert isinstance(node, ast.Call)
            if self.resolve(node.func) in wanted:
                yield node, info

    @cached_property
    def calls(self) -> list[tuple[ast.Call, FunctionInfo | None]]:
        """Every call in the file with its enclosing function (None at module level)."""
        return [(node, info) for node, info in self.all_nodes() if isinstance(node, ast.Call)]

    @cached_property
    def _call_sites(self) -> dict[FunctionInfo, list[tuple[ast.Call, FunctionInfo | None]]]:
        sites: dict[FunctionInfo, list[tuple[ast.Call, FunctionInfo | None]]] = {}
        for call, caller in self.calls:
            for target in dict.fromkeys(self.function_target(call.func)):
                sites.setdefault(target, []).append((call, caller))
        return sites

    def call_sites(self, info: FunctionInfo) -> list[tuple[ast.Call, FunctionInfo | None]]:
        """The calls that can call `info` (`function_target` of the callee), with the function each is in.

        Indexed once per file on first use: scanning every call of the file for the callers of one
        function made rules quadratic in the number of functions.
        """
        return self._call_sites.get(info, [])

    @cached_property
    def _calls_by_receiver(self) -> dict[str, list[ast.Call]]:
        calls: dict[str, list[ast.Call]] = {}
        for call, _ in self.calls:
            func = call.func
            receiver = func.value if isinstance(func, ast.Attribute) else func
            if isinstance(receiver, ast.Name):
                calls.setdefault(receiver.id, []).append(call)
        return calls

    def calls_on(self, name: str) -> list[ast.Call]:
        """The calls `name(...)` and `name.method(...)` of the file, whatever `name` is bound to there."""
        return self._calls_by_receiver.get(name, [])

    @cached_property
    def explicit_traces(self) -> frozenset[tuple[FunctionInfo, FunctionInfo]]:
        """(function, traced) for each `traced.get_concrete_function(...)` in `function` (engine/state.py)."""
        return find_explicit_traces(self)

    @cached_property
    def outer_mutations(self) -> list[OuterMutation]:
        """Writes in graph code to Python state that outlives the call (tfcheck.engine.state)."""
        return find_outer_mutations(self)

    def is_graph_loop(self, loop: ast.AST) -> bool:
        """Whether AutoGraph turns this `for`/`while` into a graph loop (tensor or dataset driven)."""
        if isinstance(loop, (ast.For, ast.AsyncFor)):
            kinds = self.kinds(loop.iter)
            if kinds & {values.TENSOR, values.DATASET, values.VARIABLE}:
                return True
            return isinstance(loop.iter, ast.Name) and self.is_tensor_param(loop.iter)
        if isinstance(loop, ast.While):
            return any(self.kinds(node) & {values.TENSOR, values.VARIABLE}
                       or (isinstance(node, ast.Name) and self.is_tensor_param(node))
                       for node in ast.walk(loop.test) if isinstance(node, (ast.Call, ast.Name)))
        return False

    @cached_property
    def tf_function_calls(self) -> list[tfcalls.TfFunctionCall]:
        """Calls of this file's tf.functions with arguments bound to parameters (tfcheck.engine.tfcalls)."""
        return tfcalls.find_tf_function_calls(self)

    @cached_property
    def _tf_function_calls_by_function(self) -> dict[FunctionInfo, list[tfcalls.TfFunctionCall]]:
        calls: dict[FunctionInfo, list[tfcalls.TfFunctionCall]] = {}
        for call in self.tf_function_calls:
            calls.setdefault(call.function, []).append(call)
        return calls

    def tf_function_calls_of(self, info: FunctionInfo) -> list[tfcalls.TfFunctionCall]:
        """`tf_function_calls` that call `info`, in source order."""
        return self._tf_function_calls_by_function.get(info, [])

    def is_tensor_param(self, name: ast.Name) -> bool:
        """A parameter of a tf.function with an input_signature: a tensor for sure."""
        scope = self.binding_scope(name)
        info = self._by_node.get(scope.node) if scope is not None else None
        if info is None or name.id not in info.params or isinstance(info.node, ast.Lambda):
            return False
        return any(self.has_input_signature(d) for d in info.node.decorator_list)

    def has_input_signature(self, decorator: ast.expr) -> bool:
        return isinstance(decorator, ast.Call) and self.resolve(decorator.func) in self.tf_function_names \
            and any(k.arg == "input_signature" for k in decorator.keywords)

    def decorated_tf_function(self, info: FunctionInfo) -> ast.expr | None:
        """The `tf.function` decorator of a function, if it has one."""
        if isinstance(info.node, ast.Lambda):
            return None
        for decorator in info.node.decorator_list:
            func = decorator.func if isinstance(decorator, ast.Call) else decorator
            if self.resolve(func) in self.tf_function_names:
                return decorator
        return None

    # -- TensorFlow objects (tfcheck.engine.tfobjects) ------------------------------------------------
    def tensor_array_origins(self, expr: ast.expr) -> list[ast.Call]:
        return tfobjects.tensor_array_origins(self, expr)

    def is_dataset_iterator(self, expr: ast.expr | None) -> bool:
        return tfobjects.is_dataset_iterator(self, expr)

    def is_single_tensor(self, expr: ast.expr) -> bool:
        return tfobjects.is_single_tensor(self, expr)

    # -- positions -----------------------------------------------------------------------------------
    def line_name(self, line: int) -> str:
        """How a message names a line of this file: `line 12`, or in a notebook `line 3 of cell 5`."""
        return self.source.line_name(line)

    def span(self, node: ast.AST) -> tuple[int, int, int, int]:
        """1-based (line, column, end_line, end_column) of a node, columns in characters."""
        line = getattr(node, "lineno", 1)
        end_line = getattr(node, "end_lineno", None) or line
        column = self.source.char_column(line, getattr(node, "col_offset", 0))
        end_offset = getattr(node, "end_col_offset", None)
        end_column = self.source.char_column(end_line, end_offset) if end_offset is not None else column
        return line, column, end_line, end_column

    def text(self, node: ast.AST) -> str:
        """The source text of a node (ast.get_source_segment re-splits the whole file on every call)."""
        line, end_line = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
        if line is None or end_line is None:
            return ""
        lines = [text.encode("utf-8") for text in self.source.lines[line - 1:end_line]]
        if not lines:
            return ""
        lines[-1] = lines[-1][:node.end_col_offset]  # type: ignore[attr-defined]
        lines[0] = lines[0][node.col_offset:]  # type: ignore[attr-defined]
        return b"\n".join(lines).decode("utf-8", errors="replace")


def _in_body(function_node: ast.AST, child: ast.AST) -> bool:
    if isinstance(function_node, ast.Lambda):
        return child is function_node.body
    return child in function_node.body  # type: ignore[attr-defined]


def _assigned_targets(node: ast.AST) -> Iterable[tuple[ast.expr, ast.expr | None]]:
    if isinstance(node, ast.Assign):
        return [(target, node.value) for target in node.targets]
    if isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.value is not None:
        return [(node.target, node.value if isinstance(node, ast.AnnAssign) else None)]
    return []


def function_arguments(call: ast.Call, spec: tuple[tuple[int, ...], tuple[str, ...]]) -> list[ast.expr]:
    """The arguments of `call` at the positions and keywords of `spec`."""
    positions, keywords = spec
    found = [call.args[i] for i in positions if i < len(call.args)]
    found += [k.value for k in call.keywords if k.arg in keywords]
    return found


def _find_graph_code(facts: FileFacts, extra_roots: Mapping[str, str]) -> GraphCode:
    """Find graph-code roots, then follow calls from graph code to a fixed point."""
    graph = GraphCode()
    queue: list[FunctionInfo] = []

    def mark(info: FunctionInfo, reason: str) -> None:
        if info not in graph.reasons:
            graph.reasons[info] = reason
            queue.append(info)

    for info in facts.functions:
        if facts.decorated_tf_function(info) is not None:
            mark(info, "decorated with tf.function")
        elif info.cls is not None and _is_keras_graph_method(facts, info):
            mark(info, f"Keras {info.name} of {info.cls.name}")
        elif info.qualname in extra_roots:
            mark(info, extra_roots[info.qualname])
    for call, _ in facts.calls:
        _mark_call_roots(facts, call, mark, graph)

    while queue:
        info = queue.pop()
        for node in info.nodes:
            if isinstance(node, ast.Call) and node not in facts._excluded_for(info):
                _follow_call(facts, info, node, mark, graph)
    return graph


def _is_keras_graph_method(facts: FileFacts, info: FunctionInfo) -> bool:
    assert info.cls is not None
    kind = facts.class_kind(info.cls)
    if info.name in KERAS_STEP_METHODS:
        return kind == values.MODEL
    return info.name == "call" and facts.settings.keras_call_is_graph and kind in (values.MODEL, values.LAYER)


def _mark_call_roots(facts: FileFacts, call: ast.Call, mark, graph: GraphCode) -> None:
    name = facts.resolve(call.func)
    if name in facts.tf_function_names and call.args:
        for info in facts.function_target(call.args[0]):
            mark(info, f"passed to tf.function at {facts.line_name(call.lineno)}")
    elif name in CONTROL_FLOW_FUNCTION_ARGS:
        for arg in function_arguments(call, CONTROL_FLOW_FUNCTION_ARGS[name]):
            for info in facts.function_target(arg):
                mark(info, f"traced by {name.replace('tensorflow.', 'tf.')} at {facts.line_name(call.lineno)}")
    elif name in EAGER_FUNCTION_ARGS:
        for arg in function_arguments(call, EAGER_FUNCTION_ARGS[name]):
            graph.eager.update(facts.function_target(arg))
    elif isinstance(call.func, ast.Attribute) and call.func.attr in DATASET_FUNCTION_ARGS \
            and _is_dataset(facts, call.func.value):
        for arg in function_arguments(call, DATASET_FUNCTION_ARGS[call.func.attr]):
            for info in facts.function_target(arg):
                mark(info, f"traced by Dataset.{call.func.attr} at {facts.line_name(call.lineno)}")


def _is_dataset(facts: FileFacts, receiver: ast.expr) -> bool:
    if values.DATASET in facts.kinds(receiver):
        return True
    name = receiver.id if isinstance(receiver, ast.Name) else getattr(receiver, "attr", "")
    lowered = name.lower()
    return lowered in ("ds", "dataset") or lowered.endswith(("_ds", "_dataset", "dataset"))


def _follow_call(facts: FileFacts, caller: FunctionInfo, call: ast.Call, mark, graph: GraphCode) -> None:
    """A function called from graph code is graph code too; calls to other modules go to the project."""
    targets = facts.function_target(call.func)
    for target in targets:
        mark(target, f"called from {caller.qualname} ({facts.line_name(call.lineno)}), which is graph code")
    if targets:
        return
    name = facts.resolve(call.func)
    if name is not None and not name.startswith(_NOT_USER_CODE) and not name.startswith(f"{facts.module_name}."):
        graph.external_calls.append(ExternalCall(name, caller.qualname, call.lineno))


_NOT_USER_CODE = ("builtins.", "tensorflow.", "keras.", "numpy.", "math.", "functools.", "typing.")
