"""FileIndex: one walk per file and what can be read off it without any analysis.

Navigation (parents, ancestors, the function a node is in, the statement of a scope that holds a
node, the loop around a node), names (LEGB lookup, bindings, the uses of a name, canonical
resolution), functions and classes (call targets, local base classes, `self.` attributes), the calls
of the file, and positions. Every analysis of the engine (values, graph code, calls of tf.functions,
outer state, loops) is built on this and imports it, never `FileFacts`, so the engine has no circle.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property

from tfcheck.engine import kinds
from tfcheck.engine.names import BUILTIN_NAMES, TF_FUNCTION, canonical
from tfcheck.engine.scopes import Binding, ClassInfo, FunctionInfo, Scope, collect_scopes
from tfcheck.engine.source import SourceFile

_MODEL_BASES = frozenset({"keras.Model", "keras.models.Model", "keras.Sequential", "keras.models.Sequential"})
_LAYER_BASES = frozenset({"keras.layers.Layer", "keras.Layer", "keras.engine.base_layer.Layer"})
LOOPS = (ast.For, ast.AsyncFor, ast.While)
# Attributes a tensor has and Python numbers and lists lack: reading one marks a tf.function parameter a tensor.
_SHAPE_ATTRIBUTES = frozenset({"shape", "get_shape", "set_shape"})
# Names only Keras 2 code uses (tfcheck.engine.index.FileIndex.keras_2).
_KERAS_2_MARKERS = re.compile(r"\btf_keras\b|\boptimizers\.legacy\b|\blayers\.experimental\b|TF_USE_LEGACY_KERAS")
# APIs only Keras 3 has (tfcheck.engine.index.FileIndex.keras_3).
_KERAS_3_MARKERS = re.compile(r"\bkeras\.(?:ops|config|random|src|Variable)\b|\bfrom keras import\b[^\n]*\bops\b|\bkeras_core\b")
_KERAS_LAYERS, _KERAS_METRICS = "keras.layers.", "keras.metrics."
# Libraries whose classes the engine knows, or that are not the project's: no other file of a run defines them.
_KNOWN_LIBRARIES = ("builtins.", "tensorflow.", "keras.", "numpy.", "abc.", "typing.", "collections.", "enum.",
                    "dataclasses.", "object")
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


@dataclass(frozen=True)
class EngineSettings:
    """The configuration that changes what the engine considers graph code."""

    function_aliases: tuple[str, ...] = ()
    # Keras traces `call` of every layer and model under fit/predict/evaluate (docs/journal/precision.md,
    # "Keras call as graph code: the decision")
    keras_call_is_graph: bool = True


class FileIndex:
    """The low-level facts of one parsed file: navigation, names, resolution, classes, calls, positions."""

    def __init__(self, source: SourceFile, module_name: str, settings: EngineSettings | None = None,
                 is_package: bool = False, foreign_kinds: Mapping[str, str] | None = None) -> None:
        self.source = source
        # What classes of other files of the run are (`pkg.models.Base` -> model), from the project pass:
        # a class built on one is a model or layer too (google/automl's EfficientDetNetTrain).
        self.foreign_kinds: Mapping[str, str] = foreign_kinds or {}
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
        self._loads_cache: dict[ast.AST, dict[str, list[ast.Name]]] = {}
        self._expanding: set[ast.expr] = set()  # binding values function_target is following now
        # Answers of analyses above the index that are computed once per file and follow each other
        # through the file's functions (tfcheck.engine.values: return kinds, constructor parameters),
        # keyed by the analysis; `memo_stack` holds the keys being computed now (cycles, depth).
        self.memo: dict[Hashable, frozenset[str]] = {}
        self.memo_stack: list[Hashable] = []
        # Yes/no answers about a binding's value at a recursion depth (tfcheck.engine.tensors): many
        # names share one value (`x = x and x and ...`), and re-deriving it for each is exponential.
        self.verdicts: dict[Hashable, bool] = {}

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

    def statement_in(self, node: ast.AST, scope_node: ast.AST) -> ast.AST:
        """The statement directly in the body of `scope_node` (a module, function or class) that holds `node`."""
        previous = node
        for ancestor in self.ancestors(node):
            if ancestor is scope_node:
                return previous
            previous = ancestor
        return previous

    def enclosing_statement(self, node: ast.AST) -> ast.AST:
        """The innermost statement that holds `node` (`node` itself when it is one)."""
        current = node
        while not isinstance(current, ast.stmt):
            parent = self._parents.get(current)
            if parent is None:
                return current
            current = parent
        return current

    def enclosing_loop(self, node: ast.AST) -> ast.AST | None:
        """The innermost `for`/`while` whose body holds `node`, in the function or class `node` is in.

        Only the body counts: a call in a loop's iterable or test runs once per loop, not per iteration.
        """
        previous = node
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, _DEFINITIONS):
                return None
            if isinstance(ancestor, LOOPS) and previous in ancestor.body:
                return ancestor
            previous = ancestor
        return None

    def loops_around(self, node: ast.AST, within: ast.AST | None = None) -> list[ast.AST]:
        """Every `for`/`while` that holds `node` (in its body, target, iterable or test), innermost first,
        up to `within` (a scope's node) when given."""
        found = []
        for ancestor in self.ancestors(node):
            if ancestor is within:
                break
            if isinstance(ancestor, LOOPS):
                found.append(ancestor)
        return found

    def common_loop(self, node: ast.AST, other: ast.AST, within: ast.AST | None = None) -> ast.AST | None:
        """The innermost loop around `node` (up to `within`) that also holds `other`: both run in each iteration."""
        around_other = set(self.loops_around(other))
        return next((loop for loop in self.loops_around(node, within) if loop in around_other), None)

    def in_loop_body(self, node: ast.AST, loop: ast.AST) -> bool:
        """Whether `node` is inside the body of `loop` (not its target, iterable, test or `else`)."""
        previous = node
        for ancestor in self.ancestors(node):
            if ancestor is loop:
                return previous in loop.body  # type: ignore[attr-defined]
            previous = ancestor
        return False

    def is_inside(self, node: ast.AST, container: ast.AST) -> bool:
        return any(ancestor is container for ancestor in self.ancestors(node))

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

    def uses_of(self, name: str, function: FunctionInfo) -> list[ast.Name]:
        """The reads of the local (or parameter) `name` of `function`, in it and in the functions nested
        in it that see the same binding."""
        return [use for use in self.loads_under(function).get(name, ()) if self.binding_scope(use) is function.scope]

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

    def is_parameter(self, expr: ast.AST | None, function: FunctionInfo) -> bool:
        """`expr` is a name that reads a parameter of `function` (not a local of the same name in a nested scope)."""
        return isinstance(expr, ast.Name) and expr.id in function.params and self.binding_scope(expr) is function.scope

    def bindings_in_effect(self, name: str, node: ast.AST) -> list[Binding]:
        """The module-level bindings of `name` that module-level code at `node` can see: those of its own
        top-level statement (a loop may bind it again), and the one made by the last statement before
        (a script, or a notebook's cells, read top to bottom, where a name such as `f` or `train_step` is
        often defined again). Empty when nothing at or before `node`'s statement binds it."""
        tree = self.source.tree
        here = self.statement_in(node, tree)
        placed = [(self.statement_in(b.node, tree), b) for b in self.module_scope.bindings.get(name, ())]
        own = [b for statement, b in placed if statement is here]
        earlier = [(statement.lineno, b) for statement, b in placed if statement.lineno < here.lineno]  # type: ignore[attr-defined]
        return own + ([max(earlier, key=lambda pair: pair[0])[1]] if earlier else [])

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
            statement = self.statement_in(binding.node, scope.node)
            if isinstance(statement, LOOPS):
                return True
            statements.add(statement)
        return len(statements) > 1

    def bound_in_other_function(self, binding: Binding, scope: Scope) -> bool:
        """Whether a binding of `scope` is made from another (nested) function: `global` or `nonlocal`."""
        owner = self.function_of(binding.node)
        return (owner.node if owner is not None else self.source.tree) is not scope.node

    def _bound_elsewhere(self, binding: Binding, scope: Scope) -> bool:
        return binding.kind not in ("param", "def") and self.bound_in_other_function(binding, scope)

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
        if isinstance(expr, ast.Attribute) and (self.is_self_attribute(expr) or isinstance(expr.value, ast.Name)
                                                or self.is_self_attribute(expr.value)):
            if self.is_self_attribute(expr):
                cls = self.class_of_self(expr)
                return self._dispatched(cls, expr.attr) if cls is not None else []
            cls = self.instance_class(expr.value)
            method = self.method_of(cls, expr.attr) if cls is not None else None
            return [method] if method is not None else []
        if isinstance(expr, ast.Name):
            found = []
            for binding in self._callable_bindings(expr):
                if binding.kind == "def":
                    found.append(self._by_node[binding.node])
                elif binding.value is not None and isinstance(binding.value, (ast.Lambda, ast.Call)) \
                        and binding.value not in self._expanding \
                        and not any(node is expr for node in ast.walk(binding.value)):  # f = tf.function(f)
                    found.extend(self._expanded(binding.value))
            return found
        return []

    def _callable_bindings(self, name: ast.Name) -> list[Binding]:
        """The bindings a name can have where it is read: module-level code of a script or notebook sees
        only the ones in effect at that point (`ds.map(to_grayscale)` in cell 9 is not cell 14's
        `to_grayscale`); code in functions, run at any time, may see any."""
        bindings = self.bindings_of(name)
        if len(bindings) < 2 or self.function_of(name) is not None or self.binding_scope(name) is not self.module_scope:
            return bindings
        return self.bindings_in_effect(name.id, name) or bindings

    def _expanded(self, value: ast.expr) -> list[FunctionInfo]:
        """`_wrapped_function` of a binding's value, which is not followed again while it is being followed:
        two branches' `f = tf.function(f)` would otherwise send each `f` to the other binding forever."""
        self._expanding.add(value)
        try:
            return self._wrapped_function(value)
        finally:
            self._expanding.discard(value)

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

    def instance_class(self, receiver: ast.expr) -> ClassInfo | None:
        """The class of this file that a name or a `self.` attribute was built from (`m = SimpleModel()`,
        `self.runner = Runner()`), or that a parameter is annotated with (`obj: First`), when all agree."""
        if isinstance(receiver, ast.Attribute) and self.is_self_attribute(receiver):
            owner = self.class_of_self(receiver)
            values = self.self_attribute_values(owner, receiver.attr) if owner is not None else []
            built = {self.called_class(value) for _, value in values if isinstance(value, ast.Call)}
            built.discard(None)
            return built.pop() if len(built) == 1 else None
        if not isinstance(receiver, ast.Name):
            return None
        classes = {self.called_class(b.value) for b in self.bindings_of(receiver) if isinstance(b.value, ast.Call)}
        classes |= {self._annotated_class(receiver.id, b.node) for b in self.bindings_of(receiver) if b.kind == "param"}
        classes.discard(None)
        return classes.pop() if len(classes) == 1 else None

    def _annotated_class(self, name: str, arguments: ast.AST) -> ClassInfo | None:
        """The class of this file a parameter's annotation names (`def f(obj: First)`)."""
        if not isinstance(arguments, ast.arguments):
            return None
        every = arguments.posonlyargs + arguments.args + arguments.kwonlyargs
        annotation = next((a.annotation for a in every if a.arg == name), None)
        if not isinstance(annotation, ast.Name):
            return None
        return next((self._class_by_node[b.node] for b in self.bindings_of(annotation)
                     if b.kind == "class" and b.node in self._class_by_node), None)

    def method_of(self, cls: ClassInfo, name: str) -> FunctionInfo | None:
        """A method of `cls` or of a base class defined in this file."""
        return next((c.methods[name] for c in self.class_chain(cls) if name in c.methods), None)

    def _dispatched(self, cls: ClassInfo, name: str) -> list[FunctionInfo]:
        """What `self.name(...)` in a method of `cls` can run: the method `cls` has or inherits, and its
        overrides in the file's subclasses of `cls` (a base's `call` running `self.forward(x)` that only
        subclasses define: issue 37's state written in a method reached through a base class)."""
        own = self.method_of(cls, name)
        overrides = [sub.methods[name] for sub in self._subclasses.get(cls, ()) if name in sub.methods]
        return list(dict.fromkeys([own, *overrides] if own is not None else overrides))

    @cached_property
    def _subclasses(self) -> dict[ClassInfo, list[ClassInfo]]:
        """Each class of the file -> the classes of the file that derive from it, directly or not."""
        found: dict[ClassInfo, list[ClassInfo]] = {}
        for cls in self.classes:
            for base in list(self.class_chain(cls))[1:]:
                found.setdefault(base, []).append(cls)
        return found

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

    @cached_property
    def keras_2(self) -> bool:
        """Whether the file is written for Keras 2 (tf.keras before TensorFlow 2.16, or tf_keras): it
        imports `tf_keras` or names an API only Keras 2 has (`optimizers.legacy`, `layers.experimental`).
        Keras 2 runs `call` and `train_step` through AutoGraph and its `Dropout` keeps no variable;
        Keras 3, today's `tf.keras`, does neither."""
        return _KERAS_2_MARKERS.search(self.source.text) is not None

    @cached_property
    def keras_3(self) -> bool:
        """Whether the file shows that it is written for Keras 3: it names an API only Keras 3 has
        (`keras.ops`, `keras.config`, `keras.random`, `keras.Variable`, `keras_core`) and no Keras 2 one.
        `tf.keras` alone says nothing: the same `call` ran through AutoGraph under TensorFlow 2.15 and
        runs as written under 2.16, and code written for the first is not wrong (judged on the corpus:
        deeplab2's, tensorflow/graphics' and keras-unet-collection's `len(tf.shape(x))` in `call`)."""
        return not self.keras_2 and _KERAS_3_MARKERS.search(self.source.text) is not None

    def class_kind(self, cls: ClassInfo) -> str:
        """`model`, `layer` or `object`: what instances of a class of this file are."""
        return self._class_kinds.get(cls) or self._compute_class_kind(cls, 0)

    def _compute_class_kind(self, cls: ClassInfo, depth: int) -> str:
        for base in cls.node.bases:
            name = self.resolve(base)
            if name in _MODEL_BASES:
                return kinds.MODEL
            if name in _LAYER_BASES or _is_keras_class(name, _KERAS_LAYERS):
                return kinds.LAYER
            if name in self.foreign_kinds:
                return self.foreign_kinds[name]
        local = self._local_base(cls)
        if local is not None and depth < 8:
            return self._compute_class_kind(local, depth + 1)
        return kinds.OBJECT

    def keras_class_summary(self) -> list[tuple[str, str]]:
        """This file's Keras models and layers by qualified name, for the project pass to give the files
        whose classes are built on them."""
        return [(f"{self.module_name}.{cls.qualname}", kind) for cls in self.classes
                if (kind := self.class_kind(cls)) != kinds.OBJECT]

    def foreign_bases(self) -> list[str]:
        """The base classes this file's classes take from other modules that are neither TensorFlow nor
        Keras (nor Python's own): classes the project pass may know the kind of. All of them, whatever
        the kinds already given: the list must not depend on what the project pass answers, or the
        answers would never settle."""
        names = (self.resolve(base) for cls in self.classes for base in cls.node.bases)
        return sorted({name for name in names if name is not None and "." in name
                       and not name.startswith(_KNOWN_LIBRARIES) and not name.startswith(f"{self.module_name}.")})

    def is_keras_metric(self, cls: ClassInfo) -> bool:
        """Whether a class of this file subclasses a metric class of `keras.metrics` (directly or through
        classes of the file): Keras updates a compiled metric inside its traced train and test steps."""
        for _ in range(8):
            if any(_is_keras_class(self.resolve(base), _KERAS_METRICS) for base in cls.node.bases):
                return True
            local = self._local_base(cls)
            if local is None:
                return False
            cls = local
        return False

    def is_self_attribute(self, expr: ast.AST) -> bool:
        """`self.x` where `self` is the first parameter of the enclosing method."""
        if not (isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name)):
            return False
        method = self._method_owning(expr.value)
        return method is not None and bool(method.params) and method.params[0] == expr.value.id

    def class_of_self(self, expr: ast.Attribute) -> ClassInfo | None:
        return self.self_class(expr.value) if isinstance(expr.value, ast.Name) else None

    def self_class(self, name: ast.Name) -> ClassInfo | None:
        """The class of the method whose first parameter `name` is (`self`), else None."""
        method = self._method_owning(name)
        return method.cls if method is not None and method.params and method.params[0] == name.id else None

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
        return [found for c in self.class_chain(cls) for found in self._self_attributes.get((c, attr), [])]

    # -- tf.function decorators -----------------------------------------------------------------------
    def decorated_tf_function(self, info: FunctionInfo) -> ast.expr | None:
        """The `tf.function` decorator of a function, if it has one."""
        if isinstance(info.node, ast.Lambda):
            return None
        for decorator in info.node.decorator_list:
            func = decorator.func if isinstance(decorator, ast.Call) else decorator
            if self.resolve(func) in self.tf_function_names:
                return decorator
        return None

    def has_input_signature(self, decorator: ast.expr) -> bool:
        return isinstance(decorator, ast.Call) and self.resolve(decorator.func) in self.tf_function_names \
            and any(k.arg == "input_signature" for k in decorator.keywords)

    def is_tensor_param(self, name: ast.Name) -> bool:
        """A parameter of a tf.function that is a tensor for sure while tracing: the function has an
        input_signature, or it reads the parameter's static shape (`x.shape`, `x.get_shape()`). A
        tf.function turns NumPy arrays into tensors, and Python numbers and lists have no shape, so a
        parameter with one is a tensor; other parameters may be Python values passed in."""
        scope = self.binding_scope(name)
        info = self._by_node.get(scope.node) if scope is not None else None
        if info is None or name.id not in info.params or isinstance(info.node, ast.Lambda):
            return False
        decorator = self.decorated_tf_function(info)
        is_receiver = info.cls is not None and info.params[0] == name.id
        if is_receiver:
            return False
        if decorator is None:
            return self._metric_labels_or_predictions(info, name.id)
        if self.has_input_signature(decorator):
            return self._in_signature(decorator, info, name.id)
        return name.id in self._shaped_params(info)

    def _metric_labels_or_predictions(self, info: FunctionInfo, name: str) -> bool:
        """`y_true` and `y_pred` of a Keras metric's `update_state` (its first two parameters after `self`):
        Keras converts them to tensors before it calls the method in its traced train and test steps."""
        if info.name != "update_state" or info.cls is None or not self.is_keras_metric(info.cls):
            return False
        positional = [a.arg for a in info.node.args.posonlyargs + info.node.args.args]
        return name in positional[1:3]

    def _in_signature(self, decorator: ast.expr, info: FunctionInfo, name: str) -> bool:
        """A parameter the input_signature covers: its position (`self` aside) is within a signature
        written as a list or tuple; any parameter when the signature is built elsewhere."""
        signature = next((k.value for k in decorator.keywords if k.arg == "input_signature"), None) \
            if isinstance(decorator, ast.Call) else None
        if not isinstance(signature, (ast.List, ast.Tuple)):
            return True
        positional = [a.arg for a in info.node.args.posonlyargs + info.node.args.args]
        if info.cls is not None:
            positional = positional[1:]
        return name in positional[:len(signature.elts)]

    def _shaped_params(self, info: FunctionInfo) -> frozenset[str]:
        """The parameters of `info` whose shape its own code reads (memoized: asked for every use)."""
        key = ("shaped-params", info.node)
        if key not in self.memo:
            self.memo[key] = frozenset(
                node.value.id for node in info.nodes
                if isinstance(node, ast.Attribute) and node.attr in _SHAPE_ATTRIBUTES
                and isinstance(node.value, ast.Name) and node.value.id in info.params
                and self.binding_scope(node.value) is info.scope)
        return self.memo[key]

    # -- calls --------------------------------------------------------------------------------------
    @cached_property
    def calls(self) -> list[tuple[ast.Call, FunctionInfo | None]]:
        """Every call in the file with its enclosing function (None at module level)."""
        return [(node, info) for node, info in self.all_nodes() if isinstance(node, ast.Call)]

    @cached_property
    def _calls_by_receiver(self) -> dict[str, list[ast.Call]]:
        calls: dict[str, list[ast.Call]] = {}
        for call, _ in self.calls:
            func = call.func
            receiver = func.value if isinstance(func, ast.Attribute) else func
            if isinstance(receiver, ast.Name):
                calls.setdefault(receiver.id, []).append(call)
        return calls

    @cached_property
    def _instantiations(self) -> dict[FunctionInfo, list[tuple[ast.Call, bool]]]:
        """For each `__init__` of the file, the calls that run it, each with whether `self` is implicit:
        `C(...)` of a class whose `__init__` it is, `super().__init__(...)` and `Base.__init__(self, ...)`."""
        found: dict[FunctionInfo, list[tuple[ast.Call, bool]]] = {}
        for call, caller in self.calls:
            target = self._constructor_called(call, caller)
            if target is not None:
                found.setdefault(target[0], []).append((call, target[1]))
        return found

    def _constructor_called(self, call: ast.Call, caller: FunctionInfo | None) -> tuple[FunctionInfo, bool] | None:
        func = call.func
        cls = self.called_class(call)
        if cls is not None:
            init = self.method_of(cls, "__init__")
            return (init, True) if init is not None else None
        if not (isinstance(func, ast.Attribute) and func.attr == "__init__"):
            return None
        if isinstance(func.value, ast.Call) and isinstance(func.value.func, ast.Name) and func.value.func.id == "super":
            base = self._local_base(caller.cls) if caller is not None and caller.cls is not None else None
            init = self.method_of(base, "__init__") if base is not None else None
            return (init, True) if init is not None else None
        if isinstance(func.value, ast.Name):
            named = next((self._class_by_node[b.node] for b in self.bindings_of(func.value)
                          if b.kind == "class" and b.node in self._class_by_node), None)
            init = self.method_of(named, "__init__") if named is not None else None
            return (init, False) if init is not None else None
        return None

    def instantiations(self, init: FunctionInfo) -> list[tuple[ast.Call, bool]]:
        """The calls of the file that run the `__init__` method `init` (see `_instantiations`)."""
        return self._instantiations.get(init, [])

    def calls_on(self, name: str) -> list[ast.Call]:
        """The calls `name(...)` and `name.method(...)` of the file, whatever `name` is bound to there."""
        return self._calls_by_receiver.get(name, [])

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


def bind_arguments(function: FunctionInfo, args: list[ast.expr], keywords: list[ast.keyword],
                   skip_self: bool = False) -> dict[str, ast.expr]:
    """Parameter name -> argument expression, as Python binds them (stops at the first `*args`)."""
    node_args = function.node.args
    positional = [a.arg for a in node_args.posonlyargs + node_args.args]
    if skip_self:
        positional = positional[1:]
    bound: dict[str, ast.expr] = {}
    for name, arg in zip(positional, args):
        if isinstance(arg, ast.Starred):
            break
        bound[name] = arg
    for keyword in keywords:
        if keyword.arg is not None:
            bound[keyword.arg] = keyword.value
    return bound


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


def _is_keras_class(name: str | None, module: str) -> bool:
    """A class of a Keras module (`keras.layers.Dense`, `keras.metrics.Metric`: a capitalised name;
    `keras.layers.deserialize`, `keras.metrics.get` and the like are functions)."""
    if name is None or not name.startswith(module):
        return False
    leaf = name[len(module):]
    return "." not in leaf and leaf[:1].isupper()
