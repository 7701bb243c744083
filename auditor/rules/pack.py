"""Rule packs: the rules of one jurisdiction x game as cited data, loaded and checked in full
(the checks themselves are in schema.py), and looked up once per table's pack (PackCache).

An audit is only as good as the rules it replays, so a pack that is broken, ambiguous, or that
states a house practice without saying so must stop the run with a sentence naming the file
and the key, never audit "all good" against half a rulebook.
"""

from __future__ import annotations

import hashlib
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from auditor.rules.cards import RANKS, rank_value
from auditor.rules.codes import REGISTRY
from auditor.shipped import shipped

RULES_ENV = "BACC_AUDIT_RULES"
DRAW, STAND = "draw", "stand"
# A cell where the hand may draw or stay as it chooses: the chemin de fer tableau has them
# (the Dominant Player on 5, the Banker on a few cells); the banking games have none.
OPTION = "option"
CHEMIN = "chemin_de_fer"


class RulePackError(ValueError):
    """A rule pack that cannot be trusted; the message is one sentence naming file and key."""

    def __init__(self, path: Path | str, key: str | None, problem: str) -> None:
        self.path = str(path)
        self.key = key
        where = f"{self.path}: {key}" if key else self.path
        super().__init__(f"{where} {problem}")


# --- Loaded pack -------------------------------------------------------------------------


@dataclass(frozen=True)
class Cited:
    """One rule value with its provenance, so reports can say where every number comes from."""

    key: str
    value: Any
    citation: str | None = None
    house_option: bool = False
    verified: bool = True
    source: str | None = None
    note: str | None = None
    authorised_by: str | None = None
    choices: tuple[Any, ...] | None = None
    variants: tuple[str, ...] | None = None

    @property
    def provenance(self) -> str:
        if self.house_option:
            base = "house option (default)"
            return f"{base}; offered under {self.authorised_by}" if self.authorised_by else base
        text = self.citation or ""
        return text if self.verified else f"{text} (unverified: {self.source or 'assumed'})"


@dataclass(frozen=True)
class DrawTables:
    """The third-card rules as flat tuples, so the hot paths index instead of branching.

    `banker` is indexed by banker_count * 11 + player_third_value, with column 10 standing
    for "the Player's hand stood"; rows 8 and 9 (naturals) always stand.

    `player` and `banker` say where drawing is mandatory. `player_option` and `banker_option`
    (same layout; empty in a pack without option cells) mark the cells a chemin de fer hand
    may play either way, so the mandatory tables read False there and the code that only
    knows mandatory draws (odds, punto banco replay) never mistakes an option for a draw.
    """

    natural: tuple[bool, ...]
    player: tuple[bool, ...]
    banker: tuple[bool, ...]
    player_option: tuple[bool, ...] = ()
    banker_option: tuple[bool, ...] = ()

    def banker_row(self, banker_count: int) -> tuple[bool, ...]:
        return self.banker[banker_count * 11 : banker_count * 11 + 10]


@dataclass(frozen=True)
class BankerException:
    """A Banker win paid other than the variant's Banker odds (e.g. dragon 7 push)."""

    name: str
    count: int
    cards: int | None  # None: any number of cards
    pays: Fraction | None  # None: push
    cited: Cited

    def applies(self, banker_count: int, banker_cards: int) -> bool:
        return banker_count == self.count and (self.cards is None or self.cards == banker_cards)


@dataclass(frozen=True)
class Variant:
    name: str
    title: str
    verified: bool
    payouts: Mapping[str, Cited]  # player, banker, tie -> Fraction winnings per unit
    vig_charged: Cited
    vig_rate: Cited | None  # Decimal
    vig_rounding: Cited | None
    vig_modes: Cited | None
    banker_exceptions: tuple[BankerException, ...]

    @property
    def vigorish_rate(self) -> Fraction:
        if not self.vig_charged.value or self.vig_rate is None:
            return Fraction(0)
        return Fraction(self.vig_rate.value)

    def pays(self, wager: str) -> Fraction:
        return self.payouts[wager].value


@dataclass(frozen=True)
class SideBet:
    name: str
    title: str
    pays: Cited  # Fraction
    variants: tuple[str, ...] | None


@dataclass(frozen=True)
class PackRef:
    jurisdiction: str
    game: str
    path: Path


