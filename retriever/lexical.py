"""Lexical side: one normaliser for index and query time, and Okapi BM25 scored in Postgres.

Normalisation: NFKC, accents folded, identifiers split (camelCase, snake_case, kebab-case,
dotted) while the whole identifier is kept as a token too, English and French stopwords
dropped, cheap stemming. Numbers and version strings survive whole.

Storage: each chunk carries parallel arrays ``terms``/``tfs`` (weighted term frequencies:
title and headings count more than body) and a length. A GIN index on
``terms`` finds candidates; BM25 itself is computed in SQL with IDF from the ``lexicon``
table, which the indexer keeps in step inside the same transactions.
"""

from __future__ import annotations

import math
import re
import threading
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: hooks tokenise without loading the database driver
    import psycopg

NORMALISER_VERSION = "1"

# Field weights for BM25F-style weighted term frequency.
TITLE_WEIGHT = 2.0
HEADING_WEIGHT = 1.5
TAG_WEIGHT = 1.5
BODY_WEIGHT = 1.0

_STOP_EN = """
a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further
had has have having he her here hers herself him himself his how i if in into is it its
itself just me more most my myself no nor not now of off on once only or other our ours
ourselves out over own same she should so some such than that the their theirs them
themselves then there these they this those through to too under until up very was we were
what when where which while who whom why will with would you your yours yourself yourselves
also may might must shall us let get got yes via etc e g eg ie
""".split()
_STOP_FR = """
au aux avec ce ces cet cette dans de des du elle elles en et eux il ils je la le les leur
leurs lui ma mais me meme mes moi mon ne nos notre nous on ou par pas pour qu que qui sa se
ses son sur ta te tes toi ton tu un une vos votre vous c d j l a m n s t y ete etre etais
etait avais avait ai as avons avez ont sont suis es est sommes etes fut furent sera seront
serait aussi donc or ni car si tres plus moins comme cela ceci ca quand alors ainsi tout
tous toute toutes dont ici
""".split()


_LIGATURES = str.maketrans({"œ": "oe", "Œ": "OE", "æ": "ae", "Æ": "AE", "ß": "ss"})


def strip_accents(text: str) -> str:
    """NFKC, ligatures expanded, accents removed; case kept (identifier splitting needs it)."""
    if text.isascii():
        return text
    text = unicodedata.normalize("NFKC", text).translate(_LIGATURES)
    return unicodedata.normalize("NFKD", text).translate(_COMBINING_MARKS)


class _CombiningMarks(dict[int, int | None]):
    """A translate table that deletes every combining mark, filled as characters are first
    met: one C-level translate per text (a per-character loop was most of the time spent
    folding a vault's non-ASCII notes) without looking at all 1.1 million code points
    first (0.1-0.2 s of every process that folds one accent: a search, a one-note index)."""

    def __missing__(self, cp: int) -> int | None:
        kept = None if unicodedata.combining(chr(cp)) else cp
        self[cp] = kept
        return kept


_COMBINING_MARKS = _CombiningMarks()


def fold(text: str) -> str:
    """NFKC, strip accents, lowercase; ligatures œ/æ/ß expanded."""
    return strip_accents(text).lower()


STOPWORDS: frozenset[str] = frozenset(fold(w) for w in _STOP_EN + _STOP_FR)

# A "word" is letters/digits possibly joined by identifier connectors (. _ - / ').
# Apostrophes split words (French elision: l'été -> été; English: user's -> user).
_WORD = re.compile(r"[^\W_]+(?:[._\-][^\W_]+)*|_+[^\W_]+(?:[._\-][^\W_]+)*", re.UNICODE)
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_SPLIT = re.compile(r"[._\-/]+")
_NUMERIC = re.compile(r"^v?\d+(?:[._\-]\d+)*[a-z]?$")

# English and French inflections, longest first; we only need a cheap, consistent stem.
_SUFFIXES = tuple(
    """ational issements issement ements ement ations ation ments ment
    ings ing ness ities ite ity ives ive euses euse eux
    iers ier ies ied ees ers er es ed ly s e""".split()
)
STEM_PREFIX = 7


