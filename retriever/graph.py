"""Link graph: wiki-links, embeds, relative links and frontmatter references as a NetworkX
graph, and a random walk with restart from the best hits that lifts linked neighbours."""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping

import networkx as nx
import numpy as np
import psycopg


class LinkGraph:
    """The vault's link graph, reloaded when the index changes (cheap generation check)."""

    def __init__(self) -> None:
        self._graph: nx.Graph = nx.Graph()
        self._generation: object = None
        self._lock = threading.Lock()

    def get(self, conn: psycopg.Connection) -> nx.Graph:
        # Every index run stamps meta.last_index: reload the graph only after one.
        row = conn.execute("SELECT value FROM meta WHERE key = 'last_index'").fetchone()
        generation = str(row[0]) if row else None
        with self._lock:
            if generation != self._generation:
                self._graph = load_graph(conn)
                self._generation = generation
            return self._graph


def load_graph(conn: psycopg.Connection) -> nx.Graph:
    """Undirected graph over document ids; a link either way makes notes neighbours."""
    graph: nx.Graph = nx.Graph()
    rows = conn.execute(
        """
        SELECT DISTINCT doc_id, resolved FROM links
        WHERE resolved IS NOT NULL AND doc_id <> resolved
        """
    ).fetchall()
    graph.add_edges_from((int(a), int(b)) for a, b in rows)
    return graph


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
    iteration on a dense transition matrix of the local neighbourhood, bounded so it stays a few milliseconds on dense
    vaults: the walk never expands through hubs (more than ``hub_degree`` links) and stops
    growing at ``max_nodes``; 15 steps with restart 0.3 leave under 1% of the mass unsettled.
    """
    adj = graph.adj
    present = {n: w for n, w in seeds.items() if n in adj and w > 0}
    if not present:
        return {}
    nodes: set[int] = set(present)
    frontier = list(present)
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
    if len(nodes) == len(present) and not any(adj[n] for n in present):
        return {}
    order = sorted(nodes)
    index = {n: i for i, n in enumerate(order)}
    weight = np.array([1.0 / math.log(2 + len(adj[n])) for n in order])
    step = np.zeros((len(order), len(order)))  # row-stochastic transitions inside the set
    for u in order:
        row = [index[v] for v in adj[u] if v in index]
        if row:
            step[index[u], row] = weight[row] / weight[row].sum()
    dangling = step.sum(axis=1) == 0  # the walker restarts from there
    total_seed = sum(present.values())
    start = np.zeros(len(order))
    for n, w in present.items():
        start[index[n]] = w / total_seed
    rank = start.copy()
    for _ in range(iterations):
        rank = restart * start + (1 - restart) * (rank @ step + rank[dangling].sum() * start)
    out = {
        n: float(rank[i] * weight[i])  # damp hubs once more on the way out
        for n, i in index.items()
        if n not in present and rank[i] > 1e-12
    }
    return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))
