"""Published card counts for the Dragon 7 and Panda 8 side wagers, as data
(rules/surveillance/side_bet_counts.toml, each with its citation; docs/side-bets.md).

The file lives in a folder of its own under rules/: the rule-pack loader reads rules/*.toml
only, so it is never taken for a pack, and the wheel carries it with the packs
(auditor/_shipped/rules/surveillance/).
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType

from auditor.rules.cards import RANKS, parse_card
from auditor.shipped import shipped

COUNTS_FILE = "surveillance/side_bet_counts.toml"
# The ranks the file's tags are given for, in its order: A to 9, then ten (and faces).
_TAG_RANKS = "A23456789T"


class CountsError(ValueError):
    """The counts file is missing a key or holds a value it cannot (names the file)."""


@dataclass(frozen=True)
class SideBetCount:
    """One published count: the side bet it is for, its name, its tag per rank (A..K) and
    where it was published. `bet_at_true_count` is the source's betting point, if it gives
    one (shown, not used by the check)."""

    bet: str
    name: str
    tags: Mapping[str, int]
    citation: str
    bet_at_true_count: float | None = None

    def tag(self, card: str) -> int:
        """The tag of a card as the log writes it ("7h", "Ts", "10S")."""
        return self.tags[parse_card(card).rank]

    def evidence(self) -> dict[str, object]:
        """What a finding shows of the count: its name, citation and betting point."""
        return {"name": self.name, "citation": self.citation,
                "bet_at_true_count": self.bet_at_true_count}


def counts_path() -> Path:
    return shipped("rules") / COUNTS_FILE


@lru_cache(maxsize=4)
def _load(path: Path) -> tuple[SideBetCount, ...]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise CountsError(f"{path}: cannot be read as TOML: {exc}") from None
    out = []
    for key, entry in sorted((data.get("counts") or {}).items()):
        try:
            tags = [int(t) for t in entry["tags"]]
            bet, name, citation = str(entry["bet"]), str(entry["name"]), str(entry["citation"])
        except (KeyError, TypeError, ValueError) as exc:
            raise CountsError(f"{path}: counts.{key} lacks bet, name, tags or citation "
                              f"({exc})") from None
        if len(tags) != len(_TAG_RANKS):
            raise CountsError(f"{path}: counts.{key}.tags must give {len(_TAG_RANKS)} tags "
                              "(A 2 3 4 5 6 7 8 9 10)")
        by_rank = dict(zip(_TAG_RANKS, tags, strict=True))
        by_rank |= {r: by_rank["T"] for r in RANKS if r not in by_rank}  # J Q K as the ten
        point = entry.get("bet_at_true_count")
        out.append(SideBetCount(bet, name, MappingProxyType(by_rank), citation,
                                None if point is None else float(point)))
    return tuple(out)


def load_counts(path: Path | str | None = None) -> dict[str, SideBetCount]:
    """The published counts by the side bet they are for (`dragon7`, `panda8`)."""
    return {c.bet: c for c in _load(Path(path) if path is not None else counts_path())}
