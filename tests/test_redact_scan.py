"""The redactor's one-pass search for its trigger words (pure): the same lines, the same
verdicts and the same output as searching each word on its own, on any text."""

from __future__ import annotations

import random
import threading

import pytest

from retriever.redact import core, redact
from retriever.redact.core import Note, _line_starts_of, _Words

WORDS = ("pass", "pass:", "password-stdin", " -p", "key", "clé", "@", "token", "set -", "tg_")
PIECES = [
    "pass", "Pass:", "PASSWORD-STDIN", " -p ", "monkey", "KEY", "clé", "CLÉ", "@", "İstanbul",
    "token", "set -e", "tg_bot", "😀", "\n", "\r\n", "\n\n", " ", "word", "x", "\t", "é",
]  # fmt: skip


def texts(n: int, seed: int) -> list[str]:
    rnd = random.Random(seed)
    return ["".join(rnd.choice(PIECES) for _ in range(rnd.randrange(0, 60))) for _ in range(n)]


def test_one_pass_finds_the_lines_each_word_search_finds() -> None:
    words = _Words()
    for word in WORDS:
        words.learn(word)
    for text in texts(400, 1):
        note = Note(text)
        result = words.occurrences(note.low)
        assert result is not None and result[0] == frozenset(WORDS)
        for word in WORDS:
            offsets = result[1].get(word, [])
            assert offsets == [i for i in range(len(note.low)) if note.low.startswith(word, i)]
            lines = sorted({note.low.rfind("\n", 0, i) + 1 for i in offsets})
            assert lines == _line_starts_of(note.low, word)


def test_a_note_answers_the_same_with_and_without_the_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def answers(text: str) -> tuple[object, ...]:
        note = Note(text)
        return (
            [note.lines((w,)) for w in WORDS],
            note.lines(WORDS),
            [note.has(w) for w in WORDS],
            [note.has_exact(w) for w in ("Pass", "KEY", "ghp_", "😀", "İ")],
        )

    sample = texts(300, 2)
    for text in sample[:5]:
        answers(text)  # the words are learnt: later notes take the pass
    with_pass = [answers(t) for t in sample]
    monkeypatch.setattr(core, "ahocorasick", None)
    monkeypatch.setattr(core, "_LOWERCASE_WORDS", _Words())
    monkeypatch.setattr(core, "_EXACT_WORDS", _Words())
    assert [answers(t) for t in sample] == with_pass


def test_a_word_first_asked_for_after_the_pass_is_still_found() -> None:
    note = Note("alpha\nthe zebra-quokka line\n")
    assert note.has("alpha")  # the pass runs, without the word below
    assert not note.has("zebra-quokka-unseen")
    assert note.has("zebra-quokka")
    assert note.lines(("zebra-quokka",)) == [(6, 27)]
    assert note.has_exact("Zebra") is False and note.has_exact("zebra") is True


def test_redaction_is_the_same_from_many_threads() -> None:
    notes = [
        f"Garage door code: {1000 + i}\npassword = hunter{i}x7Q!\ntoken ghp_{'a1B2' * 9}\n{t}"
        for i, t in enumerate(texts(60, 3))
    ]
    expected = [redact(n) for n in notes]
    core._LOWERCASE_WORDS.words.clear()  # every thread learns and rebuilds at once
    core._EXACT_WORDS.words.clear()
    results: list[list[object]] = [[] for _ in range(8)]

    def work(k: int) -> None:
        results[k] = [redact(n) for n in notes]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r == expected for r in results)
    assert "[REDACTED:" in expected[0][0]