@dataclass(frozen=True)
class RulePack:
    id: str
    version: str
    jurisdiction: str
    game: str
    title: str
    path: Path
    sha256: str
    sources: tuple[str, ...]
    draw: DrawTables
    deal_order: tuple[str, ...]
    min_decks: int
    shuffler_min_decks: int | None
    procedures: tuple[int, ...]
    notice_minutes: int | None
    announcements: Mapping[str, Cited]
    variants: Mapping[str, Variant]
    side_bets: Mapping[str, SideBet]
    entries: Mapping[str, Cited]  # every rule value by dotted key, for reports
    # The provision each code this pack can raise rests on ([citations]).
    citations: Mapping[str, str]

    def cited(self, key: str) -> Cited:
        return self.entries[key]

    def value(self, key: str, default: Any = None) -> Any:
        entry = self.entries.get(key)
        return default if entry is None else entry.value

    def variant(self, name: str) -> Variant:
        try:
            return self.variants[name]
        except KeyError:
            known = ", ".join(sorted(self.variants))
            raise KeyError(f"{self.id} has no variant {name!r} (it has: {known})") from None

    def can_raise(self, code: str) -> bool:
        return can_raise_code(self.game, self.entries, code)

    def cite(self, code: str) -> str:
        """The provision a finding of `code` at this pack's table cites. The loader makes
        every pack cite every code it can raise; a code raised all the same (a check that
        knows more than the code's `needs`) says so rather than cite another jurisdiction."""
        text = self.citations.get(code)
        if text is not None:
            return text
        return f"{REGISTRY[code].rule} (rule pack {self.id} cites no provision for {code})"

    @property
    def label(self) -> str:
        """What a report prints: id, version and the first 12 hex digits of the content hash."""
        return f"{self.id} {self.version} (sha256 {self.sha256[:12]})"


def _has(entries: Mapping[str, Cited], key: str) -> bool:
    """Whether a pack states a rule at `key` (or under it) that is not off: false, 0 or an
    empty list mean the rule is not there."""
    entry = entries.get(key)
    if entry is not None:
        return bool(entry.value)
    return any(k.startswith(key + ".") for k in entries)


def can_raise_code(game: str, entries: Mapping[str, Cited], code: str) -> bool:
    """Whether a check can raise `code` at a table of a pack: its game is one of the code's,
    and the pack has every rule the code needs."""
    c = REGISTRY[code]
    return game in c.games and all(_has(entries, key) for key in c.needs)


# --- Locating packs ----------------------------------------------------------------------


def default_rules_dir() -> Path:
    """`BACC_AUDIT_RULES`, else the packs shipped with the tool (the repository's `rules/`)."""
    env = os.environ.get(RULES_ENV)
    if env:
        return Path(env).expanduser()
    return shipped("rules")


def pack_filename(jurisdiction: str, game: str) -> str:
    return f"{jurisdiction.lower()}-{game}.toml"


def list_packs(rules_dir: Path | str | None = None) -> tuple[PackRef, ...]:
    """Packs present by file name (`nj-mini_baccarat.toml`), without loading them."""
    folder = _rules_dir(rules_dir)
    refs = []
    for path in sorted(folder.glob("*.toml")):
        jurisdiction, sep, game = path.stem.partition("-")
        if sep and jurisdiction and game:
            refs.append(PackRef(jurisdiction.upper(), game, path))
    return tuple(refs)


def citations(rules_dir: Path | str | None = None) -> list[tuple[str, Mapping[str, str]]]:
    """(pack id, {code: provision}) of every pack in `rules_dir`, for docs/codes.md and
    `bacc-audit codes`."""
    packs = [load_pack_file(ref.path) for ref in list_packs(rules_dir)]
    return [(p.id, p.citations) for p in packs]


def load_pack(jurisdiction: str, game: str, rules_dir: Path | str | None = None) -> RulePack:
    folder = _rules_dir(rules_dir)
    # Found among the packs there, never a path made of the names given (a name too long
    # for the system, `../`): those are simply no pack.
    wanted = pack_filename(jurisdiction, game)
    refs = list_packs(folder)
    path = next((r.path for r in refs if r.path.name == wanted), None)
    if path is None:
        have = ", ".join(f"{r.jurisdiction} {r.game}" for r in refs) or "none"
        raise RulePackError(
            folder / wanted,
            None,
            f"does not exist: there is no rule pack for {jurisdiction} {game} "
            f"(packs in {folder}: {have}).",
        )
    return load_pack_file(path)


