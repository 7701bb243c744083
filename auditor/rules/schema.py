"""What a rule pack must say, and how: the checks that turn a parsed TOML pack into a
RulePack (auditor/rules/pack.py) or refuse it with a sentence naming the file and the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from pathlib import Path
from types import MappingProxyType
from typing import Any

from auditor.rules.cards import RANKS, rank_value
from auditor.rules.codes import ALL_GAMES, REGISTRY
from auditor.rules.pack import (
    CHEMIN,
    DRAW,
    OPTION,
    STAND,
    BankerException,
    Cited,
    DrawTables,
    RulePack,
    RulePackError,
    SideBet,
    Variant,
    can_raise_code,
    pack_filename,
    parse_odds,
)

PACK_FORMAT = 1
KNOWN_GAMES = ALL_GAMES
# Side wagers the engine knows how to settle; a pack may offer any subset.
KNOWN_SIDE_BETS = ("dragon7", "panda8", "total_cards_4", "total_cards_5", "total_cards_6")
# Announcement kinds (event log v1 `announce.kind`) and when each is due.
ANNOUNCE_KINDS = ("result", "tie_hand", "total_cards", "dragon_7", "panda_8")
ANNOUNCE_WHEN = ("always", "tie", "total_card_wagers_offered", "dragon7_hand", "panda8_hand")
VIG_ROUNDING = ("exact_cents", "down_to_cent", "up_to_cent")
VIG_MODES = ("collect", "mark")

_CITED_KEYS = frozenset({"value", "citation", "verified", "source", "note", "variants"})
_HOUSE_KEYS = frozenset(
    {"house_option", "default", "note", "choices", "authorised_by", "source", "variants"}
)
_LEAF_MARKERS = ("value", "citation", "house_option", "default")
_DESCRIPTIVE_KEYS = frozenset({"title", "note", "description"})
_PACK_KEYS = frozenset(
    {"format", "id", "version", "jurisdiction", "game", "title", "description", "sources"}
)


def check(path: Path, data: dict[str, Any], sha256: str) -> RulePack:
    """The pack `data` (parsed from `path`, whose bytes hash to `sha256`), checked in full."""
    return _Checker(path, data, sha256).load()


def _freeze(value: Any) -> Any:
    """TOML arrays and tables as tuples and read-only mappings: a loaded pack cannot change."""
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return MappingProxyType({k: _freeze(v) for k, v in value.items()})
    return value


class _Checker:
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
        raisable = [c for c in REGISTRY if can_raise_code(self.game, self.entries, c)]
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
