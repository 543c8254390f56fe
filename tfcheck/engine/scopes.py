"""One pass over a module's tree: scopes, bindings, functions, classes and imports.

Everything later analyses need about names is collected here in a single walk, so that no rule walks
the tree again to find out what a name refers to or whether it is rebound.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Union

FunctionNode = Union[ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda]
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


@dataclass(eq=False)
class Binding:
    """One place where a name gets a value. `value` is the assigned expression when there is one."""

    name: str
    node: ast.AST
    kind: str  # assign, augassign, for, with, import, def, class, param, except, del, walrus, match
    value: ast.expr | None = None
    scope: Scope | None = None
    conditional: bool = False  # inside an if/try/loop/with at its scope's top level


@dataclass(eq=False)
class Scope:
    """A module, class, function, lambda or comprehension scope."""

    kind: str  # module, class, function, comprehension
    node: ast.AST
    parent: Scope | None
    bindings: dict[str, list[Binding]] = field(default_factory=dict)
    global_names: set[str] = field(default_factory=set)
    nonlocal_names: set[str] = field(default_factory=set)

    def bind(self, binding: Binding) -> None:
        binding.scope = self
        self.bindings.setdefault(binding.name, []).append(binding)

    def function_scope(self) -> Scope:
        """The innermost enclosing scope that is not a comprehension."""
        scope = self
        while scope.kind == "comprehension" and scope.parent is not None:
            scope = scope.parent
        return scope


@dataclass(eq=False)
class ClassInfo:
    """A class statement: its bases (unresolved expressions) and its methods by name."""

    node: ast.ClassDef
    qualname: str
    scope: Scope
    methods: dict[str, FunctionInfo] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.node.name


@dataclass(eq=False)
class FunctionInfo:
    """A def or lambda, with the nodes that belong to it directly (not to functions nested in it)."""

    node: FunctionNode
    name: str
    qualname: str
    scope: Scope
    parent: FunctionInfo | None
    cls: ClassInfo | None  # set for methods
    nodes: list[ast.AST] = field(default_factory=list, repr=False)
    is_generator: bool = False

    @property
    def lineno(self) -> int:
        return self.node.lineno

    def default_of(self, name: str) -> ast.expr | None:
        """The default value of the parameter `name`, if it has one."""
        args = self.node.args
        positional = args.posonlyargs + args.args
        pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults))
        pairs += [(arg, default) for arg, default in zip(args.kwonlyargs, args.kw_defaults) if default is not None]
        return next((default for arg, default in pairs if arg.arg == name), None)

    @property
    def params(self) -> list[str]:
        args = self.node.args
        every = args.posonlyargs + args.args + args.kwonlyargs
        every += [a for a in (args.vararg, args.kwarg) if a is not None]
        return [a.arg for a in every]


@dataclass
class ScopeTable:
    """The result of the walk."""

    module: Scope
    functions: list[FunctionInfo]
    classes: list[ClassInfo]
    imports: dict[str, str]  # local name -> dotted qualified name, from every import in the file
    parents: dict[ast.AST, ast.AST]
    name_scopes: dict[ast.Name, Scope]
    module_nodes: list[ast.AST]
    by_node: dict[ast.AST, FunctionInfo]


class _Collector:
    """Walks the tree once, keeping a stack of scopes and the innermost function."""

    def __init__(self, module_name: str, is_package: bool) -> None:
        self.module_name = module_name
        self.is_package = is_package
        self.functions: list[FunctionInfo] = []
        self.classes: list[ClassInfo] = []
        self.imports: dict[str, str] = {}
        self.parents: dict[ast.AST, ast.AST] = {}
        self.name_scopes: dict[ast.Name, Scope] = {}
        self.module_nodes: list[ast.AST] = []
        self.by_node: dict[ast.AST, FunctionInfo] = {}

    def collect(self, tree: ast.Module) -> ScopeTable:
        module = Scope("module", tree, None)
        self.scope = module
        self.function: FunctionInfo | None = None
        self.cls: ClassInfo | None = None
        self.qual: list[str] = []
        self.depth = 0  # compound-statement depth within the current scope
        for stmt in tree.body:
            self.visit(stmt, tree)
        return ScopeTable(module, self.functions, self.classes, self.imports, self.parents,
                          self.name_scopes, self.module_nodes, self.by_node)

    # -- generic walk -------------------------------------------------------------------------
    def visit(self, node: ast.AST, parent: ast.AST) -> None:
        self.parents[node] = parent
        (self.function.nodes if self.function else self.module_nodes).append(node)
        handler = _HANDLERS.get(type(node))
        if handler is not None:
            handler(self, node)
        else:
            self.children(node)

    def children(self, node: ast.AST) -> None:
        compound = isinstance(node, _COMPOUND)
        if compound:
            self.depth += 1
        for name in _child_fields(type(node)):
            value = getattr(node, name, None)
            if isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.AST):
                        self.visit(item, node)
            elif isinstance(value, ast.AST):
                self.visit(value, node)
        if compound:
            self.depth -= 1

    def bind(self, name: str, node: ast.AST, kind: str, value: ast.expr | None = None) -> None:
        scope = self.scope
        if name in scope.global_names:
            scope = self._module_scope()
        elif name in scope.nonlocal_names:
            scope = self._owner_of(name, scope.parent) or scope
        scope.bind(Binding(name, node, kind, value, conditional=self.depth > 0 or scope is not self.scope))

    def _module_scope(self) -> Scope:
        scope = self.scope
        while scope.parent is not None:
            scope = scope.parent
        return scope

    def _owner_of(self, name: str, scope: Scope | None) -> Scope | None:
        while scope is not None and scope.kind != "module":
            if scope.kind == "function" and name in scope.bindings:
                return scope
            scope = scope.parent
        return None

    def bind_target(self, target: ast.AST, kind: str, value: ast.expr | None) -> None:
        """Bind every name in an assignment target; attribute and subscript targets bind nothing."""
        if isinstance(target, ast.Name):
            self.bind(target.id, target, kind, value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self.bind_target(element, kind, None)
        elif isinstance(target, ast.Starred):
            self.bind_target(target.value, kind, None)

    # -- scopes ----------------------------------------------------------------------------------
    def enter_function(self, node: FunctionNode) -> None:
        name = node.name if not isinstance(node, ast.Lambda) else "<lambda>"
        if not isinstance(node, ast.Lambda):
            for decorator in node.decorator_list:
                self.visit(decorator, node)
            if node.returns is not None:
                self.visit(node.returns, node)
            self.bind(node.name, node, "def")
        self._visit_arguments_outer(node.args, node)
        qualname = ".".join(self.qual + [name])
        scope = Scope("function", node, self.scope)
        info = FunctionInfo(node, name, qualname, scope, self.function,
                            self.cls if self.scope.kind == "class" else None)
        if info.cls is not None and not isinstance(node, ast.Lambda):
            info.cls.methods.setdefault(name, info)
        self.functions.append(info)
        self.by_node[node] = info
        saved = (self.scope, self.function, self.cls, self.depth)
        self.scope, self.function, self.depth = scope, info, 0
        self.qual.append(name if isinstance(node, ast.Lambda) else f"{name}")
        for param in info.params:
            scope.bind(Binding(param, node.args, "param"))
        body = [node.body] if isinstance(node, ast.Lambda) else node.body
        for stmt in body:
            self.visit(stmt, node)
        self.qual.pop()
        self.scope, self.function, self.cls, self.depth = saved

    def _visit_arguments_outer(self, args: ast.arguments, owner: ast.AST) -> None:
        """Defaults and annotations are evaluated in the enclosing scope."""
        self.parents[args] = owner
        for default in args.defaults + [d for d in args.kw_defaults if d is not None]:
            self.visit(default, args)
        for arg in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
            if arg is not None:
                self.parents[arg] = args
                if arg.annotation is not None:
                    self.visit(arg.annotation, arg)

    def visit_function(self, node: FunctionNode) -> None:
        self.enter_function(node)

    def visit_class(self, node: ast.ClassDef) -> None:
        for expr in node.decorator_list + node.bases + [k.value for k in node.keywords]:
            self.visit(expr, node)
        self.bind(node.name, node, "class")
        scope = Scope("class", node, self.scope)
        info = ClassInfo(node, ".".join(self.qual + [node.name]), scope)
        self.classes.append(info)
        saved = (self.scope, self.cls, self.depth)
        self.scope, self.cls, self.depth = scope, info, 0
        self.qual.append(node.name)
        for stmt in node.body:
            self.visit(stmt, node)
        self.qual.pop()
        self.scope, self.cls, self.depth = saved

    def visit_comprehension(self, node: ast.AST) -> None:
        generators = node.generators  # type: ignore[attr-defined]
        self.visit(generators[0].iter, node)  # the first iterable is evaluated outside
        saved = self.scope
        self.scope = Scope("comprehension", node, saved)
        for index, gen in enumerate(generators):
            self.parents[gen] = node
            if index:
                self.visit(gen.iter, gen)
            self.visit(gen.target, gen)
            self.bind_target(gen.target, "for", None)
            for cond in gen.ifs:
                self.visit(cond, gen)
        for field_name in ("elt", "key", "value"):
            child = getattr(node, field_name, None)
            if child is not None:
                self.visit(child, node)
        self.scope = saved

    # -- names and bindings --------------------------------------------------------------------
    def visit_name(self, node: ast.Name) -> None:
        self.name_scopes[node] = self.scope
        if isinstance(node.ctx, ast.Del):
            self.bind(node.id, node, "del")

    def visit_assign(self, node: ast.Assign) -> None:
        self.children(node)
        single = node.value if len(node.targets) == 1 else None
        for target in node.targets:
            self.bind_target(target, "assign", single if isinstance(target, ast.Name) else None)

    def visit_annassign(self, node: ast.AnnAssign) -> None:
        self.children(node)
        if node.value is not None:
            self.bind_target(node.target, "assign", node.value)

    def visit_augassign(self, node: ast.AugAssign) -> None:
        self.children(node)
        self.bind_target(node.target, "augassign", None)

    def visit_namedexpr(self, node: ast.NamedExpr) -> None:
        self.children(node)
        saved = self.scope
        self.scope = saved.function_scope()  # walrus binds in the enclosing function
        self.bind(node.target.id, node, "walrus", node.value)
        self.scope = saved

    def visit_for(self, node: ast.For | ast.AsyncFor) -> None:
        self.children(node)
        self.depth += 1
        self.bind_target(node.target, "for", None)
        self.depth -= 1

    def visit_with(self, node: ast.With | ast.AsyncWith) -> None:
        self.children(node)
        for item in node.items:
            if item.optional_vars is not None:
                self.bind_target(item.optional_vars, "with", None)

    def visit_excepthandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self.depth += 1
            self.bind(node.name, node, "except")
            self.depth -= 1
        self.children(node)

    def visit_global(self, node: ast.Global) -> None:
        self.scope.global_names.update(node.names)

    def visit_nonlocal(self, node: ast.Nonlocal) -> None:
        self.scope.nonlocal_names.update(node.names)

    def visit_import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                self.imports[alias.asname] = alias.name
                self.bind(alias.asname, node, "import")
            else:
                top = alias.name.split(".")[0]
                self.imports.setdefault(top, top)
                self.bind(top, node, "import")

    def visit_importfrom(self, node: ast.ImportFrom) -> None:
        base = self._absolute_module(node.module, node.level)
        for alias in node.names:
            if alias.name == "*":
                continue
            local = alias.asname or alias.name
            self.imports[local] = f"{base}.{alias.name}" if base else alias.name
            self.bind(local, node, "import")

    def _absolute_module(self, module: str | None, level: int) -> str:
        if level == 0:
            return module or ""
        parts = self.module_name.split(".")
        keep = len(parts) - level + (1 if self.is_package else 0)
        prefix = parts[: max(keep, 0)]
        return ".".join(prefix + ([module] if module else []))

    def visit_yield(self, node: ast.AST) -> None:
        if self.function is not None:
            self.function.is_generator = True
        self.children(node)

    def visit_match_capture(self, node: ast.AST) -> None:
        name = getattr(node, "name", None)
        if name:
            self.bind(name, node, "match")
        self.children(node)


_COMPOUND = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try, ast.With, ast.AsyncWith, ast.Match) \
    if hasattr(ast, "Match") else (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try, ast.With, ast.AsyncWith)
if hasattr(ast, "TryStar"):
    _COMPOUND = _COMPOUND + (ast.TryStar,)

_HANDLERS = {
    ast.FunctionDef: _Collector.visit_function,
    ast.AsyncFunctionDef: _Collector.visit_function,
    ast.Lambda: _Collector.visit_function,
    ast.ClassDef: _Collector.visit_class,
    ast.ListComp: _Collector.visit_comprehension,
    ast.SetComp: _Collector.visit_comprehension,
    ast.DictComp: _Collector.visit_comprehension,
    ast.GeneratorExp: _Collector.visit_comprehension,
    ast.Name: _Collector.visit_name,
    ast.Assign: _Collector.visit_assign,
    ast.AnnAssign: _Collector.visit_annassign,
    ast.AugAssign: _Collector.visit_augassign,
    ast.NamedExpr: _Collector.visit_namedexpr,
    ast.For: _Collector.visit_for,
    ast.AsyncFor: _Collector.visit_for,
    ast.With: _Collector.visit_with,
    ast.AsyncWith: _Collector.visit_with,
    ast.ExceptHandler: _Collector.visit_excepthandler,
    ast.Global: _Collector.visit_global,
    ast.Nonlocal: _Collector.visit_nonlocal,
    ast.Import: _Collector.visit_import,
    ast.ImportFrom: _Collector.visit_importfrom,
    ast.Yield: _Collector.visit_yield,
    ast.YieldFrom: _Collector.visit_yield,
}
for _name in ("MatchAs", "MatchStar"):
    if hasattr(ast, _name):
        _HANDLERS[getattr(ast, _name)] = _Collector.visit_match_capture


# Fields that hold only markers (Load/Store contexts, operators): skipping them halves the nodes walked.
_MARKER_FIELDS = frozenset({"ctx", "op", "ops", "type_ignores"})
_FIELD_CACHE: dict[type, tuple[str, ...]] = {}


def _child_fields(node_type: type) -> tuple[str, ...]:
    fields = _FIELD_CACHE.get(node_type)
    if fields is None:
        fields = _FIELD_CACHE[node_type] = tuple(f for f in node_type._fields if f not in _MARKER_FIELDS)
    return fields


def collect_scopes(tree: ast.Module, module_name: str, is_package: bool = False) -> ScopeTable:
    """Walk `tree` once and return its scopes, bindings, functions, classes and imports."""
    return _Collector(module_name, is_package).collect(tree)
