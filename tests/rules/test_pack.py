"""Rule packs load, cite every value, and refuse to load when broken, saying file and key."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest

from auditor.rules.pack import (
    RULES_ENV,
    RulePack,
    RulePackError,
    default_rules_dir,
    list_packs,
    load_pack,
    load_pack_file,
)

REPO_RULES = Path(__file__).resolve().parents[2] / "rules"
NJ_MINI = REPO_RULES / "nj-mini_baccarat.toml"
PACKS = [("NJ", "mini_baccarat"), ("NJ", "punto_banco"), ("NZ", "mini_baccarat")]
# The chemin de fer pack has no tie wager, side bets or vigorish, so it is not in the fixture
# above; tests/replay/test_chemin.py checks it.
CHEMIN_PACK = ("NJ", "chemin_de_fer")


@pytest.fixture(scope="module", params=PACKS, ids=lambda p: f"{p[0]}-{p[1]}")
def pack(request: pytest.FixtureRequest) -> RulePack:
    jurisdiction, game = request.param
    return load_pack(jurisdiction, game, rules_dir=REPO_RULES)


@pytest.fixture(scope="module")
def nj() -> RulePack:
    return load_pack("NJ", "mini_baccarat", rules_dir=REPO_RULES)


@pytest.fixture(scope="module")
def nz() -> RulePack:
    return load_pack("NZ", "mini_baccarat", rules_dir=REPO_RULES)


# --- Finding and identifying packs -----------------------------------------------------------


def test_rules_dir_defaults_to_the_repository_rules_folder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(RULES_ENV, raising=False)
    assert default_rules_dir() == REPO_RULES
    assert {(r.jurisdiction, r.game) for r in list_packs()} == {*PACKS, CHEMIN_PACK}


def test_rules_dir_can_be_set_by_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "nj-mini_baccarat.toml").write_bytes(NJ_MINI.read_bytes())
    monkeypatch.setenv(RULES_ENV, str(tmp_path))
    assert [(r.jurisdiction, r.game) for r in list_packs()] == [("NJ", "mini_baccarat")]
    assert load_pack("nj", "mini_baccarat").path == tmp_path / "nj-mini_baccarat.toml"


def test_pack_exposes_id_version_and_content_hash_for_reports(pack: RulePack) -> None:
    assert pack.id == f"{pack.jurisdiction.lower()}-{pack.game}"
    assert re.fullmatch(r"\d+\.\d+\.\d+", pack.version)
    assert pack.sha256 == hashlib.sha256(pack.path.read_bytes()).hexdigest()
    assert pack.label == f"{pack.id} {pack.version} (sha256 {pack.sha256[:12]})"


def test_a_pack_is_parsed_again_when_its_bytes_change_and_only_then(tmp_path: Path) -> None:
    """Loaded packs are kept by their bytes' hash: the same bytes give the very pack parsed
    before (no second parse), an edit on disk is seen by the next load, and going back to the
    first bytes gives the first pack again."""
    path = tmp_path / "nj-mini_baccarat.toml"
    text = NJ_MINI.read_text()
    path.write_text(text)
    first = load_pack_file(path)
    assert load_pack_file(path) is first
    edited = text.replace(f'version = "{first.version}"', 'version = "9.8.7"', 1)
    assert edited != text
    path.write_text(edited)
    second = load_pack_file(path)
    assert (second.version, second.sha256) == ("9.8.7", hashlib.sha256(edited.encode()).hexdigest())
    assert first.version != "9.8.7"
    path.write_text(text)
    assert load_pack_file(path) is first
    # The same bytes under another name are that file's own pack (errors and reports name it).
    other = tmp_path / "copy" / "nj-mini_baccarat.toml"
    other.parent.mkdir()
    other.write_text(text)
    assert load_pack_file(other).path == other
    # A pack broken on disk is refused every time, not served from before.
    path.write_text(text.replace("value = 6\n", "value = = 6\n", 1))
    for _ in range(2):
        with pytest.raises(RulePackError):
            load_pack_file(path)


def test_missing_pack_names_the_file_it_looked_for() -> None:
    path = REPO_RULES / "nz-punto_banco.toml"
    with pytest.raises(RulePackError) as err:
        load_pack("NZ", "punto_banco", rules_dir=REPO_RULES)
    assert str(err.value) == (
        f"{path} does not exist: there is no rule pack for NZ punto_banco (packs in "
        f"{REPO_RULES}: NJ chemin_de_fer, NJ mini_baccarat, NJ punto_banco, NZ mini_baccarat)."
    )


# --- Citation discipline -------------------------------------------------------------------


def test_every_value_is_cited_or_a_house_option(pack: RulePack) -> None:
    assert pack.entries
    for entry in pack.entries.values():
        if entry.house_option:
            assert entry.citation is None, entry.key
        else:
            assert entry.citation, entry.key
        if not entry.verified:
            assert entry.source, f"{entry.key} is unverified without saying why"


PRACTICE_KEYS = [
    "shoe.burn",
    "shoe.cut_card_from_end",
    "shoe.end_of_shoe",
    "settlement.push_on_tie",
    "variants.standard.payouts.player",
    "variants.standard.payouts.banker",
    "variants.standard.payouts.tie",
    "variants.standard.vigorish.rate",
    "variants.standard.vigorish.rounding",
    "side_bets.dragon7.pays",
    "side_bets.panda8.pays",
    "side_bets.total_cards_4.pays",
    "side_bets.total_cards_5.pays",
    "side_bets.total_cards_6.pays",
    "surveillance.video_retention_days",
]


@pytest.mark.parametrize("key", PRACTICE_KEYS)
def test_practice_values_are_house_options_never_law(pack: RulePack, key: str) -> None:
    assert pack.cited(key).house_option
    assert pack.cited(key).provenance.startswith("house option")


def test_house_option_defaults(pack: RulePack) -> None:
    standard = pack.variant("standard")
    assert standard.pays("player") == 1
    assert standard.pays("banker") == 1
    assert standard.pays("tie") == 8
    assert standard.vig_rate is not None and standard.vig_rate.value == Decimal("0.05")
    assert standard.vigorish_rate == Fraction(1, 20)
    assert standard.vig_rounding is not None and standard.vig_rounding.value == "exact_cents"
    assert {k: b.pays.value for k, b in pack.side_bets.items()} == {
        "dragon7": 40,
        "panda8": 25,
        "total_cards_4": Fraction(3, 2),
        "total_cards_5": 2,
        "total_cards_6": 2,
    }
    assert pack.value("surveillance.video_retention_days") == 7
    assert pack.value("shoe.burn") == {"expose": 1, "burn": "card_value", "ten_value_burns": 10}
    assert pack.value("shoe.cut_card_from_end") == (14, 16)


# --- What the NJ and NZ texts say -----------------------------------------------------------


def test_nj_decks_cite_7_1(nj: RulePack) -> None:
    assert nj.min_decks == 6
    assert nj.cited("shoe.min_decks").citation == "N.J.A.C. 13:69F-7.1(a)"
    assert nj.shuffler_min_decks == 12
    assert nj.cited("shoe.automated_shuffler.min_decks").citation == "N.J.A.C. 13:69F-7.1(d)"
    assert nj.value("shoe.automated_shuffler.batches") == 2
    assert nj.value("shoe.automated_shuffler.equal_batches") is True


def test_nj_procedures_and_notice_cite_7_10(nj: RulePack) -> None:
    assert nj.procedures == (1, 2, 3, 4)
    assert nj.cited("procedures.available").citation == "N.J.A.C. 13:69F-7.10(b)1-4"
    assert nj.notice_minutes == 30
    assert nj.cited("procedures.notice_minutes").citation == "N.J.A.C. 13:69F-7.10(c)3"
    assert nj.value("procedures.notice_recipients") == ("division", "surveillance")


def test_nj_announcements(nj: RulePack) -> None:
    when = {kind: a.value for kind, a in nj.announcements.items()}
    assert when == {
        "result": "always",
        "tie_hand": "tie",
        "total_cards": "total_card_wagers_offered",
        "dragon_7": "dragon7_hand",
    }
    assert nj.announcements["dragon_7"].variants == ("no_vig_dragon7",)


def test_nj_variants(nj: RulePack) -> None:
    assert set(nj.variants) == {"standard", "no_vig_dragon7", "super6"}
    dragon = nj.variant("no_vig_dragon7")
    assert dragon.vigorish_rate == 0
    assert dragon.vig_charged.citation == "N.J.A.C. 13:69F-7.10(b)5"
    [push] = dragon.banker_exceptions
    assert (push.count, push.cards, push.pays) == (7, 3, None)
    assert push.cited.citation == "N.J.A.C. 13:69F-7.3(i)"
    super6 = nj.variant("super6")
    assert super6.verified is False
    [half] = super6.banker_exceptions
    assert (half.count, half.cards, half.pays) == (6, None, Fraction(1, 2))
    assert half.cited.verified is False


def test_nz_has_no_payout_procedures_only_rule_10_2(nz: RulePack) -> None:
    assert nz.procedures == ()
    assert str(nz.cited("procedures.available").citation).endswith("rule 10.2")
    assert nz.notice_minutes is None
    assert set(nz.announcements) == {"result", "tie_hand"}
    assert str(nz.announcements["tie_hand"].citation).endswith("rule 10.1")


def test_nz_banker_table_is_the_standard_tableau_assumed(nz: RulePack) -> None:
    table = nz.cited("draw.banker_when_player_drew")
    assert str(table.citation).endswith("rule 9.4 Table 2")
    assert table.verified is False
    assert "standard tableau assumed" in (table.source or "")
    assert "unverified" in table.provenance


def test_cells_are_read_from_the_pack_as_booleans(nj: RulePack) -> None:
    assert nj.draw.banker_row(3) == (True,) * 8 + (False, True)
    assert nj.value("draw.banker_when_player_drew")["3"][8] == "stand"


# --- Broken packs ---------------------------------------------------------------------------

NJ_TEXT = NJ_MINI.read_text()


def _replace(old: str, new: str) -> Callable[[str], str]:
    def edit(text: str) -> str:
        assert old in text, old
        return text.replace(old, new, 1)

    return edit


def _append(extra: str) -> Callable[[str], str]:
    return lambda text: text + extra


BROKEN = {
    "value_without_citation": (
        _replace('value = 6\ncitation = "N.J.A.C. 13:69F-7.1(a)"\n', "value = 6\n"),
        "shoe.min_decks has no citation and is not marked house_option = true.",
    ),
    "bare_value": (
        _append("\n[surveillance]\ncameras = 4\n"),
        "surveillance.cameras has no citation and is not marked house_option = true.",
    ),
    "house_option_without_default": (
        _replace("house_option = true\ndefault = 7\n", "house_option = true\n"),
        "surveillance.video_retention_days is marked house_option = true but has no default.",
    ),
    "house_option_with_citation": (
        _replace(
            "house_option = true\ndefault = 7\n",
            'house_option = true\ndefault = 7\ncitation = "N.J.A.C. 13:69F-7.10"\n',
        ),
        "surveillance.video_retention_days is marked house_option = true but also has a "
        "citation or value; a rule is either law or a house option.",
    ),
    "misspelt_key": (
        _replace("value = 30\ncitation =", 'value = 30\nsource_ = "x"\ncitation ='),
        "procedures.notice_minutes has unknown key 'source_'.",
    ),
    "missing_table": (
        _replace("[draw.player]\n", "[draw.player_table]\n"),
        "draw.player is missing.",
    ),
    "draw_row_too_short": (
        _replace(
            '"stand", "stand", "stand", "stand"]\ncitation = "N.J.A.C. 13:69F-7.7, 7.8, 7.9"',
            '"stand", "stand", "stand"]\ncitation = "N.J.A.C. 13:69F-7.7, 7.8, 7.9"',
        ),
        "draw.player must be a list of 10 cells, one for each two-card count 0-9 (got 9).",
    ),
    "draw_cell_not_draw_or_stand": (
        _replace('5 = ["stand",', '5 = ["hit",'),
        "draw.banker_when_player_drew.5 cell for Player third-card value 0 is 'hit'; "
        'a cell must be "draw" or "stand".',
    ),
    "option_cell_outside_chemin_de_fer": (
        _replace('5 = ["stand",', '5 = ["option",'),
        "draw.banker_when_player_drew.5 cell for Player third-card value 0 is 'option'; "
        'a cell must be "draw" or "stand" (option cells are for chemin de fer packs).',
    ),
    "missing_banker_row": (
        _replace(
            '6 = ["stand", "stand", "stand", "stand", "stand", "stand", "draw",  "draw",  '
            '"stand", "stand"]\n',
            "",
        ),
        "draw.banker_when_player_drew is missing the row for Banker count 6.",
    ),
    "natural_drawing": (
        _replace(
            '"stand", "stand", "stand", "stand"]\ncitation = "N.J.A.C. 13:69F-7.7, 7.8, 7.9"',
            '"stand", "stand", "draw", "stand"]\ncitation = "N.J.A.C. 13:69F-7.7, 7.8, 7.9"',
        ),
        'draw.player cell for two-card count 8 is "draw" but 8 is a natural (draw.naturals).',
    ),
    "unknown_variant_referenced": (
        _replace('variants = ["no_vig_dragon7"]', 'variants = ["ez_baccarat"]'),
        "announcements.dragon_7.variants names unknown variant 'ez_baccarat'; the pack "
        "defines: no_vig_dragon7, standard, super6.",
    ),
    "bad_odds": (
        _replace('default = "40:1"', 'default = "forty to one"'),
        'side_bets.dragon7.pays is \'forty to one\'; odds are written "win:stake", e.g. "8:1".',
    ),
    "unknown_side_bet": (
        _append(
            '\n[side_bets.lucky6]\n[side_bets.lucky6.pays]\nhouse_option = true\ndefault = "12:1"\n'
        ),
        "side_bets.lucky6 is not a side wager the engine can settle (dragon7, panda8, "
        "total_cards_4, total_cards_5, total_cards_6).",
    ),
    "card_value_changed": (
        _replace("T = 0, J = 0", "T = 10, J = 0"),
        "cards.values.T is 10 but the engine counts it as 0 (N.J.A.C. 13:69F-7.1(b)); a pack "
        "with other card values is not supported.",
    ),
    "vigorish_in_a_no_vigorish_variant": (
        _append('\n[variants.super6.vigorish.rate]\nhouse_option = true\ndefault = "0.05"\n'),
        "variants.super6.vigorish.rate is set but the variant charges no vigorish.",
    ),
    "pack_header_missing_version": (
        _replace('version = "1.0.0"\n', ""),
        "pack.version is missing or empty.",
    ),
    "unknown_announcement_condition": (
        _replace('value = "tie"\n', 'value = "on_ties"\n'),
        "announcements.tie_hand is due when 'on_ties'; expected one of always, tie, "
        "total_card_wagers_offered, dragon7_hand, panda8_hand.",
    ),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_broken_pack_is_refused_with_file_and_key(tmp_path: Path, case: str) -> None:
    edit, problem = BROKEN[case]
    path = tmp_path / "nj-mini_baccarat.toml"
    path.write_text(edit(NJ_TEXT))
    with pytest.raises(RulePackError) as err:
        load_pack_file(path)
    assert str(err.value) == f"{path}: {problem}"
    assert err.value.path == str(path)


def test_invalid_toml_names_the_file_and_the_line(tmp_path: Path) -> None:
    path = tmp_path / "nj-mini_baccarat.toml"
    path.write_text(NJ_TEXT.replace("value = 6\n", "value = = 6\n", 1))
    with pytest.raises(RulePackError) as err:
        load_pack_file(path)
    assert str(err.value).startswith(f"{path} is not valid TOML: ")
    assert "line" in str(err.value)


def test_pack_in_the_wrong_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "nz-mini_baccarat.toml"
    path.write_text(NJ_TEXT)
    with pytest.raises(RulePackError) as err:
        load_pack("NZ", "mini_baccarat", rules_dir=tmp_path)
    assert str(err.value) == (
        f"{path}: pack.jurisdiction and pack.game say this pack belongs in nj-mini_baccarat.toml."
    )


def test_error_messages_are_one_sentence(tmp_path: Path) -> None:
    for case, (edit, _) in BROKEN.items():
        path = tmp_path / f"{case}" / "nj-mini_baccarat.toml"
        path.parent.mkdir()
        path.write_text(edit(NJ_TEXT))
        with pytest.raises(RulePackError) as err:
            load_pack_file(path)
        message = str(err.value)
        assert message.endswith(".") and "\n" not in message, case