def stem(token: str) -> str:
    """Light suffix stripping, then prefix truncation (keeps stems cheap and language-neutral)."""
    if len(token) <= 3 or not token.isalpha():
        return token
    for suffix in _SUFFIXES:
        if token.endswith(suffix) and len(token) - len(suffix) >= 3:
            token = token[: -len(suffix)]
            break
    return token[:STEM_PREFIX]


def _word_tokens(word: str) -> tuple[str, ...]:
    """Tokens for one raw (accent-free) word: the whole identifier plus its stemmed parts."""
    folded = word.lower()
    if _NUMERIC.match(folded):
        return (folded,)  # numbers and version strings survive whole
    parts: list[str] = []
    for piece in _SPLIT.split(word):
        if not piece:
            continue
        sub = _CAMEL.findall(piece) if not piece.islower() else [piece]
        parts.extend(s.lower() for s in sub if s)
    if len(parts) <= 1:
        if folded in STOPWORDS or (len(folded) == 1 and not folded.isdigit()):
            return ()
        return (stem(folded),)
    out = [folded]  # the whole identifier, unstemmed
    for part in parts:
        if part and part not in STOPWORDS and (len(part) > 1 or part.isdigit()):
            out.append(stem(part))
    return tuple(out)


_WORD_CACHE: dict[str, tuple[str, ...]] = {}


def _tokens_of(word: str) -> tuple[str, ...]:
    # Word frequencies are Zipfian: a plain dict cache makes most lookups hits.
    found = _WORD_CACHE.get(word)
    if found is None:
        if len(_WORD_CACHE) > 1_000_000:
            _WORD_CACHE.clear()
        found = _WORD_CACHE[word] = _word_tokens(word)
    return found


def tokenize(text: str) -> list[str]:
    """Normalised tokens of ``text`` (the same function at index and query time)."""
    tokens: list[str] = []
    for word in _WORD.findall(strip_accents(text)):
        tokens.extend(_tokens_of(word))
    return tokens


@dataclass(frozen=True, slots=True)
class LexicalData:
    terms: list[str]
    tfs: list[float]
    length: float


def weighted_terms(fields: Iterable[tuple[str, float]]) -> LexicalData:
    """Weighted term frequencies over several fields (text, weight)."""
    counts: dict[str, float] = {}
    length = 0.0
    get = counts.get
    for text, weight in fields:
        if not text:
            continue
        # Count words first (in C), then expand each distinct word once: the weights are
        # multiples of 0.5, so n * weight equals n additions of weight exactly.
        for word, n in Counter(_WORD.findall(strip_accents(text))).items():
            tokens = _WORD_CACHE.get(word) or _tokens_of(word)
            add = n * weight
            for token in tokens:
                counts[token] = get(token, 0.0) + add
            length += add * len(tokens)
    terms = sorted(counts)
    return LexicalData(terms, [counts[t] for t in terms], length)


# Capitals at a sentence's start, or in a query written in Title Case, say nothing.
_SENTENCE_END = re.compile(r"[.!?:;\n]")


def named_words(text: str) -> list[tuple[str, ...]]:
    """The tokens of each word the query writes as a name: capitalised inside a sentence
    (Barcelona, Dune) or with capitals past its first letter (GPU, WireGuard)."""
    folded = strip_accents(text[:20_000])
    words = list(_WORD.finditer(folded))
    if sum(m.group()[0].isupper() for m in words) * 2 > len(words):
        return []
    out: list[tuple[str, ...]] = []
    end = None  # where the previous word ended (None: no word yet)
    for m in words:
        word = m.group()
        starts = end is None or _SENTENCE_END.search(folded, end, m.start()) is not None
        end = m.end()
        capital = word[0].isupper() and not starts
        if (capital or any(c.isupper() for c in word[1:])) and (tokens := _tokens_of(word)):
            out.append(tokens)
    return out


