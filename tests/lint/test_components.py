"""The one strongly-connected-components routine (engine call graph, import-wall test) against
the definition: two nodes share a component exactly when each reaches the other."""

from __future__ import annotations

from hypothesis import given, strategies as st

from tfcheck.engine.components import strongly_connected_components

GRAPHS = st.dictionaries(st.integers(0, 7), st.lists(st.integers(0, 7), max_size=4), max_size=8)


def _reachable(graph: dict[int, list[int]], start: int) -> set[int]:
    seen, todo = {start}, [start]
    while todo:
        for successor in graph.get(todo.pop(), []):
            if successor not in seen:
                seen.add(successor)
                todo.append(successor)
    return seen


@given(GRAPHS)
def test_components_are_the_mutually_reachable_sets(graph: dict[int, list[int]]) -> None:
    components = list(strongly_connected_components(sorted(graph), lambda n: graph.get(n, [])))
    nodes = {n for c in components for n in c}
    assert sorted(n for c in components for n in c) == sorted(nodes)  # each node once
    reach = {n: _reachable(graph, n) for n in nodes}
    for component in components:
        for node in nodes:
            mutual = all(node in reach[m] and m in reach[node] for m in component)
            assert (node in component) == mutual
    # a component comes after every component it reaches
    position = {n: i for i, c in enumerate(components) for n in c}
    assert all(position[s] <= position[n] for n in nodes for s in graph.get(n, []))


def test_finished_nodes_are_not_entered_again() -> None:
    graph = {1: [2], 2: [1, 3], 3: []}
    assert list(strongly_connected_components([1], graph.__getitem__, finished={3})) == [[2, 1]]


def test_a_long_chain_needs_no_recursion() -> None:
    chain = {n: [n + 1] for n in range(20000)}
    assert len(list(strongly_connected_components([0], lambda n: chain.get(n, [])))) == 20001