# Packs already parsed and checked, by (path, SHA-256 of the bytes read): parsing and checking
# a pack costs ~14 ms of CPU, paid by every audit, report, live poll and simulated table that
# looked one up. The bytes are read and hashed every time, so a pack edited on disk is parsed
# afresh at once; a RulePack is frozen, so sharing one is safe. Bounded for a long `watch`
# over packs edited many times; a broken pack is not kept (its error is raised each time).
_CHECKED: dict[tuple[str, str], RulePack] = {}
_CHECKED_MAX = 64


def load_pack_file(path: Path | str) -> RulePack:
    # schema.py builds this module's values, so it is imported here rather than at the top.
    from auditor.rules.schema import check

    path = Path(path)
    raw = path.read_bytes()
    key = (str(path), hashlib.sha256(raw).hexdigest())
    pack = _CHECKED.get(key)
    if pack is not None:
        return pack
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise RulePackError(path, None, f"is not valid TOML: {exc}.") from None
    pack = check(path, data, key[1])
    if len(_CHECKED) >= _CHECKED_MAX:
        _CHECKED.pop(next(iter(_CHECKED)))  # the oldest
    _CHECKED[key] = pack
    return pack


def _rules_dir(rules_dir: Path | str | None) -> Path:
    folder = Path(rules_dir) if rules_dir is not None else default_rules_dir()
    if not folder.is_dir():
        raise RulePackError(
            folder, None, f"is not a directory of rule packs; pass rules_dir or set {RULES_ENV}."
        )
    return folder



# --- Packs by table ----------------------------------------------------------------------

# What loading a table's pack can raise when the pack cannot be used: broken or absent
# (RulePackError), gone between the look and the read, or a value of a type the checks did
# not foresee. The audit, the report and the board all treat these alike: no usable pack.
LOAD_ERRORS = (RulePackError, FileNotFoundError, KeyError, TypeError, ValueError)
# Days of table video the house keeps where no pack says (surveillance.video_retention_days).
DEFAULT_VIDEO_RETENTION_DAYS = 7


class PackCache:
    """Rule packs by (jurisdiction, game), each loaded at most once: the pack, or the error
    that kept it from loading, is remembered. One belongs to one audit, report or board, so
    a pack edited on disk is read afresh by the next."""

    def __init__(self, given: Mapping[tuple[str, str], RulePack] | None = None) -> None:
        # `given`: packs to use instead of the files (tests that vary the house options).
        self._found: dict[tuple[str, str], RulePack | Exception] = dict(given or {})

    def lookup(self, jurisdiction: str, game: str) -> RulePack | Exception:
        """The pack, or the error loading it raised (its message names the file and why)."""
        key = (jurisdiction, game)
        if key not in self._found:
            try:
                self._found[key] = load_pack(jurisdiction, game)
            except LOAD_ERRORS as e:
                self._found[key] = e
        return self._found[key]

    def get(self, jurisdiction: str | None, game: str | None) -> RulePack | None:
        """The pack; None when no table_open named one, or it cannot be used."""
        if jurisdiction is None or game is None:
            return None
        found = self.lookup(jurisdiction, game)
        return found if isinstance(found, RulePack) else None

    def unusable(self) -> list[str]:
        """`JURISDICTION game` of each pack looked up that could not be used, sorted."""
        return sorted(f"{j} {g}" for (j, g), found in self._found.items()
                      if isinstance(found, Exception))


def video_retention_days(pack: RulePack | None) -> int:
    """How long the house keeps table video, in days: the pack's house option, else
    DEFAULT_VIDEO_RETENTION_DAYS. A finding's video must be pulled within it."""
    if pack is None:
        return DEFAULT_VIDEO_RETENTION_DAYS
    return int(pack.value("surveillance.video_retention_days", DEFAULT_VIDEO_RETENTION_DAYS))


def card_values(pack: RulePack | None) -> Mapping[str, int]:
    """The point value of each rank: the pack's cards.values, else the engine's own."""
    return pack.value("cards.values") if pack else {r: rank_value(r) for r in RANKS}

# --- Parsing helpers ---------------------------------------------------------------------


def parse_odds(text: str) -> Fraction:
    """'40:1' -> 40, '3:2' -> 3/2, '1:2' -> 1/2: winnings per unit staked."""
    win, sep, stake = text.partition(":")
    if not sep or not win.strip().isdigit() or not stake.strip().isdigit() or int(stake) == 0:
        raise ValueError(text)
    return Fraction(int(win), int(stake))


def odds_text(odds: Fraction) -> str:
    return f"{odds.numerator}:{odds.denominator}"
