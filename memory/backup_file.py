"""Reading an export file for ``ownsona import``: its header, a whole-file check, batches.

The file is checked whole before anything is written (:func:`check_file`), so a truncated
or edited file is refused naming its line, and nothing is imported.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from .backup_format import Header, MemoryRecord, invalid_line, parse_header, parse_record
from .errors import invalid

__all__ = ["batches", "check_file", "read_header"]


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of every line after the header; bytes decoded per line."""
    with path.open("rb") as f:
        f.readline()
        for line_no, raw in enumerate(f, start=2):
            try:
                yield line_no, raw.decode("utf-8")
            except UnicodeDecodeError:
                raise invalid_line(line_no, "not valid UTF-8") from None


def read_header(path: Path) -> Header:
    with path.open("rb") as f:
        first = f.readline()
    if not first.strip():
        raise invalid_line(1, "the file is empty; expected an OwnSona export header")
    try:
        return parse_header(first.decode("utf-8"))
    except UnicodeDecodeError:
        raise invalid_line(1, "not valid UTF-8") from None


def check_file(path: Path) -> Header:
    """Read the whole file once and refuse it, naming the line, unless every line is sound."""
    header = read_header(path)
    known = {u.username for u in header.users}
    seen: set[int] = set()
    memories: Counter[str] = Counter()
    relations: Counter[str] = Counter()
    last_line = 1
    for line_no, line in _lines(path):
        last_line = line_no
        if not line.strip():
            raise invalid_line(line_no, "empty line")
        record = parse_record(line_no, line, version=header.version)
        if record.user not in known:
            raise invalid_line(line_no, f"user {record.user!r} is not listed in the header")
        if record.memory.id in seen:
            raise invalid_line(line_no, f"memory id {record.memory.id} appears twice in the file")
        if record.memory.id > header.max_memory_id:
            raise invalid_line(
                line_no, f"memory id {record.memory.id} is above the header's max_memory_id"
            )
        seen.add(record.memory.id)
        memories[record.user] += 1
        relations[record.user] += len(record.relations)
    for user in header.users:
        if memories[user.username] != user.memories or relations[user.username] != user.relations:
            raise invalid(
                f"The file holds {memories[user.username]} memories and "
                f"{relations[user.username]} relations of {user.username!r} but its header "
                f"says {user.memories} and {user.relations}: it is truncated or was edited "
                f"(last line {last_line}). Nothing was imported.",
                line=last_line,
            )
    return header


def batches(path: Path, size: int, version: int) -> Iterator[list[MemoryRecord]]:
    batch: list[MemoryRecord] = []
    for line_no, line in _lines(path):
        batch.append(parse_record(line_no, line, version=version))
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch
