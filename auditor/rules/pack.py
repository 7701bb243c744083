"""Rule packs: the rules of one jurisdiction x game as cited data, loaded and checked in full.

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
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from pathlib import Path
from types import MappingProxyType
from typing import Any

from auditor.rules.cards import RANKS, rank_value
from auditor.rules.codes import ALL_GAMES, REGISTRY
from auditor.shipped import shipped

PACK_FORMAT = 1
RULES_ENV = "BACC_AUDIT_RULES"
KNOWN_GAMES = ALL_GAMES
# Side wagers the engine knows how to settle; a pack may offer any subset.
KNOWN_SIDE_BETS = ("dragon7", "panda8", "total_cards_4", "total_cards_5", "total_cards_6")
# Announcement kinds (event log v1 `announce.kind`) and when each is due.
ANNOUNCE_KINDS = ("result", "tie_hand", "total_cards", "dragon_7", "panda_8")
ANNOUNCE_WHEN = ("always", "tie", "total_card_wagers_offered", "dragon7_hand", "panda8_hand")
VIG_ROUNDING = ("exact_cents", "down_to_cent", "up_to_cent")
VIG_MODES = ("collect", "mark")
DRAW, STAND = "draw", "stand"
# A cell where the hand may draw or stay as it chooses: the chemin de fer tableau has them
# (the Dominant Player on 5, the Banker on a few cells); the banking games have none.
OPTION = "option"
CHEMIN = "chemin_de_fer"

_CITED_KEYS = frozenset({"value", "citation", "verified", "source", "note", "variants"})
_HOUSE_KEYS = frozenset(
    {"house_option", "default", "note", "choices", "authorised_by", "source", "variants"}
)
_LEAF_MARKERS = ("value", "citation", "house_option", "default")
_DESCRIPTIVE_KEYS = frozenset({"title", "note", "description"})
_PACK_KEYS = frozenset(
    {"format", "id", "version", "jurisdiction", "game", "title", "description", "sources"}
)


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
        return _can_raise(self.game, self.entries, code)

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


def _can_raise(game: str, entries: Mapping[str, Cited], code: str) -> bool:
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
    path = folder / pack_filename(jurisdiction, game)
    if not path.is_file():
        have = ", ".join(f"{r.jurisdiction} {r.game}" for r in list_packs(folder)) or "none"
        raise RulePackError(
            path,
            None,
            f"does not exist: there is no rule pack for {jurisdiction} {game} "
            f"(packs in {folder}: {have}).",
        )
    return load_pack_file(path)


def load_pack_file(path: Path | str) -> RulePack:
    path = Path(path)
    raw = path.read_bytes()
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise RulePackError(path, None, f"is not valid TOML: {exc}.") from None
    return _Loader(path, data, hashlib.sha256(raw).hexdigest()).load()


def _rules_dir(rules_dir: Path | str | None) -> Path:
    folder = Path(rules_dir) if rules_dir is not None else default_rules_dir()
    if not folder.is_dir():
        raise RulePackError(
            folder, None, f"is not a directory of rule packs; pass rules_dir or set {RULES_ENV}."
        )
    return folder


# --- Parsing helpers ---------------------------------------------------------------------


def _freeze(value: Any) -> Any:
    """TOML arrays and tables as tuples and read-only mappings: a loaded pack cannot change."""
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return MappingProxyType({k: _freeze(v) for k, v in value.items()})
    return value


def parse_odds(text: str) -> Fraction:
    """'40:1' -> 40, '3:2' -> 3/2, '1:2' -> 1/2: winnings per unit staked."""
    win, sep, stake = text.partition(":")
    if not sep or not win.strip().isdigit() or not stake.strip().isdigit() or int(stake) == 0:
        raise ValueError(text)
    return Fraction(int(win), int(stake))


def odds_text(odds: Fraction) -> str:
    return f"{odds.numerator}:{odds.denominator}"


class _Loader:
    """Checks one parsed pack and builds the frozen RulePack; every failure is a RulePackError."""

    def __init__(self, path: Path, data: dict[str, Any], sha256: str) -> None:
        self.path = path
        self.data = data
        self.sha256 = sha256
        self.entries: dict[str, Cited] = {}
        self.game = ""

    def fail(self, key: str | None, problem: str) -> RulePackError:
        return RulePackError(self.path, key, problem)

    # The order matters only for which error a doubly broken pack reports first.
    def load(self) -> RulePack:
        header = self._header()
        self.game = header["game"]
        self._walk(self.data, "")
        variants = self._variants()
        names = set(variants)
        for key, entry in self.entries.items():
            for name in entry.variants or ():
                if name not in names:
                    raise self.fail(
                        f"{key}.variants",
                        f"names unknown variant {name!r}; the pack defines: "
                        f"{', '.join(sorted(names))}.",
                    )
        self._cards()
        draw = self._draw()
        if self.game == CHEMIN:
            self._commission()
        shuffler = self.entries.get("shoe.automated_shuffler.min_decks")
        if shuffler is None and self._has_section("shoe.automated_shuffler"):
            raise self.fail("shoe.automated_shuffler.min_decks", "is missing.")
        citations = self._citations()
        return RulePack(
            id=header["id"],
            version=header["version"],
            jurisdiction=header["jurisdiction"],
            game=header["game"],
            title=header["title"],
            path=self.path,
            sha256=self.sha256,
            sources=tuple(header.get("sources", ())),
            draw=draw,
            deal_order=self._deal_order(),
            min_decks=self._int("shoe.min_decks", minimum=1),
            shuffler_min_decks=None if shuffler is None else self._int(shuffler.key, minimum=2),
            procedures=self._procedures(),
            notice_minutes=self._optional_int("procedures.notice_minutes"),
            announcements=MappingProxyType(self._announcements()),
            variants=MappingProxyType(variants),
            side_bets=MappingProxyType(self._side_bets()),
            entries=MappingProxyType(dict(sorted(self.entries.items()))),
            citations=MappingProxyType(citations),
        )

    # -- header and the citation discipline --

    def _header(self) -> dict[str, Any]:
        pack = self.data.get("pack")
        if not isinstance(pack, dict):
            raise self.fail("pack", "is missing; a pack starts with a [pack] table.")
        for key in pack:
            if key not in _PACK_KEYS:
                raise self.fail(f"pack.{key}", "is not a pack header key.")
        for key in ("id", "version", "jurisdiction", "game", "title"):
            if not isinstance(pack.get(key), str) or not pack[key].strip():
                raise self.fail(f"pack.{key}", "is missing or empty.")
        if pack.get("format") != PACK_FORMAT:
            raise self.fail("pack.format", f"must be {PACK_FORMAT}.")
        sources = pack.get("sources", [])
        if not isinstance(sources, list) or not all(isinstance(s, str) for s in sources):
            raise self.fail("pack.sources", "must be a list of strings.")
        if pack["game"] not in KNOWN_GAMES:
            raise self.fail(
                "pack.game", f"is {pack['game']!r}; known games: {', '.join(KNOWN_GAMES)}."
            )
        expected = pack_filename(pack["jurisdiction"], pack["game"])
        if self.path.name != expected:
            raise self.fail(
                "pack.jurisdiction", f"and pack.game say this pack belongs in {expected}."
            )
        return pack

    def _citations(self) -> dict[str, str]:
        """[citations]: code = "provision". Exactly the codes this pack can raise (see
        Code.games and Code.needs), so no finding at its tables cites another jurisdiction's
        text and no citation sits unused."""
        table = self.data.get("citations")
        if not isinstance(table, dict):
            raise self.fail(
                "citations", "is missing; a pack cites a provision for every code it can raise."
            )
        for code, text in table.items():
            if code not in REGISTRY:
                raise self.fail(f"citations.{code}", "is not a finding code (bacc-audit codes).")
            if not isinstance(text, str) or not text.strip():
                raise self.fail(f"citations.{code}", "must be a provision, as text.")
        raisable = [c for c in REGISTRY if _can_raise(self.game, self.entries, c)]
        missing = [code for code in raisable if code not in table]
        if missing:
            raise self.fail(
                "citations",
                f"has no provision for {', '.join(missing)}, which this pack can raise.",
            )
        extra = sorted(set(table) - set(raisable))
        if extra:
            c = REGISTRY[extra[0]]
            if not c.games:
                why = "the event log format defines it, not a rule pack"
            elif self.game not in c.games:
                why = f"only {' and '.join(c.games)} tables raise it"
            else:
                why = f"it is raised only where the pack states {' and '.join(c.needs)}"
            raise self.fail(
                f"citations.{extra[0]}", f"cannot be raised at this pack's tables: {why}."
            )
        return {code: table[code].strip() for code in raisable}

    def _walk(self, node: Mapping[str, Any], prefix: str) -> None:
        """Every value outside [pack] must be a cited value or a marked house option."""
        for name, item in node.items():
            key = f"{prefix}.{name}" if prefix else name
            if key in ("pack", "citations"):
                continue
            if isinstance(item, dict):
                if any(marker in item for marker in _LEAF_MARKERS):
                    self.entries[key] = self._leaf(key, item)
                else:
                    self._walk(item, key)
            elif prefix and name in _DESCRIPTIVE_KEYS and isinstance(item, str):
                continue
            elif name == "verified" and prefix.startswith("variants.") and prefix.count(".") == 1:
                if not isinstance(item, bool):
                    raise self.fail(key, "must be true or false.")
            else:
                raise self.fail(key, "has no citation and is not marked house_option = true.")

    def _leaf(self, key: str, item: dict[str, Any]) -> Cited:
        if "house_option" in item:
            if item["house_option"] is not True:
                raise self.fail(f"{key}.house_option", "must be true when present.")
            extra = sorted(set(item) - _HOUSE_KEYS)
            if "citation" in extra or "value" in extra:
                raise self.fail(
                    key,
                    "is marked house_option = true but also has a citation or "
                    "value; a rule is either law or a house option.",
                )
            if extra:
                raise self.fail(key, f"has unknown key {extra[0]!r}.")
            if "default" not in item:
                raise self.fail(key, "is marked house_option = true but has no default.")
            choices = item.get("choices")
            if choices is not None and item["default"] not in choices:
                raise self.fail(f"{key}.default", "is not one of its choices.")
            return Cited(
                key=key,
                value=_freeze(item["default"]),
                house_option=True,
                note=self._text(key, item, "note"),
                source=self._text(key, item, "source"),
                authorised_by=self._text(key, item, "authorised_by"),
                choices=None if choices is None else tuple(choices),
                variants=self._names(key, item),
            )
        extra = sorted(set(item) - _CITED_KEYS)
        if extra:
            raise self.fail(key, f"has unknown key {extra[0]!r}.")
        citation = item.get("citation")
        if citation is None:
            raise self.fail(key, "has no citation and is not marked house_option = true.")
        if not isinstance(citation, str) or not citation.strip():
            raise self.fail(f"{key}.citation", "is empty.")
        if "value" not in item:
            raise self.fail(key, "has a citation but no value.")
        verified = item.get("verified", True)
        if not isinstance(verified, bool):
            raise self.fail(f"{key}.verified", "must be true or false.")
        return Cited(
            key=key,
            value=_freeze(item["value"]),
            citation=citation,
            verified=verified,
            source=self._text(key, item, "source"),
            note=self._text(key, item, "note"),
            variants=self._names(key, item),
        )

    def _text(self, key: str, item: Mapping[str, Any], name: str) -> str | None:
        text = item.get(name)
        if text is not None and not isinstance(text, str):
            raise self.fail(f"{key}.{name}", "must be a string.")
        return text

    def _names(self, key: str, item: Mapping[str, Any]) -> tuple[str, ...] | None:
        names = item.get("variants")
        if names is None:
            return None
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise self.fail(f"{key}.variants", "must be a list of variant names.")
        return tuple(names)

    def _has_section(self, key: str) -> bool:
        return any(k.startswith(key + ".") for k in self.entries)

    def _entry(self, key: str) -> Cited:
        entry = self.entries.get(key)
        if entry is None:
            raise self.fail(key, "is missing.")
        return entry

    def _int(self, key: str, minimum: int = 0) -> int:
        value = self._entry(key).value
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self.fail(key, f"must be a whole number of at least {minimum}.")
        return value

    def _optional_int(self, key: str) -> int | None:
        return self._int(key) if key in self.entries else None

    def _replace(self, key: str, value: Any) -> Cited:
        """Store the parsed form of a value (Fraction, tuple) in place of its TOML form."""
        old = self.entries[key]
        new = Cited(**{**old.__dict__, "value": value})
        self.entries[key] = new
        return new

    # -- sections --

    def _cards(self) -> None:
        values = self._entry("cards.values").value
        if not isinstance(values, Mapping) or sorted(values) != sorted(RANKS):
            raise self.fail("cards.values", f"must give a value for each rank {' '.join(RANKS)}.")
        for rank in RANKS:
            if values[rank] != rank_value(rank):
                raise self.fail(
                    f"cards.values.{rank}",
                    f"is {values[rank]!r} but the engine counts it as {rank_value(rank)} "
                    "(N.J.A.C. 13:69F-7.1(b)); a pack with other card values is not supported.",
                )
        if self._entry("cards.point_count").value != "last_digit_of_sum":
            raise self.fail("cards.point_count", 'must be "last_digit_of_sum".')

    def _deal_order(self) -> tuple[str, ...]:
        order = self._entry("deal.order").value
        if (
            not isinstance(order, tuple)
            or len(order) != 4
            or any(hand not in ("player", "banker") for hand in order)
            or sorted(order) != ["banker", "banker", "player", "player"]
        ):
            raise self.fail(
                "deal.order",
                'must list the four initial cards\' hands, two "player" and two "banker".',
            )
        return order

    def _draw_row(self, key: str, cells: Any, what: str) -> tuple[str, ...]:
        """The 10 cells of one row as written; "option" only in a chemin de fer pack."""
        if not isinstance(cells, tuple) or len(cells) != 10:
            got = len(cells) if isinstance(cells, tuple) else type(cells).__name__
            raise self.fail(
                key, f"must be a list of 10 cells, one for each {what} 0-9 (got {got})."
            )
        chemin = self.game == CHEMIN
        for i, cell in enumerate(cells):
            if cell in (DRAW, STAND) or (chemin and cell == OPTION):
                continue
            kinds = f'"{DRAW}", "{STAND}" or "{OPTION}"' if chemin else f'"{DRAW}" or "{STAND}"'
            hint = " (option cells are for chemin de fer packs)" if cell == OPTION else ""
            raise self.fail(key, f"cell for {what} {i} is {cell!r}; a cell must be {kinds}{hint}.")
        return tuple(cells)

    def _draw(self) -> DrawTables:
        naturals = self._entry("draw.naturals").value
        if (
            not isinstance(naturals, tuple)
            or not naturals
            or any(isinstance(n, bool) or n not in range(10) for n in naturals)
        ):
            raise self.fail("draw.naturals", "must be a list of two-card counts 0-9.")
        natural = tuple(count in naturals for count in range(10))
        self._replace("draw.naturals", tuple(sorted(naturals)))

        player = self._draw_row("draw.player", self._entry("draw.player").value, "two-card count")
        stood = self._draw_row(
            "draw.banker_when_player_stood",
            self._entry("draw.banker_when_player_stood").value,
            "two-card count",
        )
        for key, row in (("draw.player", player), ("draw.banker_when_player_stood", stood)):
            for count in range(10):
                if natural[count] and row[count] != STAND:
                    raise self.fail(
                        key,
                        f'cell for two-card count {count} is "{row[count]}" but '
                        f"{count} is a natural (draw.naturals).",
                    )

        key = "draw.banker_when_player_drew"
        rows = self._entry(key).value
        if not isinstance(rows, Mapping):
            raise self.fail(key, "must be a table of rows keyed by Banker count 0-7.")
        drawn: list[tuple[str, ...]] = []
        for count in range(10):
            cells = rows.get(str(count))
            if natural[count]:
                if cells is not None:
                    raise self.fail(
                        f"{key}.{count}",
                        f"is a row for Banker count {count}, but that count is a natural.",
                    )
                drawn.append((STAND,) * 10)
                continue
            if cells is None:
                raise self.fail(key, f"is missing the row for Banker count {count}.")
            drawn.append(self._draw_row(f"{key}.{count}", cells, "Player third-card value"))
        for name in rows:
            if name not in {str(c) for c in range(10)}:
                raise self.fail(f"{key}.{name}", "is not a Banker count 0-7.")

        flat: list[str] = []
        for count in range(10):
            flat.extend(drawn[count])
            flat.append(STAND if natural[count] else stood[count])
        options = OPTION in player or OPTION in flat
        return DrawTables(
            natural=natural,
            player=tuple(cell == DRAW for cell in player),
            banker=tuple(cell == DRAW for cell in flat),
            player_option=tuple(cell == OPTION for cell in player) if options else (),
            banker_option=tuple(cell == OPTION for cell in flat) if options else (),
        )

    def _procedures(self) -> tuple[int, ...]:
        key = "procedures.available"
        value = self._entry(key).value
        if not isinstance(value, tuple) or any(
            isinstance(p, bool) or p not in (1, 2, 3, 4) for p in value
        ):
            raise self.fail(key, "must be a list drawn from procedures 1, 2, 3 and 4.")
        return value

    def _announcements(self) -> dict[str, Cited]:
        found = {}
        for key, entry in self.entries.items():
            if not key.startswith("announcements."):
                continue
            kind = key.removeprefix("announcements.")
            if kind not in ANNOUNCE_KINDS:
                raise self.fail(key, f"is not an announcement kind ({', '.join(ANNOUNCE_KINDS)}).")
            if entry.value not in ANNOUNCE_WHEN:
                raise self.fail(
                    key, f"is due when {entry.value!r}; expected one of {', '.join(ANNOUNCE_WHEN)}."
                )
            found[kind] = entry
        if "result" not in found:
            raise self.fail("announcements.result", "is missing.")
        return found

    def _odds(self, key: str) -> Cited:
        entry = self._entry(key)
        try:
            odds = parse_odds(entry.value) if isinstance(entry.value, str) else None
        except ValueError:
            odds = None
        if odds is None:
            raise self.fail(key, f'is {entry.value!r}; odds are written "win:stake", e.g. "8:1".')
        return self._replace(key, odds)

    def _variants(self) -> dict[str, Variant]:
        section = self.data.get("variants")
        if not isinstance(section, dict) or not section:
            raise self.fail("variants", "is missing; a pack defines at least one variant.")
        return {name: self._variant(name, body) for name, body in section.items()}

    def _variant(self, name: str, body: Any) -> Variant:
        base = f"variants.{name}"
        if not isinstance(body, dict):
            raise self.fail(base, "must be a table.")
        # A chemin de fer participant wagers against the bank (13:69F-4.7(g)): there is no
        # tie wager, equal counts make the wagers void.
        wagers = ["player", "banker"]
        if self.game != CHEMIN or f"{base}.payouts.tie" in self.entries:
            wagers.append("tie")
        payouts = {w: self._odds(f"{base}.payouts.{w}") for w in wagers}
        charged = self._entry(f"{base}.vigorish.charged")
        if not isinstance(charged.value, bool):
            raise self.fail(charged.key, "must be true or false.")
        rate = rounding = modes = None
        if charged.value:
            rate = self._vig_rate(f"{base}.vigorish.rate")
            rounding = self.entries.get(f"{base}.vigorish.rounding")
            if rounding is not None and rounding.value not in VIG_ROUNDING:
                raise self.fail(rounding.key, f"must be one of {', '.join(VIG_ROUNDING)}.")
            modes = self.entries.get(f"{base}.vigorish.modes")
            if modes is not None and (
                not isinstance(modes.value, tuple)
                or not modes.value
                or any(m not in VIG_MODES for m in modes.value)
            ):
                raise self.fail(modes.key, 'must list "collect" and/or "mark".')
        else:
            for part in ("rate", "rounding", "modes"):
                if f"{base}.vigorish.{part}" in self.entries:
                    raise self.fail(
                        f"{base}.vigorish.{part}", "is set but the variant charges no vigorish."
                    )
        exceptions = tuple(
            self._exception(key)
            for key in self.entries
            if key.startswith(f"{base}.banker_win_exceptions.")
        )
        return Variant(
            name=name,
            title=str(body.get("title", name)),
            verified=body.get("verified", True),
            payouts=MappingProxyType(payouts),
            vig_charged=charged,
            vig_rate=rate,
            vig_rounding=rounding,
            vig_modes=modes,
            banker_exceptions=exceptions,
        )

    def _vig_rate(self, key: str) -> Cited:
        value = self._entry(key).value
        try:
            rate = Decimal(value) if isinstance(value, str) else None
        except InvalidOperation:
            rate = None
        if rate is None or not (0 <= rate < 1):
            raise self.fail(key, f'is {value!r}; a rate is a decimal string like "0.05".')
        return self._replace(key, rate)

    def _commission(self) -> None:
        """Chemin de fer: the commission on the Banker's winnings, a rate and its rounding."""
        self._vig_rate("commission.rate")
        rounding = self._entry("commission.rounding")
        if rounding.value not in VIG_ROUNDING:
            raise self.fail(rounding.key, f"must be one of {', '.join(VIG_ROUNDING)}.")

    def _exception(self, key: str) -> BankerException:
        spec = self.entries[key].value
        if not isinstance(spec, Mapping) or set(spec) - {"count", "cards", "pays"}:
            raise self.fail(
                key, 'must be {count = N, cards = 2 or 3 (optional), pays = "push" or "win:stake"}.'
            )
        count, cards, pays = spec.get("count"), spec.get("cards"), spec.get("pays")
        if not isinstance(count, int) or isinstance(count, bool) or count not in range(10):
            raise self.fail(f"{key}.count", "must be a count 0-9.")
        if cards is not None and (isinstance(cards, bool) or cards not in (2, 3)):
            raise self.fail(f"{key}.cards", "must be 2 or 3.")
        if pays == "push":
            ratio = None
        else:
            try:
                ratio = parse_odds(pays) if isinstance(pays, str) else None
            except ValueError:
                ratio = None
            if ratio is None:
                raise self.fail(f"{key}.pays", 'must be "push" or odds like "1:2".')
        return BankerException(key.rsplit(".", 1)[1], count, cards, ratio, self.entries[key])

    def _side_bets(self) -> dict[str, SideBet]:
        section = self.data.get("side_bets", {})
        bets = {}
        for name, body in section.items():
            key = f"side_bets.{name}"
            if name not in KNOWN_SIDE_BETS:
                raise self.fail(
                    key,
                    f"is not a side wager the engine can settle ({', '.join(KNOWN_SIDE_BETS)}).",
                )
            if not isinstance(body, dict):
                raise self.fail(key, "must be a table.")
            pays = self._odds(f"{key}.pays")
            bets[name] = SideBet(name, str(body.get("title", name)), pays, pays.variants)
        return bets