def query_terms(text: str) -> Counter[str]:
    """Query-side tokens with multiplicity; empty when the text holds only stopwords."""
    return Counter(tokenize(text[:20_000]))


def idf(n: float, df: float) -> float:
    """BM25 IDF as Lucene computes it: never negative, even for very common terms."""
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


# --- BM25 in Postgres -----------------------------------------------------------------


def _score_sql(
    n_terms: int, extra: str, position: str, *, skip_seen: bool = False, among: bool = False
) -> str:
    """Top-k BM25 over the chunks holding an essential term (with ``skip_seen``: none of
    the ``seen`` terms, whose chunks an earlier pass scored; with ``among``: only the
    chunks ``among`` lists). One row-level expression per
    query term instead of a per-row unnest and aggregate (a third less server time on
    common-term queries); terms are added in query order, so the scores are the same floats
    as a sum() over them. OFFSET 0 keeps each term's tf lookup from being inlined twice.
    ``position``: the function that finds a term in ``terms`` (see ``_POSITION_SQL``);
    ``OPERATOR(pg_catalog.&&)`` keeps the GIN index in use even if an intarray installed on
    the search path would otherwise claim ``&&``. A long passage's term arrays are stored
    out of line or compressed (TOAST), and every function given the column fetches and
    unpacks it again, once per query term: ``a`` unpacks each array once per row
    (``array || '{}'`` returns its argument detoasted). Same scores; BM25 statements 10 %
    faster on a 4,000-note win32 sample, 7-19 % on win32-17k."""
    tfs = ", ".join(f"a.tfs[{position}(a.terms, %(t{i})s::int)] AS f{i}" for i in range(n_terms))
    score = " + ".join(
        f"coalesce(%(w{i})s::float8 * x.f{i} * (%(k1)s + 1) / (x.f{i} + %(k1)s * x.nrm), 0)"
        for i in range(n_terms)
    )
    return f"""
SELECT t.id AS key, {score} AS score, t.doc_id
FROM chunks t
CROSS JOIN LATERAL (  -- each array fetched and unpacked once
    SELECT t.terms || '{{}}'::int[] AS terms, t.tfs || '{{}}'::real[] AS tfs OFFSET 0
) a
CROSS JOIN LATERAL (
    SELECT {tfs}, (1 - %(b)s + %(b)s * t.len / %(avg)s) AS nrm OFFSET 0  -- each tf once
) x
WHERE t.terms OPERATOR(pg_catalog.&&) %(essential)s::int[]
    {"AND NOT t.terms OPERATOR(pg_catalog.&&) %(seen)s::int[]" if skip_seen else ""}
    {"AND t.id = ANY(%(among)s::int[])" if among else ""} {extra}
ORDER BY 2 DESC, t.id
LIMIT %(limit)s
"""


@dataclass(frozen=True, slots=True)
class BM25Params:
    k1: float = 1.2
    b: float = 0.75


@dataclass(frozen=True, slots=True)
class TermStats:
    n: float  # chunks
    avg: float  # average chunk length
    found: dict[str, tuple[int, int]]  # term -> (lexicon id, df)
    position: str  # SQL function giving a term's 1-based place in ``terms``


# intarray's idx() when migration 0004 could install it (a C loop over the array, about
# twice as fast on common-term queries), else the built-in array_position (an equality
# call per element); both give the same position, so the same scores.
_POSITION_SQL = (
    "(SELECT quote_ident(n.nspname) || '.idx' FROM pg_extension e"
    " JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'intarray'"
    " AND has_schema_privilege(n.oid, 'USAGE'))"  # a schema we may not use: no intarray
)


