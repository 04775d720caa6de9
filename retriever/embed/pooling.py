"""Model2Vec's mean pooling, without its (texts, tokens, dim) intermediate: an index run's
hot loop, and the same vector for a text in any batch.

``StaticModel.encode`` gathers every token's vector into a (texts, tokens, dim) float16
array and averages it: on win32-17k (87k passages) that was a third of the 35 s spent
encoding; the rest is tokenising, in Rust on every core. Here each batch converts only
the table rows it uses to float32 once (exactly), and each text's rows are summed in
order, as ``encode``'s float32 mean sums them: the same vectors bit for bit (a test holds
them side by side) in three quarters of the time. A text's vector never depends on what
else shares its batch (an interrupted, resumed index run stores what one run stores).

Truncation is Model2Vec's own: the text is cut at ``max_length x median_token_length``
characters and the tokenizer at ``max_length`` tokens. A model this cannot read the same
way (no such attributes, an integer table) keeps ``encode``: :func:`pooler_for` says so by
returning None.

Tokenising is the other cost, and an index run tokenises the same words over and over: a
long passage's windows repeat its words twice, and a vault repeats its vocabulary across
notes. :class:`WordIds` tokenises each whitespace-separated word once and joins the
cached ids, which gives the tokenizer's own ids only for a tokenizer that never lets a token
cross whitespace (BERT's word pieces, Model2Vec's word-level vocabularies): it proves that
on probe texts the first time a batch is big enough to use it, or is not used, and texts
holding a separator it reads otherwise (U+001C, which BERT deletes instead of splitting
at) go to the tokenizer whole.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

Windowed = tuple[str, Sequence[str], Sequence[int]]  # (context, words, window starts)
# A passage's context ids, body ids, and each window's bounds in the body's ids (the
# tokenizer's cut applied; unknown tokens still counted, as the tokenizer counts them).
Span = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _used_rows(rows: np.ndarray, n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(rows, return_inverse=True)`` for rows of a table of ``n_rows``, by
    marking instead of sorting (the sort was a fifth of encoding a batch); a query's few
    tokens are sorted (cheaper than two arrays the table's size)."""
    if len(rows) * 8 < n_rows:
        found, inverse = np.unique(rows, return_inverse=True)
        return found, inverse.ravel()
    mark = np.zeros(n_rows, dtype=bool)
    mark[rows] = True
    used = np.flatnonzero(mark)
    index = np.zeros(n_rows, dtype=np.int64)
    index[used] = np.arange(len(used))
    return used, index[rows]


def _known(ids: np.ndarray, unk: int | None) -> tuple[np.ndarray, np.ndarray]:
    """The ids other than the unknown token, and where they stand among ``ids``."""
    if unk is None:
        return ids, np.arange(len(ids))
    at = np.flatnonzero(ids != unk)
    return ids[at], at


def _sliced_means(
    rows: np.ndarray, n_lead: int, body_at: np.ndarray, a_of: np.ndarray, b_of: np.ndarray
) -> np.ndarray:
    """Window means from a passage's known rows (the context's first, then the body's,
    found at ``body_at`` among all its ids): each window sums its slice of the rows
    gathered once (a matrix product would be one call, but BLAS threads spin against the
    index's other processes on a small machine)."""
    lead_sum = np.add.reduce(rows[:n_lead], axis=0)
    body = rows[n_lead:]
    first = np.searchsorted(body_at, a_of)
    last = np.searchsorted(body_at, b_of)
    out = np.zeros((len(a_of), rows.shape[1]), dtype=np.float32)
    for j, (a, b) in enumerate(zip(first.tolist(), last.tolist(), strict=True)):
        n = n_lead + b - a
        if n:
            out[j] = (lead_sum + np.add.reduce(body[a:b], axis=0)) / n
    return out


def window_text(context: str, words: Sequence[str]) -> str:
    """A window's text, as ``retriever.prepare.embedding_input`` writes it."""
    body = " ".join(words)
    return f"{context}\n\n{body}" if context else body


def windows_as_texts(
    encode: Callable[[Sequence[str]], np.ndarray], passages: Sequence[Windowed], width: int
) -> list[np.ndarray]:
    """Each passage's window vectors, every window encoded as its text."""
    texts = [window_text(c, w[s : s + width]) for c, w, starts in passages for s in starts]
    vectors = np.asarray(encode(texts), dtype=np.float32).reshape(len(texts), -1)
    ends = np.cumsum([len(starts) for _, _, starts in passages], dtype=np.int64)
    return [vectors[end - len(p[2]) : end] for p, end in zip(passages, ends, strict=True)]


# A batch this big is an index run's (a search embeds 1-4 queries): only then is the word
# cache worth its probe (20 ms) and its memory.
WORD_CACHE_FROM = 32
# Words per generation of the word cache (at most twice as many held: about 13 MB).
WORD_CACHE_SIZE = 50_000


class MeanPooler:
    """Encodes texts as the model's ``encode`` does, faster (see the module doc)."""

    def __init__(self, model: Any, max_chars: int | None) -> None:
        self._model = model
        self._max_chars = max_chars
        self._mapping = model.token_mapping
        self._weights = model.weights
        self._normalize = bool(model.normalize)
        self._words: WordIds | None = None
        self._words_tried = False

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if self._max_chars is not None:
            texts = [t[: self._max_chars] for t in texts]
        tokens, lengths = self._token_ids(texts)
        out = np.zeros((len(lengths), self._model.embedding.shape[1]), dtype=np.float32)
        if not len(tokens):
            return self._as_encode_returns(out)
        rows = tokens if self._mapping is None else self._mapping[tokens]
        used, position = _used_rows(rows, len(self._model.embedding))
        table = self._model.embedding[used].astype(np.float32)  # float16 -> float32: exact
        start = 0
        for i, n in enumerate(lengths):
            if n:
                vectors = table[position[start : start + n]]
                if self._weights is not None:
                    vectors = vectors * self._weights[tokens[start : start + n], None]
                out[i] = np.add.reduce(vectors, axis=0) / n
            start += n
        return self._as_encode_returns(out)

    def _token_ids(self, texts: Sequence[str]) -> tuple[np.ndarray, list[int]]:
        """Every text's token ids, end to end, and how many each text has."""
        words = self._word_ids() if len(texts) >= WORD_CACHE_FROM else None
        if words is not None:
            return words.ids(texts)
        ids = self._model.tokenize(list(texts))
        flat = np.fromiter((t for x in ids for t in x), dtype=np.int64)
        return flat, [len(x) for x in ids]

    def encode_windows(self, passages: Sequence[Windowed], width: int) -> list[np.ndarray]:
        """Each passage's window vectors: for ``(context, words, starts)``, window j is
        ``context`` then ``words[starts[j] : starts[j] + width]``, as ``encode`` gives them
        for the window's text, to float rounding: a passage's rows are gathered once, not
        once per window (they overlap twice), from words tokenised once. A window cut by
        characters is encoded as text."""
        words = self._word_ids()
        if words is None:
            return windows_as_texts(self.encode, passages, width)
        spans, cut = words.window_spans(passages, width, self._max_chars)
        counts = [len(starts) for _, _, starts in passages]
        out = [self._as_encode_returns(m) for m in self._window_means(spans, counts)]
        if cut:
            encoded = self.encode([text for _, _, text in cut])
            for (p, j, _), vector in zip(cut, encoded, strict=True):
                out[p][j] = vector
        return out

    def _word_ids(self) -> WordIds | None:
        if not self._words_tried:
            self._words, self._words_tried = WordIds.for_model(self._model), True
        return self._words

    def _window_means(
        self, spans: Sequence[Span | None], counts: Sequence[int]
    ) -> list[np.ndarray]:
        """Float32 window means of each passage's ``spans`` (none: zeros, one per window of
        ``counts``), the table's rows this batch uses converted to float32 once, as
        ``encode`` does."""
        unk = self._model.unk_token_id
        known = [
            None if span is None else (_known(span[0], unk), _known(span[1], unk)) for span in spans
        ]
        tokens = np.concatenate(
            [k[i][0] for k in known if k is not None for i in (0, 1)] or [np.zeros(0, np.int64)]
        )
        rows = tokens if self._mapping is None else self._mapping[tokens]
        used, position = _used_rows(rows, len(self._model.embedding))
        table = self._model.embedding[used].astype(np.float32)
        out: list[np.ndarray] = []
        start = 0
        for span, ids, count in zip(spans, known, counts, strict=True):
            if span is None or ids is None:
                out.append(np.zeros((count, table.shape[1]), dtype=np.float32))
                continue
            (lead, _), (body, body_at) = ids
            size = len(lead) + len(body)
            vectors = table[position[start : start + size]]
            if self._weights is not None:
                vectors = vectors * self._weights[tokens[start : start + size], None]
            start += size
            out.append(_sliced_means(vectors, len(lead), body_at, span[2], span[3]))
        return out

    def _as_encode_returns(self, means: np.ndarray) -> np.ndarray:
        """``encode``'s last steps: the means in the table's type, normalised in float32
        and cast back (float16 for most models), so the vectors are its vectors."""
        kind = self._model.embedding.dtype
        out = means.astype(kind)
        if self._normalize:
            wide = out.astype(np.float32)
            out = (wide / (np.linalg.norm(wide, axis=1, keepdims=True) + 1e-32)).astype(kind)
        return out.astype(np.float32)


