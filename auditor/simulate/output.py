"""What a simulation leaves in its folder: the folder made ready (new, empty, or cleared of a
previous simulation's files), the ground truth written beside the logs, and the result both
simulators return."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

# What a simulation writes into its folder, and all that `replace` may remove there
# (`*.jsonl.later`: files to deliver after the night's audit, auditor.simulate.lies).
OUTPUT_PATTERNS = ("*.jsonl", "*.jsonl.gz", "*.jsonl.later", "ground_truth.ndjson")


@dataclass
class SimulationResult:
    files: list[Path]  # the event logs (one per table, the pits' notices, then files resent)
    ground_truth: Path
    tables: int
    rounds: int
    events: int
    deviations: list[dict]  # as in ground_truth.ndjson
    seconds: float = 0.0
    # Files to deliver after the others have been ingested and audited (the lies of
    # auditor.simulate.lies): the ground truth is what the audit after them stands on.
    later: list[Path] = field(default_factory=list)
    # The patterns asked for and not planted, or planted below what the audit detects at
    # this size: ground truth lines without a `code` (auditor.simulate.power), said on stderr.
    not_planted: list[dict] = field(default_factory=list)

    @property
    def rounds_per_second(self) -> float:
        return self.rounds / self.seconds if self.seconds else 0.0


def prepare_out_dir(out: Path, replace: bool = False) -> list[Path]:
    """Make `out` ready for a simulation: a new or empty folder, else refused (ValueError),
    because logs of two nights side by side would be ingested as one and the ground truth
    would describe only the newer. With `replace`, first remove what a simulation writes
    there (OUTPUT_PATTERNS, not in subfolders) and keep everything else; returns what went."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out} is a file; --out takes a folder to write the logs into")
    if not out.is_dir():
        return []
    if not replace:
        if any(out.iterdir()):
            raise ValueError(
                f"{out} is not empty: simulated logs would mix with what is there; choose an "
                "empty or new folder, or add --replace to remove the logs and ground truth "
                "already there (other files are kept)"
            )
        return []
    removed = sorted(
        {p for pattern in OUTPUT_PATTERNS for p in out.glob(pattern)
         if p.is_file() or p.is_symlink()}
    )
    for p in removed:
        p.unlink()
    return removed


def write_ground_truth(out: Path, deviations: list[dict]) -> Path:
    """ground_truth.ndjson: one line per finding the planted deviations must raise (and one
    per pattern asked for and not planted, with `not_planted` in place of `code`), JSON Lines
    under another suffix, so that `bacc-audit ingest DIR` takes only the logs."""
    truth = out / "ground_truth.ndjson"
    truth.write_text("".join(json.dumps(d, separators=(",", ":")) + "\n" for d in deviations))
    return truth