def _stats(conn: psycopg.Connection, terms: Sequence[str]) -> TermStats:
    """Corpus statistics, the query terms' ids and dfs, the position function: one round
    trip."""
    rows = conn.execute(
        f"SELECT s.n_chunks, s.sum_len, l.term, l.id, l.df, {_POSITION_SQL} FROM lex_stats s"
        " LEFT JOIN lexicon l ON l.term = ANY(%s) AND l.df > 0 WHERE s.id = 1",
        (list(terms),),
    ).fetchall()
    assert rows, "lex_stats has no row"
    n, total, position = rows[0][0], rows[0][1], rows[0][5]
    found = {r[2]: (int(r[3]), int(r[4])) for r in rows if r[2] is not None}
    avg = (total / n) if n else 1.0
    return TermStats(float(n), float(avg or 1.0), found, position or "array_position")


StatsLookup = Callable[["psycopg.Connection", Sequence[str]], TermStats]


class TermStatsCache:
    """The corpus statistics and terms' ids and dfs of one index generation, kept across
    searches: a search needs its terms' statistics up to three times (BM25, the title
    arm, the share of unknown words), and common words recur from query to query. Reset
    when the generation moves (store.Generation.terms_key: every write of the statistics
    moves it, an interrupted index run's too); a term no passage holds is kept as such.
    Bounded: past MAX_TERMS it starts over."""

    MAX_TERMS = 50_000

    def __init__(self) -> None:
        self._generation: str | None = None
        self._corpus: tuple[float, float, str] | None = None  # n, avg, position
        self._terms: dict[str, tuple[int, int] | None] = {}
        self._lock = threading.Lock()

    def lookup(self, generation: str | None) -> StatsLookup:
        """``_stats`` through this cache for one generation (None: no index run yet,
        nothing to key by: every call reads)."""

        def stats(conn: psycopg.Connection, terms: Sequence[str]) -> TermStats:
            return (
                self._cached(conn, terms, generation)
                if generation is not None
                else _stats(conn, terms)
            )

        return stats

    def _cached(self, conn: psycopg.Connection, terms: Sequence[str], generation: str) -> TermStats:
        with self._lock:
            if generation != self._generation:
                self._generation, self._corpus, self._terms = generation, None, {}
            corpus = self._corpus
            known = {t: self._terms[t] for t in terms if t in self._terms}
        missing = [t for t in dict.fromkeys(terms) if t not in known]
        if missing or corpus is None:
            read = _stats(conn, missing)
            corpus = (read.n, read.avg, read.position)
            fresh = {t: read.found.get(t) for t in missing}
            known.update(fresh)
            with self._lock:
                if generation == self._generation:
                    if len(self._terms) + len(fresh) > self.MAX_TERMS:
                        self._terms = {}
                    self._corpus = corpus
                    self._terms.update(fresh)
        found = {t: hit for t in terms if (hit := known.get(t)) is not None}
        return TermStats(corpus[0], corpus[1], found, corpus[2])


def term_stats(
    conn: psycopg.Connection, terms: Sequence[str], lookup: StatsLookup | None = None
) -> TermStats:
    """The corpus statistics and ``terms``' ids and dfs (``lookup``: where they come
    from, else read)."""
    return (lookup or _stats)(conn, terms)


def term_idf(
    conn: psycopg.Connection, terms: Sequence[str], lookup: StatsLookup | None = None
) -> tuple[dict[str, float], float]:
    """(IDF over passages of each known term, the IDF of a term no passage holds);
    ``lookup``: where the statistics come from (a TermStatsCache's), else read."""
    stats = term_stats(conn, terms, lookup)
    return {t: idf(stats.n, float(df)) for t, (_, df) in stats.found.items()}, idf(stats.n, 0.0)


