"""Obsidian-style link resolution over the set of vault paths (pure, no I/O).

Rules, in order:

* ``markdown`` links are paths relative to the source note's folder (``./`` and ``../``
  normalised; a leading ``/`` means the vault root). Climbing above the vault root is
  unresolved. ``Note`` also finds ``Note.md``. A bare name that is not found relative to the
  note (``[x](Note.md)``, as Obsidian writes with "shortest path" links) falls back to the
  wiki rules below, unless it was explicitly relative (``./``, ``../``).
* ``wiki``/``embed``/``frontmatter`` targets: relative forms (``./x``, ``../x``) as above;
  else the exact vault path (with or without ``.md``); else the basename (with or without
  ``.md``; a target with folders, ``sub/Note``, must match the end of the path); else a
  frontmatter alias. For ``wiki`` and ``frontmatter`` links whose target does not resolve,
  the alias side is tried next (Dendron's label-first ``[[label|target]]``).
* Several candidates: one in the source note's folder wins, else the shallowest path, then
  the shortest, then the lexicographically smallest — deterministic.
* Matching is case-insensitive and Unicode-normalised (NFC), so macOS NFD file names match
  typed links. Non-note files (images, PDFs) resolve only when their path is in ``paths``.
"""

from __future__ import annotations

import posixpath
import re
import unicodedata
from collections.abc import Iterable, Mapping
from typing import Any

from retriever.chunk import Link

_DENDRON_PREFIX_RE = re.compile(r"^dendron://[^/|#]*/")


def _key(text: str) -> str:
    return unicodedata.normalize("NFC", text).lower()


def _rank(path: str) -> tuple[int, int, str]:
    return (path.count("/"), len(path), path)


def _strip_md(key: str) -> str:
    return key[:-3] if key.endswith(".md") else key


def _folder(path: str) -> str:
    return path.rpartition("/")[0]


class LinkResolver:
    def __init__(
        self, paths: Iterable[str], aliases: Mapping[str, Iterable[str]] | None = None
    ) -> None:
        """Index the vault once so resolve() is a few dict lookups.

        paths: vault-relative POSIX paths of all notes (e.g. 'folder/Note.md');
        aliases: path -> aliases (from each note's frontmatter).
        """
        # Sorted by rank so every candidate list is already in preference order and the
        # first path seen wins when two paths differ only by case.
        ordered = sorted(set(paths), key=_rank)
        # Full path (lower-cased, ".md" dropped for notes) -> path.
        self._by_path: dict[str, str] = {}
        # Basename (lower-cased, ".md" dropped for notes) -> candidate paths.
        self._by_name: dict[str, list[str]] = {}
        for path in ordered:
            key = _key(path)
            self._by_path.setdefault(key, path)
            name_key = key.rpartition("/")[2]
            if key.endswith(".md"):
                self._by_path.setdefault(key[:-3], path)
                name_key = name_key[:-3]
            self._by_name.setdefault(name_key, []).append(path)
        self._by_alias: dict[str, list[str]] = {}
        for path, names in (aliases or {}).items():
            for alias in [names] if isinstance(names, str) else names:
                alias_key = _key(str(alias).strip())
                if alias_key:
                    self._by_alias.setdefault(alias_key, []).append(path)
        for alias_key, candidates in self._by_alias.items():
            self._by_alias[alias_key] = sorted(set(candidates), key=_rank)

    def resolve(self, link: Link, source_path: str) -> str | None:
        """Return the vault-relative path of the target note, or None when unresolved."""
        if link.kind == "markdown":
            return self._resolve_markdown(link.target, source_path)
        found = self._resolve_name(link.target, source_path)
        if found is None and link.alias and link.kind in ("wiki", "frontmatter"):
            # Dendron label-first [[label|target]]: the "alias" may be the real target.
            alias_target = _DENDRON_PREFIX_RE.sub("", link.alias.strip()).partition("#")[0]
            if alias_target:
                found = self._resolve_name(alias_target, source_path)
        return found

    # --- internals ------------------------------------------------------------------------

    def _resolve_markdown(self, target: str, source_path: str) -> str | None:
        target = target.strip().replace("\\", "/")
        if not target:
            return None
        if target.startswith("/"):
            joined = target.lstrip("/")
        else:
            joined = posixpath.join(_folder(source_path), target)
        normalised = _normalise(joined)
        if normalised is None:
            return None  # climbs out of the vault
        found = self._by_path.get(_key(normalised))
        if found is not None or target.startswith(("./", "../", "/")):
            return found
        return self._resolve_name(target, source_path)

    def _resolve_name(self, target: str, source_path: str) -> str | None:
        target = _DENDRON_PREFIX_RE.sub("", target.strip().replace("\\", "/"))
        if not target:
            return None
        if target.startswith(("./", "../")):
            normalised = _normalise(posixpath.join(_folder(source_path), target))
            if normalised is None:
                return None
            return self._by_path.get(_key(normalised))
        key = _key(target.lstrip("/"))
        found = self._by_path.get(key)
        if found is not None:
            return found
        folder_part, _, name = key.rpartition("/")
        candidates = self._by_name.get(_strip_md(name))
        if candidates and folder_part:
            # "sub/Note": the candidate's path must end with the given folders.
            suffix = "/" + _strip_md(key)
            candidates = [c for c in candidates if ("/" + _strip_md(_key(c))).endswith(suffix)]
        if not candidates:
            candidates = self._by_alias.get(key)
        if not candidates:
            return None
        return _pick(candidates, source_path)


class _Recorder(dict[str, list[str]]):
    """A lookup table that holds nothing and remembers every key it is asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: set[str] = set()

    def get(self, key: str, default: object = None) -> Any:
        self.asked.add(key)
        return default

    # The resolver must ask through get() alone, or a key would go unrecorded.
    def __getitem__(self, key: str) -> list[str]:
        raise TypeError("LinkResolver lookups must use get()")

    def __contains__(self, key: object) -> bool:
        raise TypeError("LinkResolver lookups must use get()")


def lookups(links: Iterable[tuple[Link, str]]) -> tuple[set[str], set[str], set[str]]:
    """Every key resolving ``links`` (each with its source note's path) may look up, as
    (path keys, name keys, alias keys). With nothing found every fallback is tried, so a
    resolver over only the notes these keys match resolves the links exactly as one over
    the whole vault: an edit need not read every note's path to resolve its own links."""
    probe = LinkResolver([])
    path_keys, name_keys, alias_keys = _Recorder(), _Recorder(), _Recorder()
    probe._by_path, probe._by_name, probe._by_alias = path_keys, name_keys, alias_keys  # type: ignore[assignment]
    for link, source in links:
        probe.resolve(link, source)
    return path_keys.asked, name_keys.asked, alias_keys.asked


def _pick(candidates: list[str], source_path: str) -> str:
    if len(candidates) == 1:
        return candidates[0]
    folder = _folder(source_path)
    for candidate in candidates:  # already in rank order
        if _folder(candidate) == folder:
            return candidate
    return candidates[0]


def _normalise(path: str) -> str | None:
    """Collapse '.', '..' and empty segments; None when the path leaves the vault root."""
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                return None
            parts.pop()
        else:
            parts.append(part)
    return "/".join(parts) if parts else None
