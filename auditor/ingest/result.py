"""What ingest tells of a file and of a run: the result types, their summary, and the exit rule
of the `ingest` command."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from auditor.ingest.paths import escape_path
from auditor.store import outcome


@dataclass
class FileResult:
    """What happened to one file; `status` is ingested, already_ingested, refused_altered,
    unreadable, empty, or waiting (its only line has no newline yet: nothing to load)."""

    path: Path
    status: str
    sha256: str = ""
    size: int = 0
    lines: int = 0
    events: int = 0
    quarantined: int = 0
    duplicates: int = 0
    message: str = ""
    per_stream: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # one sentence per quarantined line
    # One sentence per stream whose events in this piece are stamped ahead of its delivery
    # (log.future_stamp: loaded, and reported).
    ahead: list[str] = field(default_factory=list)
    # The piece of the file loaded, bytes and lines counted from the file's start (`lines`
    # counts the piece's). Already ingested: end_byte and last_line of the last piece loaded
    # before, and first_line the line a next piece would start at.
    source_id: int | None = None
    file_id: int | None = None  # the file, whatever its name (source_files.id)
    start_byte: int = 0
    end_byte: int = 0
    first_line: int = 1
    last_line: int = 0
    waiting: int = 0  # bytes of a last line without its newline, left for later
    # The running SHA-256 of the file's first end_byte bytes, for a follower to extend.
    prefix_hash: Any = field(default=None, repr=False, compare=False)

    def summary(self) -> dict[str, Any]:
        """What `ingest --json` (and the run's record) says of the file."""
        return {
            "path": escape_path(self.path),
            "status": self.status,
            "sha256": self.sha256,
            "lines": self.lines,
            "events": self.events,
            "quarantined": self.quarantined,
            "duplicates": self.duplicates,
            "message": self.message,
            "problems": self.problems,
            "stamped_ahead": self.ahead,
        }


@dataclass
class IngestResult:
    """What one `ingest` did: a result per file, and the paths that gave no file."""

    run_id: int
    files: list[FileResult]
    errors: list[str] = field(default_factory=list)  # paths that gave no file

    def count(self, status: str) -> int:
        return sum(1 for f in self.files if f.status == status)

    @property
    def events(self) -> int:
        return sum(f.events for f in self.files)

    @property
    def quarantined(self) -> int:
        return sum(f.quarantined for f in self.files)

    def exit_code(self) -> int:
        """The command's exit under the one rule (store/outcome.py): a path that gave no file,
        an unreadable or empty file is the input's fault; a quarantined line, a refused file
        or a stream stamped ahead of its delivery (log.future_stamp, major) is a finding."""
        return outcome.exit_code(
            problems=len(self.errors),
            files=(f.status for f in self.files),
            quarantined=self.quarantined,
            failing=sum(len(f.ahead) for f in self.files),
        )

    def per_stream(self) -> Counter[str]:
        """Events loaded per stream, over every file."""
        per_stream: Counter[str] = Counter()
        for f in self.files:
            per_stream.update(f.per_stream)
        return per_stream

    def summary(self) -> dict[str, Any]:
        """What `ingest --json` prints and the run's record keeps."""
        return {
            "run_id": self.run_id,
            "files": [f.summary() for f in self.files],
            "errors": self.errors,
            "events": self.events,
            "quarantined": self.quarantined,
            "streams": dict(sorted(self.per_stream().items())),
            "exit_code": self.exit_code(),
        }