def bm25_search(
    conn: psycopg.Connection,
    query: Mapping[str, float],
    *,
    limit: int,
    params: BM25Params = BM25Params(),
    extra_sql: str = "",
    extra_params: dict[str, object] | None = None,
    candidate_cap: int = 4000,
    widen_cap: int = 8_000,
    owners: dict[int, int] | None = None,
    lookup: StatsLookup | None = None,
) -> list[tuple[int, float]]:
    """Exact top-``limit`` Okapi BM25 over chunks, scored in SQL (``owners`` gains each
    returned chunk's document id; ``lookup``: see ``term_idf``).

    MaxScore-style pruning keeps it fast without changing the answer: candidates first come
    only from the rarer ("essential") terms; if the best ``limit`` scores found that way
    beat everything the common terms alone could add, the result is exact, else we widen.
    """
    if not query or limit <= 0:
        return []
    stats = (lookup or _stats)(conn, list(query))
    scoring = _Scoring.of(stats, query, params)
    if scoring is None:
        return []
    found, dfs, present, weights = stats.found, scoring.dfs, scoring.present, scoring.weights
    ordered = sorted(present, key=lambda t: (dfs[t], t))  # rarest first
    bound = {t: weights[t] * (params.k1 + 1) for t in present}  # max contribution of a term

    sql = _score_sql(len(present), extra_sql, stats.position)
    base = {**scoring.params, "limit": limit, **(extra_params or {})}

    first = essential = _rarest_within(ordered, dfs, candidate_cap)
    essential_ids = [found[t][0] for t in essential]
    rows = _scored(conn, sql, {**base, "essential": essential_ids}, scoped=bool(extra_sql))
    rest = [t for t in ordered if t not in essential]
    if rest:
        # Exact unless a passage holding only the left-out (common) terms could still beat
        # the k-th score found: then widen once, to exactly the terms that could (MaxScore).
        theta = float(rows[-1][1]) if len(rows) >= limit else 0.0
        if sum(bound[t] for t in rest) >= theta:
            essential = _terms_that_could_matter(ordered, bound, theta)
            # Bounded for latency: when the terms that could still matter are so common
            # that scoring their postings would cost hundreds of ms, keep the first pass
            # (its scores are exact; only passages holding nothing but very common query
            # words may be missing from the top).
            if sum(dfs[t] for t in essential) <= widen_cap:
                new = [found[t][0] for t in essential if t not in first]
                seen = [found[t][0] for t in first]
                more = _unseen(conn, stats, len(present), extra_sql, base, new, seen)
                rows = sorted([*rows, *more], key=lambda r: (-float(r[1]), int(r[0])))[:limit]
    if owners is not None:
        owners.update((int(r[0]), int(r[2])) for r in rows)
    return [(int(r[0]), float(r[1])) for r in rows]


def bm25_rescore(
    conn: psycopg.Connection,
    query: Mapping[str, float],
    among: Sequence[int],
    *,
    params: BM25Params = BM25Params(),
    owners: dict[int, int] | None = None,
    lookup: StatsLookup | None = None,
) -> list[tuple[int, float]]:
    """BM25 of ``query`` for the chunks ``among`` that hold one of its terms, best first:
    the scores ``bm25_search`` gives the same chunks (same statement, same floats), with no
    search of the rest of the vault (see ``search.Searcher.gather``: feedback's expanded
    query re-ranks the arms' candidates)."""
    if not query or not among:
        return []
    stats = (lookup or _stats)(conn, list(query))
    scoring = _Scoring.of(stats, query, params)
    if scoring is None:
        return []
    sql = _score_sql(len(scoring.present), "", stats.position, among=True)
    essential = [stats.found[t][0] for t in scoring.present]
    rows = conn.execute(
        sql, {**scoring.params, "limit": len(among), "essential": essential, "among": list(among)}
    ).fetchall()
    if owners is not None:
        owners.update((int(r[0]), int(r[2])) for r in rows)
    return [(int(r[0]), float(r[1])) for r in rows]


