"""Make a small but real Model2Vec model at test time (no hub needed).

Word vectors come from the test vault itself: latent semantic analysis (a truncated SVD
of the term-by-paragraph TF-IDF matrix). Words that share contexts get close
vectors, so semantic search has real semantics to find, and the model goes through
Model2Vec's own save/load code like any downloaded one.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import numpy as np

WORD = re.compile(r"[^\W\d_]{2,}", re.UNICODE)


def _fold(text: str) -> str:
    import unicodedata

    decomposed = unicodedata.normalize("NFKD", text.lower())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def build_model(corpus: Path, out: Path, *, dim: int = 64) -> Path:
    from model2vec import StaticModel
    from tokenizers import Tokenizer, normalizers, pre_tokenizers
    from tokenizers.models import WordLevel

    # Contexts are paragraphs: a term-by-paragraph TF-IDF matrix, then a thin SVD (LSA).
    docs: list[list[str]] = []
    for path in sorted(corpus.rglob("*.md")):
        text = path.read_text(encoding="utf-8", errors="replace")
        for para in re.split(r"\n\s*\n", text):
            words = [_fold(w) for w in WORD.findall(para)]
            if words:
                docs.append(words)
    vocab_words = sorted({w for d in docs for w in d})
    index = {w: i + 1 for i, w in enumerate(vocab_words)}  # 0 = [UNK]
    matrix = np.zeros((len(index) + 1, len(docs)), dtype=np.float64)
    for j, d in enumerate(docs):
        for w, c in Counter(d).items():
            matrix[index[w], j] = 1.0 + np.log(c)
    df = (matrix > 0).sum(axis=1, keepdims=True)
    matrix *= np.log((1 + len(docs)) / (1 + df))
    u, s, _ = np.linalg.svd(matrix, full_matrices=False)
    k = min(dim, u.shape[1])
    vectors = (u[:, :k] * s[:k]).astype(np.float32)
    vectors[0] = 0.0  # unknown words carry no meaning
    norms = np.linalg.norm(vectors[1:], axis=1, keepdims=True)
    vectors[1:] = vectors[1:] / np.maximum(norms, 1e-9)

    vocab = {"[UNK]": 0, **index}
    tokenizer = Tokenizer(WordLevel(vocab=vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Sequence(
        [normalizers.NFKD(), normalizers.StripAccents(), normalizers.Lowercase()]
    )
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    model = StaticModel(vectors=vectors, tokenizer=tokenizer, normalize=True)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out))
    return out
