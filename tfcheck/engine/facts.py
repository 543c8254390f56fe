"""FileFacts: the front door rules read, a thin layer over the index and the analyses built on it.

`FileFacts` is the file's `FileIndex` (navigation, names, resolution, classes, calls, positions) plus
each analysis of `tfcheck.engine`, computed on first use and cached: the call graph, graph code (found
right away, because every rule asks for it), calls of tf.functions, outer state. The analyses import
the index, never this module, so the engine's imports run one way:
kinds -> index -> values -> callgraph -> graphcode -> tfcalls/lifetime/state/tensors/loops/flow -> facts.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping
from functools import cached_property

from tfcheck.engine import autograph, carried, guards, loops, pydata, state, tensors, tfcalls, tfobjects, values
from tfcheck.engine.callgraph import CallGraph, LoopedCall
from tfcheck.engine.flow import CrossFileFlows, reaches_graph
from tfcheck.engine.graphcode import KERAS_TRACING_METHODS, ExternalCall, GraphCode, find_graph_code
from tfcheck.engine.index import LOOPS, EngineSettings, FileIndex
from tfcheck.engine.modules import is_test_path
from tfcheck.engine.pydata import LARGE_RANGE
from tfcheck.engine.recursion import RecursiveCall, recursive_calls
from tfcheck.engine.scopes import FunctionInfo
from tfcheck.engine.source import SourceFile
from tfcheck.engine.state import OuterMutation, OuterState
from tfcheck.engine.tfcalls import TfFunctionCall, ValueOf
from tfcheck.engine.tfobjects import TENSOR_ARRAY_UPDATES

# What rules may name besides FileFacts: the engine's vocabulary, re-exported so that rules import
# nothing of the engine but this module, `kinds` and `scopes` (tests/test_walls.py).
__all__ = ["KERAS_TRACING_METHODS", "LARGE_RANGE", "LOOPS", "TENSOR_ARRAY_UPDATES", "EngineSettings", "ExternalCall",
           "FileFacts", "GraphCode", "LoopedCall", "OuterMutation", "TfFunctionCall", "ValueOf"]


class FileFacts(FileIndex):
    """Facts about one parsed file. Rules read these; they never re-walk scopes or imports."""

    def __init__(self, source: SourceFile, module_name: str, settings: EngineSettings | None = None,
                 extra_roots: Mapping[str, str] | None = None, is_package: bool = False,
                 foreign_kinds: Mapping[str, str] | None = None,
                 reaching_arguments: Iterable[tuple[str, str]] = ()) -> None:
        super().__init__(source, module_name, settings, is_package, foreign_kinds)
        self.graph: GraphCode = find_graph_code(self, self.call_graph, extra_roots or {})
        # arguments of calls into other modules that reach the graph there (the project pass's answers),
        # and the questions this file's flows asked
        self.flows = CrossFileFlows(frozenset(reaching_arguments))
        self._references: dict[FunctionInfo, dict[str, list[carried.Reference]]] = {}

    # -- values -----------------------------------------------------------------------------------
    def kinds(self, expr: ast.AST) -> set[str]:
        """What `expr` can hold: see the kinds in tfcheck.engine.kinds."""
        return values.expr_kinds(self, expr)  # type: ignore[arg-type]

    # -- the call graph ---------------------------------------------------------------------------
    @cached_property
    def call_graph(self) -> CallGraph:
        return CallGraph(self)

    def callers(self, info: FunctionInfo) -> list[tuple[ast.Call, FunctionInfo | None]]:
        """The calls that can call `info` (`function_target` of the callee), with the function each is in."""
        return self.call_graph.callers(info)

    def callees(self, info: FunctionInfo) -> list[FunctionInfo]:
        """The functions of this file `info` calls, and those defined in it."""
        return self.call_graph.callees(info)

    def looped_calls(self, info: FunctionInfo) -> list[LoopedCall]:
        """The calls of `info` in the body of a loop, with their arguments (tfcheck.engine.callgraph)."""
        return self.call_graph.looped_calls(info)

    @cached_property
    def recursive_calls(self) -> list[RecursiveCall]:
        """Calls in graph code of a tf.function that the same tf.function reaches (tfcheck.engine.recursion)."""
        return recursive_calls(self, self.graph, self.call_graph)

    # -- graph code -------------------------------------------------------------------------------
    @cached_property
    def _eager_guarded(self) -> dict[FunctionInfo, bool]:
        return {}

    def eager_guarded(self, info: FunctionInfo) -> bool:
        """Whether `info` (or a function around it) tests for eager execution (tfcheck.engine.tensors);
        once per function: rules ask for every node of it."""
        if info not in self._eager_guarded:
            self._eager_guarded[info] = tensors.eager_guarded(self, info)
        return self._eager_guarded[info]

    def first_call_guard(self, node: ast.AST) -> ast.AST | None:
        """The test in `node`'s function that runs it only until what it sets is set: set up once
        (tfcheck.engine.guards)."""
        return guards.first_call_guard(self, node)

    def tensor_metadata(self, expr: ast.AST) -> bool:
        """Whether `expr` is a tensor's static shape, dtype or name, known in full while tracing
        (tfcheck.engine.tensors)."""
        return tensors.tensor_metadata(self, expr)

    def unknown_dimensions(self, info: FunctionInfo) -> dict[str, frozenset[int]]:
        """The axes the input_signature of the tf.function `info` leaves unknown, per parameter
        (tfcheck.engine.tensors)."""
        return tensors.unknown_dimensions(self, info)

    def in_eager_only_branch(self, node: ast.AST, info: FunctionInfo) -> bool:
        """Whether `node` is in a branch of `info` that only eager execution takes (tfcheck.engine.tensors)."""
        return tensors.in_eager_only_branch(self, node, info)

    @property
    def graph_functions(self) -> dict[FunctionInfo, str]:
        """Graph-code functions of this file, with why each is graph code."""
        return self.graph.reasons

    def is_graph_function(self, info: FunctionInfo | None) -> bool:
        return self.graph.is_graph_function(info)

    def in_graph_code(self, node: ast.AST) -> bool:
        """Whether `node` runs as traced graph code."""
        return self.graph.in_graph_code(node)

    def input_pipeline_only(self, info: FunctionInfo) -> bool:
        """Whether `info` is graph code only because tf.data traces it (no tf.function, Keras or
        control-flow root reaches it): input-pipeline code that no SavedModel exports."""
        return self.graph.input_pipeline_only(info)

    def keras_only(self, info: FunctionInfo) -> bool:
        """Whether `info` is graph code only because Keras traces it; it also runs eagerly."""
        return self.graph.keras_only(info)

    def autograph_converted(self, info: FunctionInfo) -> bool:
        """Whether AutoGraph rewrites `info` before it runs (a tf.function or tf.data reaches it; not
        Keras 3, not `autograph=False`): its `if`/`for`/`while` bodies become functions of their own."""
        return self.graph.autograph_converted(info)

    def autograph_refusal(self, info: FunctionInfo) -> autograph.Refusal | None:
        """The construct for which AutoGraph, trying to convert `info`, gives up and runs it as written
        (TensorFlow 2.21: a `for`/`while` with `else`, `self.__x`, a nested generator, a misplaced
        `set_loop_options`, ...; tfcheck.engine.autograph); None when AutoGraph converts it or never tries."""
        return self.graph.autograph_refusal(info) if self.graph.autograph_tries(info) else None

    def surely_runs_as_written(self, info: FunctionInfo) -> bool:
        """Whether only roots that never convert reach `info` (Keras 3, `tf.function(autograph=False)`)."""
        return self.graph.surely_runs_as_written(info)

    truth_tested = staticmethod(autograph.truth_tested)

    def graph_nodes(self, *types: type) -> list[tuple[ast.AST, FunctionInfo]]:
        """Nodes of the given types in graph code, each with the graph function it belongs to."""
        return self.graph.nodes(*types)

    def graph_calls(self, *qualified: str) -> Iterator[tuple[ast.Call, FunctionInfo]]:
        """Calls in graph code whose callee resolves to one of `qualified`."""
        return self.graph.calls_of(*qualified)

    def reaches_graph(self, expr: ast.AST, function: FunctionInfo) -> bool:
        """Whether a value computed while tracing `function` ends up in the graph (tfcheck.engine.flow)."""
        return reaches_graph(self, self.graph, self.call_graph, self.flows, expr, function)

    def parameter_sinks(self, qualnames: Iterable[str]) -> list[tuple[str, str]]:
        """The parameters of the named functions whose value reaches the graph, for calls from other files:
        `(qualname, argument)` with each parameter named by keyword and, when positional, by `#position`
        as a caller passes it (after `self`). Asked of the functions other files call from graph code."""
        wanted = set(qualnames)
        sinks: list[tuple[str, str]] = []
        for info in self.functions:
            if info.qualname in wanted:
                sinks += [(info.qualname, key) for name, keys in _parameter_keys(info)
                          if any(self.reaches_graph(use, info) for use in self.uses_of(name, info)) for key in keys]
        return sinks

    # -- calls of tf.functions --------------------------------------------------------------------
    @cached_property
    def tf_function_definitions(self) -> list[FunctionInfo]:
        """This file's functions that are a tf.function themselves (tfcheck.engine.tfcalls)."""
        return tfcalls.tf_function_definitions(self)

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

    def arguments_to(self, info: FunctionInfo, parameter: str) -> Iterator[tuple[TfFunctionCall, ast.expr]]:
        """The argument each call of the tf.function `info` in this file gives `parameter`."""
        return tfcalls.arguments_for(self.tf_function_calls_of(info), parameter)

    varying_arguments = staticmethod(tfcalls.varying_arguments)

    def tf_function_object(self, expr: ast.expr) -> tuple[FunctionInfo, ast.AST, bool] | None:
        """What a callable expression (called or handed on) is when it is a tf.function of this file:
        (function, identity, has an input_signature) (tfcheck.engine.tfcalls)."""
        return tfcalls.tf_function_object(self, expr)

    @cached_property
    def explicit_traces(self) -> frozenset[tuple[FunctionInfo, FunctionInfo]]:
        """(function, traced) for each `traced.get_concrete_function(...)` in `function`."""
        return tfcalls.find_explicit_traces(self)

    # -- outer state ------------------------------------------------------------------------------
    @cached_property
    def outer_state(self) -> OuterState:
        return OuterState(self, self.graph, self.explicit_traces, self.tf_function_calls_of, self.callers)

    @cached_property
    def outer_mutations(self) -> list[OuterMutation]:
        """Writes in graph code to Python state that outlives the call (tfcheck.engine.state)."""
        return self.outer_state.mutations()

    def outer_name_owner(self, name: ast.Name, info: FunctionInfo) -> str | None:
        """`module-level` or `enclosing` when `name` is bound outside the graph function `info`."""
        return self.outer_state.outer_name_owner(name, info)

    # -- TensorFlow objects (tfcheck.engine.tfobjects) ------------------------------------------------
    def tensor_array_origins(self, expr: ast.expr) -> list[ast.Call]:
        return tfobjects.tensor_array_origins(self, expr)

    def is_dataset_iterator(self, expr: ast.expr | None) -> bool:
        return tfobjects.is_dataset_iterator(self, expr)

    def is_single_tensor(self, expr: ast.expr) -> bool:
        return tfobjects.is_single_tensor(self, expr)

    def is_keras_model(self, expr: ast.expr | None) -> bool:
        return tfobjects.is_keras_model(self, expr)

    def tensor_array_root(self, value: ast.expr | None) -> ast.expr | None:
        """The TensorArray a chain of updates starts from (`ta` of `ta.write(0, a).write(1, b)`)."""
        return tfobjects.chain_root(value)

    # -- tensors and Python data (tfcheck.engine.tensors, tfcheck.engine.pydata) ----------------------
    def surely_tensor(self, expr: ast.AST | None) -> bool:
        """Whether `expr` is surely a tensor value while tracing (the narrow answer)."""
        return tensors.surely_tensor(self, expr)

    def may_hold_tensor(self, expr: ast.expr | None, function: FunctionInfo) -> bool:
        """Whether `expr` may hold a tensor computed in the graph function `function` (the broad answer)."""
        return tensors.may_hold_tensor(self, expr, function)

    def python_data(self, expr: ast.expr) -> str | None:
        """What Python or NumPy data `expr` is (`a Python list`, `range(500)`, ...), or None."""
        return pydata.python_data(self, expr)

    def module_constant(self, name: ast.Name) -> ast.expr | None:
        """The constant a module-level name is bound to once, if it is."""
        return pydata.module_constant(self, name)

    def is_python_iterator(self, expr: ast.expr | None) -> bool:
        """Whether `expr` is a Python iterator or generator (not a tf.data one)."""
        return pydata.is_python_iterator(self, expr)

    looks_like_data = staticmethod(pydata.looks_like_data)
    is_number_data = staticmethod(pydata.is_number_data)

    # -- loops (tfcheck.engine.loops) ---------------------------------------------------------------
    def may_be_graph_loop(self, loop: ast.AST) -> bool:
        """Whether AutoGraph may turn this `for`/`while` into a graph loop."""
        return loops.may_be_graph_loop(self, loop)

    def surely_graph_loop(self, loop: ast.AST) -> bool:
        """Whether AutoGraph converts this `for`/`while`, judged only from direct evidence."""
        return loops.surely_graph_loop(self, loop)

    # -- names AutoGraph carries through tensor control flow (tfcheck.engine.carried) -------------------
    def references(self, function: FunctionInfo, name: str) -> list[carried.Reference]:
        """The reads and writes of `name` in `function`'s own code, in the order they happen (built once
        per function)."""
        found = self._references.get(function)
        if found is None:
            found = self._references[function] = carried.references(function, self._parents)
        return found.get(name, [])

    def read_after(self, function: FunctionInfo, name: str, position: tuple[int, int]) -> ast.Name | None:
        """The read of `name` that comes first after `position` in `function`, when no write of it comes
        before: the value `name` holds at `position` is used."""
        first = carried.first_after(self.references(function, name), position)
        return first.node if first is not None and first.is_load else None

    def value_structure(self, expr: ast.expr | None) -> str | None:
        """What an assigned value surely is (a tuple or list of n, None, a Python literal's type, a
        tensor, a float tensor), or None when the source does not say."""
        described = carried.literal_structure(expr)
        if described is None and expr is not None and self.is_single_tensor(expr):
            return carried.FLOAT_TENSOR if carried.float_valued(expr) else carried.TENSOR
        return described

    structures_disagree = staticmethod(carried.disagree)

    # -- the file and its functions ---------------------------------------------------------------------
    @cached_property
    def is_test_file(self) -> bool:
        """A test module (`*_test.py`, `test_*.py`, under `tests/`): it makes its tf.functions once, on purpose."""
        return is_test_path(self.path)

    is_setup_method = staticmethod(state.is_setup_method)


def _parameter_keys(info: FunctionInfo) -> list[tuple[str, list[str]]]:
    """Each parameter a caller can pass, with the argument names that reach it: its keyword, and
    `#position` for a positional one (a bound method's `self` or `cls` takes no position)."""
    args = info.node.args
    positional = [a.arg for a in args.posonlyargs + args.args]
    if info.cls is not None and positional and positional[0] in ("self", "cls"):
        positional = positional[1:]
    keys = [(name, [name, f"#{position}"]) for position, name in enumerate(positional)]
    return keys + [(a.arg, [a.arg]) for a in args.kwonlyargs]
