"""Several simulated nights as one property's logs: the simulator starts every night's streams
at seq 1, so each night's seq numbers are moved on from where the nights before left each
stream (one table's stream across the days, as a real table system writes it). The work is
auditor.simulate.history's, which `simulate --days` and `--continue` use."""

from __future__ import annotations

from pathlib import Path

from auditor.simulate import history
from auditor.simulate.history import seq_tops

__all__ = ["continue_streams", "seq_tops"]


def continue_streams(folder: Path, tops: dict[str, int]) -> None:
    """Renumber the seq of every *.jsonl in `folder` so that each stream goes on from
    `tops` (stream -> last seq so far), and update `tops`."""
    history.continue_streams(sorted(folder.glob("*.jsonl")), tops)
