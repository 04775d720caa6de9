"""Tests for retriever.links: Obsidian/Dendron-style link resolution."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest

from retriever.chunk import Link, parse_note
from retriever.links import LinkResolver, lookups

PATHS = [
    "Home.md",
    "Target.md",
    "projects/Alpha.md",
    "projects/Shared.md",
    "archive/Shared.md",
    "archive/old/Shared.md",
    "deep/nested/Shared.md",
    "areas/Duplicate.md",
    "zones/Duplicate.md",
    "notes/Source.md",
    "notes/sub/Child.md",
    "notes/My Note.md",
    "up/Note.md",
    "dendron.topic.md",
    "dendron.topic.lookup.md",
    "attachments/image.png",
    "Café.md",
]
ALIASES = {
    "projects/Alpha.md": ["Project A", "PA"],
    "Home.md": ["Start"],
}


@pytest.fixture(scope="module")
def resolver() -> LinkResolver:
    return LinkResolver(PATHS, ALIASES)


def wiki(target: str, alias: str | None = None, kind: str = "wiki") -> Link:
    return Link(target=target, kind=kind, line=1, anchor=None, alias=alias)


def md(target: str) -> Link:
    return Link(target=target, kind="markdown", line=1, anchor=None, alias=None)


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("projects/Alpha.md", "projects/Alpha.md"),  # exact path with .md
        ("projects/Alpha", "projects/Alpha.md"),  # exact path without .md
        ("PROJECTS/alpha", "projects/Alpha.md"),  # case-insensitive
        ("Alpha", "projects/Alpha.md"),  # unique basename
        ("alpha.md", "projects/Alpha.md"),
        ("Target", "Target.md"),
        ("old/Shared", "archive/old/Shared.md"),  # partial path must match the end
        ("nested/shared.md", "deep/nested/Shared.md"),
        ("Project A", "projects/Alpha.md"),  # frontmatter alias
        ("pa", "projects/Alpha.md"),
        ("dendron.topic.lookup", "dendron.topic.lookup.md"),  # Dendron hierarchy name
        ("dendron.topic", "dendron.topic.md"),
        ("Missing", None),
        ("missing/Alpha", None),
        ("Cafe\u0301", "Café.md"),  # NFD typed name, NFC file name
    ],
)
def test_wiki_resolution(resolver: LinkResolver, target: str, expected: str | None) -> None:
    assert resolver.resolve(wiki(target), "notes/Source.md") == expected


def test_ambiguous_basename_prefers_source_folder(resolver: LinkResolver) -> None:
    assert resolver.resolve(wiki("Shared"), "archive/Other.md") == "archive/Shared.md"
    assert resolver.resolve(wiki("Shared"), "archive/old/X.md") == "archive/old/Shared.md"
    assert resolver.resolve(wiki("Shared"), "deep/nested/X.md") == "deep/nested/Shared.md"


def test_ambiguous_basename_falls_back_to_shortest_then_lexicographic(
    resolver: LinkResolver,
) -> None:
    # Shallowest first; archive/Shared.md is shorter than projects/Shared.md.
    assert resolver.resolve(wiki("Shared"), "Home.md") == "archive/Shared.md"
    # Same depth and length: lexicographic.
    assert resolver.resolve(wiki("Duplicate"), "notes/Source.md") == "areas/Duplicate.md"
    # Deterministic whatever the input order.
    shuffled = LinkResolver(list(reversed(PATHS)), ALIASES)
    assert shuffled.resolve(wiki("Shared"), "Home.md") == "archive/Shared.md"
    assert shuffled.resolve(wiki("Duplicate"), "x/y.md") == "areas/Duplicate.md"


def test_basename_beats_alias() -> None:
    r = LinkResolver(["a/Start.md", "Home.md"], {"Home.md": ["Start"]})
    assert r.resolve(wiki("Start"), "Home.md") == "a/Start.md"


def test_dendron_label_first(resolver: LinkResolver) -> None:
    # [[label|target]]: the label does not resolve, the right-hand side does.
    assert resolver.resolve(wiki("the parent", "dendron.topic"), "x.md") == "dendron.topic.md"
    assert (
        resolver.resolve(wiki("Label", "dendron://vault/dendron.topic.lookup#Part"), "x.md")
        == "dendron.topic.lookup.md"
    )
    # Obsidian order still wins when the left side resolves.
    assert resolver.resolve(wiki("Target", "dendron.topic"), "x.md") == "Target.md"
    # Embeds do not swap sides (their alias is a size or caption).
    assert resolver.resolve(wiki("nothing", "Target", kind="embed"), "x.md") is None


def test_embeds_and_frontmatter(resolver: LinkResolver) -> None:
    assert resolver.resolve(wiki("image.png", kind="embed"), "notes/Source.md") == (
        "attachments/image.png"
    )
    assert resolver.resolve(wiki("photo.jpg", kind="embed"), "notes/Source.md") is None
    assert resolver.resolve(wiki("Alpha", kind="embed"), "notes/Source.md") == "projects/Alpha.md"
    assert resolver.resolve(wiki("Start", kind="frontmatter"), "x.md") == "Home.md"
    assert resolver.resolve(wiki("../up/Note.md", kind="frontmatter"), "notes/Source.md") == (
        "up/Note.md"
    )


@pytest.mark.parametrize(
    ("target", "source", "expected"),
    [
        ("sub/Child.md", "notes/Source.md", "notes/sub/Child.md"),
        ("./sub/Child.md", "notes/Source.md", "notes/sub/Child.md"),
        ("My Note.md", "notes/Source.md", "notes/My Note.md"),
        ("../up/Note.md", "notes/Source.md", "up/Note.md"),
        ("../Home.md", "notes/sub/Child.md", None),  # notes/Home.md does not exist
        ("../../Home.md", "notes/sub/Child.md", "Home.md"),
        ("../../../Home.md", "notes/sub/Child.md", None),  # climbs out of the vault
        ("../Home.md", "Home.md", None),
        ("/projects/Alpha.md", "notes/Source.md", "projects/Alpha.md"),  # vault root
        ("SUB/child.MD", "notes/Source.md", "notes/sub/Child.md"),  # case-insensitive
        ("sub/Child", "notes/Source.md", "notes/sub/Child.md"),  # .md optional
        ("Alpha.md", "notes/Source.md", "projects/Alpha.md"),  # bare name: shortest-path style
        ("./Alpha.md", "notes/Source.md", None),  # explicitly relative: no fallback
        ("../attachments/image.png", "notes/Source.md", "attachments/image.png"),
        ("", "notes/Source.md", None),
    ],
)
def test_markdown_resolution(
    resolver: LinkResolver, target: str, source: str, expected: str | None
) -> None:
    assert resolver.resolve(md(target), source) == expected


def test_round_trip_with_parsed_links() -> None:
    text = (
        "See [[Alpha]], [[Project A|alias]], [[label|dendron.topic]],\n"
        "[rel](../up/Note.md), [sp](<My Note.md>), [enc](My%20Note.md#Top),\n"
        "![[image.png]] and [out](../../../x.md) and [[Nowhere]].\n"
    )
    note = parse_note(text, "notes/Source.md")
    r = LinkResolver(PATHS, ALIASES)
    resolved = [r.resolve(link, "notes/Source.md") for link in note.links]
    assert resolved == [
        "projects/Alpha.md",
        "projects/Alpha.md",
        "dendron.topic.md",
        "up/Note.md",
        "notes/My Note.md",
        "notes/My Note.md",
        "attachments/image.png",
        None,
        None,
    ]


def test_fixture_links_resolve_against_fixture_vault() -> None:
    fixtures = Path(__file__).parent / "fixtures" / "chunk"
    paths = [f"vault/{p.name}" for p in fixtures.glob("*.md")]
    note = parse_note((fixtures / "dendron.topic.lookup.md").read_text(), paths[0])
    r = LinkResolver([*paths, "vault/dendron.topic.md"])
    assert [r.resolve(link, "vault/dendron.topic.lookup.md") for link in note.links] == [
        "vault/dendron.topic.md",
        None,  # dendron.topic.sibling does not exist
    ]


def test_empty_resolver() -> None:
    r = LinkResolver([])
    assert r.resolve(wiki("Anything"), "a.md") is None
    assert r.resolve(md("a.md"), "a.md") is None


def test_alias_mapping_accepts_plain_strings() -> None:
    r = LinkResolver(["a/Note.md", "b/Note2.md"], {"a/Note.md": "Solo", "b/Note2.md": ["solo"]})
    assert r.resolve(wiki("SOLO"), "x.md") == "a/Note.md"  # tie: shortest, then lexicographic
    assert r.resolve(wiki("solo"), "b/x.md") == "b/Note2.md"  # same folder wins


def _keys_of(path: str) -> set[str]:
    """The keys a resolver files ``path`` under (as LinkResolver does)."""
    key = unicodedata.normalize("NFC", path).lower()
    stem = key[:-3] if key.endswith(".md") else key
    return {key, stem, stem.rpartition("/")[2]}


def test_a_resolver_over_the_notes_its_lookups_name_resolves_as_the_whole_vault() -> None:
    """``lookups`` names every key resolving some links can ask for, so the notes filed
    under those keys (``index._scoped_notes`` reads only them) resolve every link alike."""
    links = [
        (wiki(t), s)
        for t in (
            "Alpha",
            "old/Shared",
            "Shared",
            "PA",
            "Start",
            "Missing",
            "Cafe\u0301",
            "dendron.topic",
            "x|dendron.topic",
        )
        for s in ("notes/Source.md", "archive/x.md")
    ]
    links += [(wiki("label", alias="dendron.topic.lookup"), "notes/Source.md")]
    links += [(md(t), "notes/Source.md") for t in ("sub/Child", "../up/Note.md", "Alpha.md")]
    whole = LinkResolver(PATHS, ALIASES)
    for link, source in links:
        paths, names, aliases = lookups([(link, source)])
        named = [
            p
            for p in PATHS
            if _keys_of(p) & (paths | names)
            or any(a.strip().lower() in aliases for a in ALIASES.get(p, []))
        ]
        part = LinkResolver(named, {p: a for p, a in ALIASES.items() if p in named})
        assert part.resolve(link, source) == whole.resolve(link, source), link
        assert len(named) < len(PATHS)
