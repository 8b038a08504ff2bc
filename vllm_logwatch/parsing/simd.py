"""StringZilla's SIMD `find` and `count`, typed: what the block readers (live and offline) search with.

Nothing else is imported here, so `logwatch parse --csv` gets them without the parser's imports.
"""

from __future__ import annotations

from collections.abc import Callable

import stringzilla

simd_find: Callable[[bytes | bytearray, bytes, int, int], int] = stringzilla.find
"""`text.find(sub, start, end)`, the same answer from StringZilla's SIMD search: about 3x faster than
`bytes.find` on logs, whose letters defeat CPython's skip table."""
simd_count: Callable[[bytes | bytearray, bytes, int, int], int] = stringzilla.count
"""`text.count(sub, start, end)`, the same answer from StringZilla: about 1.4x faster than `bytes.count`
for newlines (CPython counts one byte at a time)."""
