"""Link graph: wiki-links, embeds, relative links and frontmatter references as a NetworkX
graph, and a random walk with restart from the best hits that lifts linked neighbours."""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping

import networkx as nx
import psycopg


class LinkGraph:
    """The vault's link graph, reloaded when the index changes (cheap generation check)."""

    def __init__(self) -> None:
        self._graph: nx.Graph = nx.Graph()
        self._generation: object = None
        self._lock = threading.Lock()

    def get(self, conn: psycopg.Connection) -> nx.Graph:
        row = conn.execute(
            "SELECT (SELECT value FROM meta WHERE key = 'last_index'),"
            " (SELECT count(*) FROM links WHERE resolved IS NOT NULL)"
        ).fetchone()
        generation = tuple(row) if row else None
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
    max_nodes: int = 2000,
) -> dict[int, float]:
    """Personalised PageRank from ``seeds`` on their local neighbourhood, hub-damped.

    Edges into a node are weighted 1/log(2 + degree) so a note linked from everywhere
    (a home page, an index) does not win every query; scores are returned for the
    non-seed neighbours only, best first.
    """
    present = {n: w for n, w in seeds.items() if n in graph and w > 0}
    if not present:
        return {}
    nodes: set[int] = set(present)
    frontier = set(present)
    for _ in range(hops):
        nxt: set[int] = set()
        for n in frontier:
            nxt.update(graph.neighbors(n))
        nxt -= nodes
        nodes |= nxt
        frontier = nxt
        if len(nodes) > max_nodes:
            break
    local = graph.subgraph(nodes)
    if local.number_of_edges() == 0:
        return {}
    directed = nx.DiGraph()
    for a, b in local.edges():
        directed.add_edge(a, b, weight=1.0 / math.log(2 + graph.degree(b)))
        directed.add_edge(b, a, weight=1.0 / math.log(2 + graph.degree(a)))
    total = sum(present.values())
    personalization = {n: w / total for n, w in present.items()}
    scores = nx.pagerank(
        directed, alpha=1 - restart, personalization=personalization, weight="weight", tol=1e-8
    )
    out = {
        n: s / math.log(2 + graph.degree(n))  # damp hubs once more on the way out
        for n, s in scores.items()
        if n not in present and s > 0
    }
    return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))
