"""Title/alias arm: a query that names a note lifts that note.

Every note is known by several names: its title, its aliases, its file name and, for
Dendron-style hierarchies (``a.b.c.md``), its last label. Names and queries go through the
lexical normaliser (so plural/singular and accents already agree); a query word one edit
away from a name word (a small typo) still matches, at a discount.

A name's score is the share of its information that the query holds, times the share of
the query's information it explains; information is a word's IDF over the vault's
passages. "tags" names the note "Tags" fully, "how are tags inherited"
a little less, and a long question that merely contains the vault's name ("Dendron") does
not name the root note "Dendron". A glossary that mentions everything does not win here:
only names count, never body text.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

import psycopg

from retriever import store
from retriever.lexical import term_idf, tokenize

FUZZY_DISCOUNT = 0.7  # a one-edit match counts this much of an exact one
MIN_FUZZY_LEN = 5  # shorter words are too easily one edit from another word
MIN_SCORE = 0.25  # below this a name is not really named by the query
_SEPARATORS = str.maketrans({".": " ", "_": " ", "-": " ", "/": " "})
COMMON_SHARE = 0.05  # name words in more than this share of notes do not seed candidates


def note_names(path: str, title: str, aliases: Iterable[str]) -> list[str]:
    """The names a note answers to (duplicates removed, order kept)."""
    stem = _stem(path)
    names = [title, *aliases, stem]
    if "." in stem:  # Dendron hierarchy: the last label names the note too
        names.append(stem.rsplit(".", 1)[1])
    seen: set[str] = set()
    out: list[str] = []
    for name in names:
        key = name.strip().lower()
        if key and key not in seen:
            seen.add(key)
            out.append(name.strip())
    return out


def _stem(path: str) -> str:
    """``PurePosixPath(path).stem`` for a vault-relative path, without building a path
    (a third of the title index's build on 17,000 notes)."""
    name = path.rsplit("/", 1)[-1]
    dot = name.rfind(".")
    return name[:dot] if 0 < dot < len(name) - 1 else name


def _deletions(word: str) -> set[str]:
    return {word[:i] + word[i + 1 :] for i in range(len(word))}


@dataclass(frozen=True, slots=True)
class Plan:
    """A query as the title index scores it (see ``TitleIndex.plan``)."""

    qwords: frozenset[str]
    credit: dict[str, float]  # matched name word -> credit (1, or the typo discount)
    candidates: tuple[int, ...]  # names holding a matched word


@dataclass(slots=True)
class TitleIndex:
    """Names of every note, tokenised, with an inverted index over their words.

    One instance per index generation. Word weights (IDF over the passages) and note
    openings are filled in as searches need them (``weigh``, ``load_openings``) or all at
    once (``preload``): after an edit the first search fetches the few its query touches,
    not the weights of every name word in the vault (~250 ms on 17,000 notes)."""

    # Tuples, not sets: win32-17k's 17,000 notes give 33,600 names and 100,800 deletions,
    # most of one to three words, and a set of one word takes 216 bytes against a tuple's
    # 48. Every searching process holds the index: 51.9 MiB with sets, 25.5 with tuples.
    names: list[tuple[int, tuple[str, ...]]] = field(default_factory=list)  # (doc, words)
    postings: dict[str, list[int]] = field(default_factory=dict)  # word -> name indexes
    fuzzy: dict[str, tuple[str, ...]] = field(default_factory=dict)  # deletion -> words
    passage_idf: dict[str, float] = field(default_factory=dict)  # words weighed so far
    weighed: set[str] = field(default_factory=set)  # known: in passage_idf or no passage
    max_idf: float = 1.0  # a word the passages never hold
    n_docs: int = 0
    openings: dict[int, int | None] = field(default_factory=dict)  # doc -> opening chunk
    infos: dict[int, float] = field(default_factory=dict)  # name -> its words' weight
    generation: str | None = None  # the index run this instance weighs for
    complete: bool = False  # every name word weighed, every opening looked up
    warming: bool = False  # a background preload is on its way
    fetches: int = 0  # searches that had to fetch weights

    @classmethod
    def build(cls, docs: Iterable[tuple[int, str, str, Iterable[str]]]) -> TitleIndex:
        """From (doc id, path, title, aliases) rows."""
        index = cls()
        postings: dict[str, list[int]] = defaultdict(list)
        for doc_id, path, title, aliases in docs:
            index.n_docs += 1
            for name in note_names(path, title, aliases):
                # File names like a.b-c are words, not one identifier to match whole.
                words = tuple(dict.fromkeys(tokenize(name.translate(_SEPARATORS))))
                if not words:
                    continue
                for word in words:
                    postings[word].append(len(index.names))
                index.names.append((doc_id, words))
        index.postings = dict(postings)
        fuzzy: dict[str, list[str]] = defaultdict(list)
        for word in index.postings:  # distinct words, each deletion once per word
            if len(word) >= MIN_FUZZY_LEN and word.isalpha():
                for d in _deletions(word):
                    fuzzy[d].append(word)
        index.fuzzy = {d: tuple(words) for d, words in fuzzy.items()}
        index.set_idf({}, 1.0)
        return index

    def next_generation(self, generation: str | None) -> TitleIndex:
        """The same names with nothing weighed or opened yet (searches still holding this
        instance keep its weights)."""
        return replace(
            self,
            passage_idf={},
            weighed=set(),
            max_idf=1.0,
            openings={},
            infos={},
            generation=generation,
            complete=False,
            warming=False,
            fetches=0,
        )

    def set_idf(self, passage_idf: dict[str, float], max_idf: float) -> None:
        """Weigh every name word at once by its IDF over the passages (absent: max_idf)."""
        self.passage_idf, self.max_idf = dict(passage_idf), max_idf
        self.weighed = set(self.postings) | set(passage_idf)
        self.infos = {}

    def weigh(self, passage_idf: Mapping[str, float], max_idf: float, words: Iterable[str]) -> None:
        """Record the IDF of ``words`` (those missing from ``passage_idf`` no passage holds)."""
        self.passage_idf.update(passage_idf)
        self.max_idf = max_idf
        self.weighed.update(words)

    def plan(self, query: str) -> Plan:
        """What scoring ``query`` takes: its words, the name words they match (with their
        credit) and the candidate names."""
        qwords = frozenset(tokenize(query))
        if not qwords or not self.names:
            return Plan(qwords, {}, ())
        credit = self._credit(qwords)
        return Plan(qwords, credit, tuple(self._candidates(credit)) if credit else ())

    def to_weigh(self, plans: Iterable[Plan]) -> set[str]:
        """Words not weighed yet that scoring ``plans`` needs: the queries' own words and
        every word of their candidate names."""
        needed: set[str] = set()
        for plan in plans:
            needed |= plan.qwords
            if not self.complete:  # else every name word is weighed already
                for i in plan.candidates:
                    needed.update(self.names[i][1])
        return needed - self.weighed

    def preload(self, conn: psycopg.Connection) -> TitleIndex:
        """Every name word's weight and every note's opening (calibration runs thousands
        of searches against one generation)."""
        self.weigh(*term_idf(conn, list(self.postings)), self.postings)
        rows = conn.execute(
            "SELECT DISTINCT ON (doc_id) doc_id, id FROM chunks ORDER BY doc_id, ordinal"
        ).fetchall()
        self.openings.update({int(d): int(c) for d, c in rows})
        self.complete = True
        return self

    def load_openings(self, conn: psycopg.Connection, docs: Iterable[int]) -> None:
        """Look up the opening chunk of the notes in ``docs`` not looked up yet."""
        missing = sorted({d for d in docs if d not in self.openings})
        if not missing:
            return
        rows = conn.execute(
            "SELECT DISTINCT ON (doc_id) doc_id, id FROM chunks WHERE doc_id = ANY(%s)"
            " ORDER BY doc_id, ordinal",
            (missing,),
        ).fetchall()
        found = {int(d): int(c) for d, c in rows}
        self.openings.update({d: found.get(d) for d in missing})

    def first_chunk(self, doc: int) -> int | None:
        """The note's opening chunk, once looked up (stands for a note found by name or
        by link)."""
        return self.openings.get(doc)

    def weight(self, word: str) -> float:
        found = self.passage_idf.get(word)
        return found if found is not None else self.max_idf

    @property
    def name_info(self) -> list[float]:
        """Each name's information: the sum of its words' weights."""
        return [sum(self.weight(w) for w in words) for _, words in self.names]

    def _matches(self, word: str) -> dict[str, float]:
        """Name words this query word matches, with their credit (1, or the typo discount)."""
        found = {word: 1.0} if word in self.postings else {}
        if not found and len(word) >= MIN_FUZZY_LEN and word.isalpha():
            for probe in (word, *_deletions(word)):
                for cand in self.fuzzy.get(probe, ()):
                    found.setdefault(cand, FUZZY_DISCOUNT)
                if probe != word and probe in self.postings:
                    found.setdefault(probe, FUZZY_DISCOUNT)  # the query has an extra letter
        return found

    def _credit(self, qwords: Iterable[str]) -> dict[str, float]:
        credit: dict[str, float] = {}
        for word in qwords:
            for match, c in self._matches(word).items():
                credit[match] = max(credit.get(match, 0.0), c)
        return credit

    def search(self, query: str, *, limit: int = 20) -> dict[int, float]:
        """doc id -> score in (0, 1], best names only, at most ``limit`` notes. Words not
        weighed yet (see ``to_weigh``) count as words no passage holds."""
        return self.score(self.plan(query), limit=limit)

    def score(self, plan: Plan, *, limit: int = 20) -> dict[int, float]:
        """``search`` for a planned query."""
        if not plan.credit:
            return {}
        q_info = sum(self.weight(w) for w in plan.qwords) or 1.0
        # Matched name words weigh what they weigh in their name's information.
        gain = {w: self.weight(w) * c for w, c in plan.credit.items()}
        best: dict[int, float] = {}
        for i in plan.candidates:
            doc, words = self.names[i]
            hit = sum(gain[w] for w in words if w in gain)
            name_info = self._info(i) if hit else 0.0
            if not name_info:
                continue
            score = (hit / name_info) * min(1.0, hit / q_info)
            if score >= MIN_SCORE and score > best.get(doc, 0.0):
                best[doc] = score
        ranked = sorted(best.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
        return dict(ranked)

    def _info(self, i: int) -> float:
        """Name ``i``'s information, remembered once all its words are weighed."""
        found = self.infos.get(i)
        if found is None:
            words = self.names[i][1]
            found = sum(self.weight(w) for w in words)
            if self.weighed.issuperset(words):
                self.infos[i] = found
        return found

    def _candidates(self, credit: dict[str, float]) -> set[int]:
        """Names holding a matched word; very common name words (``dendron`` in every
        file name) seed candidates only when nothing rarer matched."""
        common = max(50, int(COMMON_SHARE * self.n_docs))
        rare = [w for w in credit if len(self.postings[w]) <= common]
        # Ties go to the word itself: the credit's order follows the hash seed.
        seeds = rare or sorted(credit, key=lambda w: (len(self.postings[w]), w))[:1]
        out: set[int] = set()
        for word in seeds:
            out.update(self.postings[word][:5000])
        return out


class TitleCache:
    """The vault's title index, one per index generation (cheap generation check). Names
    are rebuilt only when a note's id, path, title or aliases moved; weights and openings
    start empty each generation and fill in as searches need them."""

    def __init__(self) -> None:
        self._index = TitleIndex()
        self._generation: object = None
        self._stamp: tuple[int, ...] = ()
        self._lock = threading.Lock()

    def get(self, conn: psycopg.Connection, gen: store.Generation | None = None) -> TitleIndex:
        """The current generation's index (``gen``: as the caller read it, else read)."""
        generation = gen.index if gen is not None else store.index_generation(conn)
        with self._lock:
            if generation != self._generation:
                stamp = store.notes_stamp(conn)
                if stamp != self._stamp:  # most of a second on 17,000 notes
                    rows = conn.execute("SELECT id, path, title, aliases FROM documents").fetchall()
                    self._index = TitleIndex.build((int(r[0]), r[1], r[2], r[3]) for r in rows)
                    self._stamp = stamp
                self._index = self._index.next_generation(generation)
                self._generation = generation
            return self._index

    def latest(self) -> TitleIndex:
        """The index of the generation the last ``get`` saw."""
        return self._index
