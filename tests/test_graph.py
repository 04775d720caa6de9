"""The hub-damped random walk with restart over the link graph (pure: no database)."""

from __future__ import annotations

import math

import networkx as nx
import pytest

from retriever.graph import _neighbourhood, link_prior, random_walk_scores


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


def _dense_walk(
    graph: nx.Graph, seeds: dict[int, float], restart: float, steps: int, nodes: set[int]
) -> dict:
    """The documented walk written plainly over ``nodes``: a dense transition matrix (a
    step prefers low-degree neighbours), restart from notes with no way on, power
    iteration, hub damping on the way out."""
    import math

    import numpy as np

    order = sorted(nodes)
    at = {n: i for i, n in enumerate(order)}
    weight = np.array([1.0 / math.log(2 + graph.degree(n)) for n in order])
    step = np.zeros((len(order), len(order)))
    for u in order:
        row = [at[v] for v in graph.adj[u] if v in at]
        if row:
            step[at[u], row] = weight[row] / weight[row].sum()
    dangling = step.sum(axis=1) == 0
    start = np.zeros(len(order))
    for n, w in seeds.items():
        start[at[n]] = w / sum(seeds.values())
    rank = start.copy()
    for _ in range(steps):
        rank = restart * start + (1 - restart) * (rank @ step + rank[dangling].sum() * start)
    return {n: rank[at[n]] * weight[at[n]] for n in order if n not in seeds}


def _assert_same_walk(got: dict, expected: dict) -> None:
    assert set(got) == {n for n, v in expected.items() if v > 1e-12}
    for n, v in got.items():
        assert v == pytest.approx(expected[n], rel=1e-9, abs=1e-15)


def test_the_walk_is_the_documented_random_walk_with_restart() -> None:
    graph = nx.gnm_random_graph(60, 150, seed=3)
    graph.remove_nodes_from([n for n in list(graph) if graph.degree(n) == 0])
    seeds = {n: 1.0 + (n % 3) for n in sorted(graph)[:4]}
    got = random_walk_scores(graph, seeds, hops=10, max_nodes=1000, hub_degree=1000)
    _assert_same_walk(got, _dense_walk(graph, seeds, 0.3, 15, set(graph)))


def test_the_bounded_walk_is_the_same_walk_on_its_neighbourhood() -> None:
    """With a hub that is not expanded, the node cap reached, and a seed with no links
    (the walker restarts from it), the walk is still the documented one on the notes it
    kept."""
    graph = nx.gnm_random_graph(300, 700, seed=5)
    graph.add_edges_from((0, n) for n in range(100, 180))  # node 0: a hub, next to seed 1
    graph.add_edge(0, 1)
    graph.add_node(999)  # a seed with no links at all
    seeds = {1: 1.0, 2: 0.5, 999: 2.0}
    kept = _neighbourhood(graph.adj, seeds, 2, 40, 50)
    assert len(kept) == 40 and 0 in kept
    got = random_walk_scores(graph, seeds, hops=2, max_nodes=40, hub_degree=50)
    _assert_same_walk(got, _dense_walk(graph, seeds, 0.3, 15, kept))


def test_the_link_prior_grows_with_citing_notes_and_is_full_at_the_95th_percentile() -> None:
    # Ten notes cited once, one cited 3 times, one cited from 400 notes (a home page).
    cited = {n: 1 for n in range(10)} | {100: 3, 200: 400}
    prior = link_prior(cited)
    # The 95th percentile of the cited notes' counts is 3: three citing notes is full.
    assert prior[100] == 1.0 and prior[200] == 1.0
    assert prior[0] == pytest.approx(math.log(2) / math.log(4))
    assert link_prior({}) == {} and 50 not in prior  # uncited notes have none
    # Every cited note cited once: all have the full prior (nothing tells them apart).
    assert set(link_prior({1: 1, 2: 1}).values()) == {1.0}
