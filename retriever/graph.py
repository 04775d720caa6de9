"""Link graph: wiki-links, embeds, relative links and frontmatter references as a NetworkX
graph, and a random walk with restart from the best hits that lifts linked neighbours."""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import psycopg

from retriever import store

if TYPE_CHECKING:  # imported when a graph is first built: 75 ms a command may not need
    import networkx as nx


class LinkGraph:
    """The vault's link graph, reloaded when the index changes (cheap generation check)."""

    def __init__(self) -> None:
        self._graph: nx.Graph | None = None
        self._generation: object = None
        self._stamp: tuple[int, ...] = ()
        self._lock = threading.Lock()

    def get(self, conn: psycopg.Connection, gen: store.Generation | None = None) -> nx.Graph:
        # Every index run stamps meta.last_index: look at the links only after one, and
        # rebuild only when they moved (an edit mostly rewrites the same links). ``gen``:
        # as the caller read it, else read here.
        generation = gen.index if gen is not None else store.index_generation(conn)
        with self._lock:
            if generation != self._generation:
                stamp = store.links_stamp(conn)
                if stamp != self._stamp:
                    self._graph = load_graph(conn)
                    self._stamp = stamp
                self._generation = generation
            if self._graph is None:  # no index run yet: no links
                self._graph = _empty_graph()
            return self._graph


def load_graph(conn: psycopg.Connection) -> nx.Graph:
    """Undirected graph over document ids; a link either way makes notes neighbours. The
    graph's ``prior`` attribute holds each cited note's link prior (see ``link_prior``)."""
    graph = _empty_graph()
    rows = conn.execute(
        """
        SELECT DISTINCT doc_id, resolved FROM links
        WHERE resolved IS NOT NULL AND doc_id <> resolved
        """
    ).fetchall()
    graph.add_edges_from((int(a), int(b)) for a, b in rows)
    graph.graph["prior"] = link_prior(Counter(int(b) for _, b in rows))
    return graph


def _empty_graph() -> nx.Graph:
    import networkx

    graph: nx.Graph = networkx.Graph()
    graph.graph["prior"] = {}
    return graph


# The number of citing notes at which the prior is full: this quantile of the cited notes'
# counts, so one note cited from everywhere does not flatten every other note's prior.
PRIOR_FULL_QUANTILE = 0.95


def link_prior(cited_by: Mapping[int, int]) -> dict[int, float]:
    """Each cited note's prior in (0, 1]: log(1 + notes citing it), relative to the
    PRIOR_FULL_QUANTILE of the cited notes and capped at 1. Notes nothing cites have none
    (absent from the map). The notes a vault's other notes point to are the topics its
    owner refers to; a transcript, a changelog or a meeting log that mentions everything
    is rarely cited."""
    if not cited_by:
        return {}
    counts = sorted(cited_by.values())
    full = math.log1p(max(1, counts[int(PRIOR_FULL_QUANTILE * (len(counts) - 1))]))
    return {doc: min(1.0, math.log1p(n) / full) for doc, n in cited_by.items() if n > 0}


def random_walk_scores(
    graph: nx.Graph,
    seeds: Mapping[int, float],
    *,
    restart: float = 0.3,
    hops: int = 2,
    max_nodes: int = 400,
    hub_degree: int = 50,
    iterations: int = 15,
) -> dict[int, float]:
    """Personalised PageRank (random walk with restart) from ``seeds``, on their local
    neighbourhood only, hub-damped.

    A step prefers neighbours with few links (weight 1/log(2 + degree)), so a note linked
    from everywhere (a home page, an index) does not win every query; scores are damped
    once more by degree on the way out. Returns the non-seed neighbours, best first. Power
    iteration over the local neighbourhood's links, bounded so it stays around a
    millisecond on dense vaults: the walk never expands through hubs (more than
    ``hub_degree`` links) and stops growing at ``max_nodes``; 15 steps with restart 0.3
    leave under 1% of the mass unsettled.
    """
    adj = graph.adj
    present = {n: w for n, w in seeds.items() if n in adj and w > 0}
    if not present:
        return {}
    nodes = _neighbourhood(adj, present, hops, max_nodes, hub_degree)
    if len(nodes) == len(present) and not any(adj[n] for n in present):
        return {}
    order = sorted(nodes)
    index = {n: i for i, n in enumerate(order)}
    weight = np.array([1.0 / math.log(2 + len(adj[n])) for n in order])
    src, dst = _edges(adj, order, index)
    # Transitions inside the set, as edge lists (a few thousand at most) rather than a
    # dense matrix: a step prefers low-degree neighbours, each row sums to one.
    towards = weight[dst]
    out_sum = np.bincount(src, weights=towards, minlength=len(order))
    prob = towards / out_sum[src]
    dangling = out_sum == 0  # the walker restarts from there
    total_seed = sum(present.values())
    start = np.zeros(len(order))
    for n, w in present.items():
        start[index[n]] = w / total_seed
    rank = start.copy()
    for _ in range(iterations):
        moved = np.bincount(dst, weights=rank[src] * prob, minlength=len(order))
        rank = restart * start + (1 - restart) * (moved + rank[dangling].sum() * start)
    out = {
        n: float(rank[i] * weight[i])  # damp hubs once more on the way out
        for n, i in index.items()
        if n not in present and rank[i] > 1e-12
    }
    # Notes the walk reaches with the same score (a symmetric neighbourhood) stay in id
    # order: rounding keeps float noise from the summation order from deciding.
    return dict(sorted(out.items(), key=lambda kv: (-round(kv[1], 12), kv[0])))


def _neighbourhood(
    adj: Mapping[int, Mapping[int, object]],
    seeds: Mapping[int, float],
    hops: int,
    max_nodes: int,
    hub_degree: int,
) -> set[int]:
    """The seeds and their neighbours up to ``hops`` away, hubs not expanded past the
    first hop, at most ``max_nodes`` (first come, first kept)."""
    nodes: set[int] = set(seeds)
    frontier = list(seeds)
    for hop in range(hops):
        nxt: list[int] = []
        for n in frontier:
            if hop > 0 and len(adj[n]) > hub_degree:
                continue  # a hub joins the walk but is not expanded: it links to everything
            for v in adj[n]:
                if v not in nodes and len(nodes) < max_nodes:
                    nodes.add(v)
                    nxt.append(v)
        frontier = nxt
    return nodes


def _edges(
    adj: Mapping[int, Mapping[int, object]], order: list[int], index: Mapping[int, int]
) -> tuple[np.ndarray, np.ndarray]:
    """(source, target) positions of the links inside the set."""
    src: list[int] = []
    dst: list[int] = []
    for u in order:
        targets = [index[v] for v in adj[u] if v in index]
        src.extend([index[u]] * len(targets))
        dst.extend(targets)
    return np.array(src, dtype=np.intp), np.array(dst, dtype=np.intp)