def pooler_for(model: Any) -> MeanPooler | None:
    """A pooler for ``model``, or None when its encoding is not plain float mean pooling."""
    needed = ("tokenize", "embedding", "token_mapping", "weights", "normalize", "max_length")
    if not all(hasattr(model, a) for a in needed) or model.embedding.dtype.kind != "f":
        return None
    max_length = model.max_length
    if max_length is None:
        return MeanPooler(model, None)
    median = getattr(model, "median_token_length", None)
    if not isinstance(median, int | float) or median <= 0:
        return None
    return MeanPooler(model, int(max_length * median))


class WordIds:
    """A tokenizer's ids for texts, each whitespace-separated word tokenised once (see the
    module doc). Holds the ids of at most twice ``limit`` words (see ``_learn``)."""

    def __init__(self, model: Any, max_tokens: int | None, unsafe: str, limit: int) -> None:
        self._model = model
        self._max_bytes = None if max_tokens is None else 4 * max_tokens
        self._unsafe = re.compile(f"[{re.escape(unsafe)}]") if unsafe else None
        self._limit = limit
        self._young: dict[str, bytes] = {}
        self._old: dict[str, bytes] = {}
        self._dim = int(model.embedding.shape[1])

    @classmethod
    def for_model(cls, model: Any, limit: int = WORD_CACHE_SIZE) -> WordIds | None:
        """Word-cached tokenising for ``model``, or None when its tokenizer lets a token
        cross whitespace or truncates in a way this cannot follow."""
        cut = _right_truncation(getattr(model, "tokenizer", None))
        if cut is False:
            return None
        max_tokens = cut if isinstance(cut, int) else None
        probe = cls(model, max_tokens, "", limit)
        w, v = _two_words(model.tokenizer)
        unsafe = "".join(c for c in _SEPARATORS if not probe.agrees(f"{w}{c}{v}"))
        probes = [p.format(w=w, v=v, W=w.upper()) for p in _PROBES]
        if not all(probe.agrees(t) for t in probes):
            return None
        return cls(model, max_tokens, unsafe, limit)

    def agrees(self, text: str) -> bool:
        """Whether the tokenizer reads ``text`` as its words one by one."""
        return self._raw([text])[0] == self._joined(text.split(), self._learn(set(text.split())))

    def ids(self, texts: Sequence[str]) -> tuple[np.ndarray, list[int]]:
        split = [None if self._unsafe and self._unsafe.search(t) else t.split() for t in texts]
        cache = self._learn({w for words in split if words is not None for w in words})
        exact = [t for t, words in zip(texts, split, strict=True) if words is None]
        by_tokenizer = iter(self._raw(exact))
        parts = [
            self._joined(words, cache) if words is not None else next(by_tokenizer)
            for words in split
        ]
        flat = np.frombuffer(b"".join(parts), dtype=np.int32).astype(np.int64)
        lengths = np.fromiter((len(p) // 4 for p in parts), dtype=np.int64, count=len(parts))
        unk = self._model.unk_token_id
        if unk is None or not (flat == unk).any():
            return flat, lengths.tolist()
        # Model2Vec drops the unknown token after the tokenizer's cut, as here.
        known = flat != unk
        owner = np.repeat(np.arange(len(parts)), lengths)
        return flat[known], np.bincount(owner[known], minlength=len(parts)).tolist()

    def window_spans(
        self, passages: Sequence[Windowed], width: int, max_chars: int | None
    ) -> tuple[list[Span | None], list[tuple[int, int, str]]]:
        """Each passage's ids and window bounds (``Span``; None for a context holding a
        separator the tokenizer reads otherwise), and the windows (passage, window, text)
        that a character cut reaches, left for ``encode``."""
        safe = [not (self._unsafe and self._unsafe.search(c)) for c, _, _ in passages]
        cache = self._learn(
            {
                w
                for (c, ws, _), ok in zip(passages, safe, strict=True)
                if ok
                for w in (*c.split(), *ws)
            }
        )
        spans: list[Span | None] = []
        cut: list[tuple[int, int, str]] = []
        for p, ((context, words, starts), ok) in enumerate(zip(passages, safe, strict=True)):
            if not ok:
                spans.append(None)
                cut += [
                    (p, j, window_text(context, words[s : s + width])) for j, s in enumerate(starts)
                ]
                continue
            spans.append(self._span(cache, context, words, starts, width))
            sizes = np.cumsum([0, *(len(w) + 1 for w in words)])
            base = len(context) + 2 if context else 0
            for j, s in enumerate(starts):
                end = min(s + width, len(words))
                if max_chars is not None and base + sizes[end] - sizes[s] - 1 > max_chars:
                    cut.append((p, j, window_text(context, words[s:end])))
        return spans, cut

    def _span(
        self,
        cache: dict[str, bytes],
        context: str,
        words: Sequence[str],
        starts: Sequence[int],
        width: int,
    ) -> Span:
        lead = np.frombuffer(self._joined(context.split(), cache), dtype=np.int32)
        pieces = [cache[w] for w in words]
        offsets = np.cumsum([0, *(len(b) // 4 for b in pieces)])
        body = np.frombuffer(b"".join(pieces), dtype=np.int32)
        a_of = offsets[list(starts)]
        b_of = offsets[[min(s + width, len(words)) for s in starts]]
        if self._max_bytes is not None:  # the tokenizer's cut, past the context's tokens
            b_of = np.minimum(b_of, a_of + self._max_bytes // 4 - len(lead))
        return lead.astype(np.int64), body.astype(np.int64), a_of, b_of

    def _raw(self, texts: Sequence[str]) -> list[bytes]:
        """The tokenizer's own ids (the unknown token kept), cut as it cuts."""
        if not texts:
            return []
        encodings = self._model.tokenizer.encode_batch_fast(list(texts), add_special_tokens=False)
        return [np.asarray(e.ids, dtype=np.int32).tobytes() for e in encodings]

    def _joined(self, words: Sequence[str], cache: dict[str, bytes]) -> bytes:
        """The ids of ``words`` (all in ``cache``), cut as the tokenizer cuts."""
        return b"".join([cache[w] for w in words])[: self._max_bytes]

    def _learn(self, words: set[str]) -> dict[str, bytes]:
        """The ids of every word of ``words``, tokenising only those not cached. Two
        generations bound the cache: a word used again moves to the young one, and when
        the young one holds ``limit`` words it becomes the old one (the old one is
        dropped), so frequent words stay and at most twice ``limit`` are held."""
        young, old = self._young, self._old
        found: dict[str, bytes] = {}
        missing: list[str] = []
        for word in words:
            ids = young.get(word)
            if ids is None:
                ids = old.get(word)
                if ids is None:
                    missing.append(word)
                    continue
                young[word] = ids
            found[word] = ids
        for word, ids in zip(missing, self._raw(missing), strict=True):
            young[word] = found[word] = ids
        if len(young) >= self._limit:
            self._old, self._young = young, {}
        return found


# Python's str.split() separators: a tokenizer that reads one of them as something else
# (BERT deletes U+001C-U+001F) sees the text whole.
_SEPARATORS = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680"
    + "".join(map(chr, range(0x2000, 0x200B)))
    + "\u2028\u2029\u202f\u205f\u3000"
)
_PROBES = (
    "{w} {v}",
    "{w}, {v}! {w}.{v}({w}) {v}'s {w}-{v} {W}{v} café naïve ÉTÉ 東京{w} x=1; y==2 // {v}?",
    "  {w}\n\n## {v}\t{w}  |  {v} | ```{w}``` **{v}** [[{w}]] {w}/{v}.md #{v} 3.14 {w}_{v}",
)


def _two_words(tokenizer: Any) -> tuple[str, str]:
    """Two plain words the tokenizer knows (so that the probes are not all unknown)."""
    words = sorted(t for t in tokenizer.get_vocab() if t.isalpha() and t.isascii() and len(t) > 3)
    return (words[0], words[-1]) if len(words) >= 2 else ("alpha", "beta")


def _right_truncation(tokenizer: Any) -> int | bool | None:
    """The tokenizer's cut (keeps the first N tokens): N; None for no cut; False for a cut
    this cannot follow (from the left, or a tokenizer this does not know)."""
    if tokenizer is None or not hasattr(tokenizer, "truncation"):
        return False
    cut = tokenizer.truncation
    if cut is None:
        return None
    if cut.get("direction", "right") != "right" or cut.get("stride", 0):
        return False
    return int(cut["max_length"])