@dataclass(frozen=True, slots=True)
class _Scoring:
    """A query's known terms (in query order: the order their scores are added), their
    dfs and weights, and the statement's parameters for them."""

    dfs: dict[str, int]
    present: list[str]
    weights: dict[str, float]
    params: dict[str, object]

    @classmethod
    def of(cls, stats: TermStats, query: Mapping[str, float], bm25: BM25Params) -> _Scoring | None:
        """None when no term of ``query`` is in the vault (or the vault is empty)."""
        dfs = {t: df for t, (_, df) in stats.found.items()}
        present = [t for t in query if t in dfs]
        if not present or stats.n == 0:
            return None
        weights = {t: idf(stats.n, dfs[t]) * query[t] for t in present}
        params: dict[str, object] = {
            "k1": bm25.k1,
            "b": bm25.b,
            "avg": stats.avg,
            **{f"t{i}": stats.found[t][0] for i, t in enumerate(present)},
            **{f"w{i}": weights[t] for i, t in enumerate(present)},
        }
        return cls(dfs, present, weights, params)


def _unseen(
    conn: psycopg.Connection,
    stats: TermStats,
    n_terms: int,
    extra_sql: str,
    params: dict[str, object],
    new: list[int],
    seen: list[int],
) -> list[tuple[int, float, int]]:
    """Widening: the top chunks holding a ``new`` term but no ``seen`` one. The first pass
    scored every chunk holding a ``seen`` term in full, so it is not scored again; its top
    list merged with this one is the top list of one pass over both (same floats)."""
    if not new:
        return []
    sql = _score_sql(n_terms, extra_sql, stats.position, skip_seen=True)
    return _scored(conn, sql, {**params, "essential": new, "seen": seen}, scoped=bool(extra_sql))


# Impose the index for one statement and put the setting back as it was, kept meanwhile in
# a setting of our own: the three statements go in one round trip (a pipeline).
_INDEX_ONLY = (
    "SELECT set_config('retriever.enable_seqscan', current_setting('enable_seqscan'), true),"
    " set_config('enable_seqscan', 'off', true)"
)
_AS_BEFORE = (  # "on" should nothing be kept (a sync inside the pipeline would end it)
    "SELECT set_config('enable_seqscan',"
    " coalesce(nullif(current_setting('retriever.enable_seqscan', true), ''), 'on'), true)"
)


def _scored(
    conn: psycopg.Connection, sql: str, params: dict[str, object], *, scoped: bool
) -> list[tuple[Any, ...]]:
    """Run a scoring statement with its candidates read from the GIN index. The planner
    prices a row's ``&&`` test as one operator call, but it compares each of the chunk's
    terms with each essential one: with a fifth of a small vault's chunks as candidates
    it chose a full scan, 4-10 ms on Dendron's 4,700 chunks against 0.1-0.7 ms through
    the index. The candidates are capped (``candidate_cap``, ``widen_cap``; the rarest
    term always counts): with a term in 80-95 % of 100,000 chunks the index still cost no
    more than the full scan. Only for this statement: a pipeline's statements are one
    transaction until its end, in autocommit too.
    Not for a ``scoped`` statement: the setting would also take the notes' table off its
    full scan, and a folder filter on win32-17k then cost 7 -> 13 ms."""
    if scoped:
        return conn.execute(sql, params).fetchall()
    with conn.pipeline():
        conn.execute(_INDEX_ONLY)
        cur = conn.execute(sql, params)
        conn.execute(_AS_BEFORE)
    return cur.fetchall()


def _rarest_within(ordered: list[str], dfs: Mapping[str, int], cap: int) -> list[str]:
    """The rarest terms (at least one) whose postings together stay within ``cap``."""
    essential: list[str] = []
    budget = 0
    for term in ordered:
        if essential and budget + dfs[term] > cap:
            break
        essential.append(term)
        budget += dfs[term]
    return essential


def _terms_that_could_matter(
    ordered: list[str], bound: Mapping[str, float], theta: float
) -> list[str]:
    """``ordered`` without the weakest terms whose bounds together stay below ``theta``: a
    passage holding only those cannot reach the top (MaxScore)."""
    skipped: set[str] = set()
    total = 0.0
    for term in sorted(ordered, key=lambda t: (bound[t], t)):
        if total + bound[term] >= theta:
            break
        total += bound[term]
        skipped.add(term)
    return [t for t in ordered if t not in skipped]
