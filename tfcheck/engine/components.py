"""Strongly connected components of a directed graph: a leaf of the engine, for any graph.

The engine's call graph (recursion is a cycle of calls) and the import-wall test (an import
circle is a cycle of imports) both need them; one iterative Tarjan serves both, so that a deep
chain of calls or imports never reaches Python's recursion limit.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Hashable, Iterable, Iterator
from typing import TypeVar

Node = TypeVar("Node", bound=Hashable)


def strongly_connected_components(roots: Iterable[Node], successors: Callable[[Node], Iterable[Node]],
                                  finished: Container[Node] = ()) -> Iterator[list[Node]]:
    """Each component reachable from `roots` once, a component after every one it reaches.

    Nodes in `finished` (members of components a caller found in an earlier search) are not
    entered again, so a caller can ask lazily, one root at a time, and record each component as
    it is yielded.
    """
    index: dict[Node, int] = {}
    low: dict[Node, int] = {}
    stack: list[Node] = []
    on_stack: set[Node] = set()
    for root in roots:
        if root in index or root in finished:
            continue
        work = [(root, iter(successors(root)))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next((c for c in children if c not in finished and (c not in index or c in on_stack)), None)
            if child is not None and child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(successors(child))))
                continue
            if child is not None:  # on the stack: a cycle back to it
                low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                yield component
