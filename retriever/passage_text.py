"""Passage text as the database keeps it (``passages.ztext``, migration 0009): the UTF-8
bytes under raw DEFLATE (no zlib header or checksum: the row's hash already names the text).

PostgreSQL compresses a value only once its row passes about 2 kB, and most passages are
shorter (win32-17k: median 582 bytes), so it stored them as written: 58 MiB for 87,000
passages. DEFLATE at level 6 keeps them in 28 MiB; packing them all takes about 1.7 s of
one core, unpacking 0.35 s, and a search unpacks only the few passages it returns.
"""

from __future__ import annotations

import zlib

LEVEL = 6  # level 1 saves 2 MiB less on win32-17k for 0.4 s less CPU
_RAW = -15  # raw DEFLATE, 32 kB window


def pack(text: str) -> bytes:
    """``text`` as stored."""
    packer = zlib.compressobj(LEVEL, zlib.DEFLATED, _RAW)
    return packer.compress(text.encode("utf-8")) + packer.flush()


def unpack(blob: bytes | bytearray | memoryview) -> str:
    """The text of a stored ``ztext`` value."""
    return zlib.decompress(blob, _RAW).decode("utf-8")
