"""The hub-damped random walk with restart over the link graph (pure: no database)."""

from __future__ import annotations

import networkx as nx
import pytest

from retriever.graph import random_walk_scores


def _graph(*edges: tuple[int, int]) -> nx.Graph:
    graph: nx.Graph = nx.Graph()
    graph.add_edges_from(edges)
    return graph


def test_direct_neighbours_beat_two_hop_ones_and_seeds_are_not_returned() -> None:
    scores = random_walk_scores(_graph((1, 2), (2, 3), (3, 4)), {1: 1.0})
    assert 1 not in scores
    assert list(scores) == [2, 3]  # 4 is three hops away: outside the walk
    assert scores[2] > scores[3] > 0


def test_no_seed_in_the_graph_or_no_links_gives_nothing() -> None:
    assert random_walk_scores(_graph((1, 2)), {9: 1.0}) == {}
    assert random_walk_scores(_graph((1, 2)), {1: 0.0}) == {}
    lonely: nx.Graph = nx.Graph()
    lonely.add_node(1)
    assert random_walk_scores(lonely, {1: 1.0}) == {}


def test_a_hub_is_damped_below_a_specific_neighbour() -> None:
    # Seed 1 links to a hub (0, linked from 60 notes) and to one specific note (2).
    graph = _graph((1, 0), (1, 2), *((0, n) for n in range(100, 160)))
    scores = random_walk_scores(graph, {1: 1.0})
    assert scores[2] > scores[0]


def test_a_hub_is_not_expanded_so_its_other_notes_stay_out() -> None:
    # 1 - 2 - hub(0) - 60 notes: the hub joins at hop 2 but its neighbours do not.
    graph = _graph((1, 2), (2, 0), *((0, n) for n in range(100, 160)))
    scores = random_walk_scores(graph, {1: 1.0}, hops=3)
    assert 0 in scores
    assert not any(n >= 100 for n in scores)


def test_heavier_seed_lifts_its_own_neighbour_more() -> None:
    graph = _graph((1, 10), (2, 20))
    scores = random_walk_scores(graph, {1: 3.0, 2: 1.0})
    assert list(scores) == [10, 20]
    assert scores[10] == pytest.approx(3 * scores[20])


def test_max_nodes_bounds_the_walk() -> None:
    graph = _graph(*((1, n) for n in range(2, 40)))
    scores = random_walk_scores(graph, {1: 1.0}, max_nodes=10, hub_degree=100)
    assert len(scores) == 9


def test_ties_are_broken_by_id_so_the_order_is_stable() -> None:
    graph = _graph((1, 5), (1, 3), (1, 4))
    assert list(random_walk_scores(graph, {1: 1.0})) == [3, 4, 5]
