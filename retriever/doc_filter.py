"""The caller's note filters (folder, tags, note type, modified after), built once and
applied the same way by the index (as SQL) and by the no-database files search (in
Python): a tag matches itself and its nested tags (#homelab ⊇ #homelab/backup), case
folded, the way list_notes and Obsidian treat them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


class Filtered(Protocol):
    """What a search request carries for its filters (SearchOptions, FilesQuery)."""

    @property
    def folder(self) -> str | None: ...
    @property
    def tags(self) -> list[str] | None: ...
    @property
    def note_type(self) -> str | None: ...
    @property
    def modified_after(self) -> datetime | None: ...


@dataclass(frozen=True, slots=True)
class DocFilter:
    folder: str = ""  # vault-relative, no slash at either end; "" is the whole vault
    tags: tuple[str, ...] = ()  # lower case, without "#"
    note_type: str = ""  # compared case-insensitively; "" is any
    modified_after_ns: int | None = None

    @classmethod
    def of(
        cls,
        *,
        folder: str | None = None,
        tags: Iterable[str] | None = None,
        note_type: str | None = None,
        modified_after: datetime | None = None,
    ) -> DocFilter:
        return cls(
            folder=(folder or "").strip().strip("/"),
            tags=tuple(t.strip().lstrip("#").lower() for t in tags or () if t.strip("# ")),
            note_type=(note_type or "").strip(),
            modified_after_ns=(
                int(modified_after.timestamp() * 1e9) if modified_after is not None else None
            ),
        )

    @classmethod
    def of_options(cls, opts: Filtered) -> DocFilter:
        return cls.of(
            folder=opts.folder,
            tags=opts.tags,
            note_type=opts.note_type,
            modified_after=opts.modified_after,
        )

    def sql(self) -> tuple[str, dict[str, object]]:
        """A condition over ``documents d`` (empty: no filter) and its bound values."""
        parts: list[str] = []
        params: dict[str, object] = {}
        if self.folder:
            parts.append("d.path LIKE %(f_folder)s ESCAPE '\\'")
            escaped = self.folder.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            params["f_folder"] = escaped + "/%"
        if self.tags:
            parts.append(
                "EXISTS (SELECT 1 FROM unnest(d.tags) AS t(tag),"
                " unnest(%(f_tags)s::text[]) AS q(tag)"
                " WHERE lower(t.tag) = q.tag OR starts_with(lower(t.tag), q.tag || '/'))"
            )
            params["f_tags"] = list(self.tags)
        if self.note_type:
            parts.append("lower(d.note_type) = lower(%(f_type)s)")
            params["f_type"] = self.note_type
        if self.modified_after_ns is not None:
            parts.append("d.mtime_ns >= %(f_mtime)s")
            params["f_mtime"] = self.modified_after_ns
        return " AND ".join(parts), params

    def accepts_file(self, path: str, mtime_ns: int) -> bool:
        """What can be told before the note is read: its folder and modification time."""
        if self.folder and not path.startswith(self.folder + "/"):
            return False
        return self.modified_after_ns is None or mtime_ns >= self.modified_after_ns

    def accepts_note(self, note_type: str | None, tags: Iterable[str]) -> bool:
        """What needs the parsed note: its type and tags."""
        if self.note_type and (note_type or "").lower() != self.note_type.lower():
            return False
        if not self.tags:
            return True
        have = [t.lower() for t in tags]
        return any(h == w or h.startswith(w + "/") for h in have for w in self.tags)
