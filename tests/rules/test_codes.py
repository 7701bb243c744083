"""The registry of finding codes: complete, documented, and the docs page generated from it."""

from pathlib import Path

from auditor.rules.codes import REGISTRY, SCOPES, SEVERITIES
from auditor.rules.codes_page import markdown
from auditor.rules.pack import citations
from auditor.shipped import shipped

# Every code the findings contract (findings format v1) says every version must keep.
CONTRACT_CODES = [
    "draw.player_missed",
    "draw.player_extra",
    "draw.banker_missed",
    "draw.banker_extra",
    "deal.order",
    "result.misannounced",
    "announce.tie_missing",
    "announce.dragon7_missing",
    "announce.total_cards_missing",
    "settle.wrong_amount",
    "settle.wrong_outcome",
    "settle.unsettled",
    "vig.wrong_amount",
    "vig.missing",
    "vig.not_allowed",
    "order.collect_after_pay",
    "order.procedure_mismatch",
    "procedure.notice_missing",
    "procedure.notice_late",
    "procedure.pit_inconsistent",
    "procedure.undeclared_change",
    "shoe.too_few_decks",
    "shoe.composition",
    "shoe.batch_not_alternated",
    "shoe.burn",
    "log.seq_gap",
    "log.malformed",
    "log.altered",
    "chemin.priority",
    "chemin.over_bank",
    "chemin.late_wager",
    "chemin.option",
    "chemin.commission",
]


def test_every_contract_code_is_registered():
    assert sorted(set(CONTRACT_CODES) - set(REGISTRY)) == []


def test_every_code_is_fully_documented():
    for c in REGISTRY.values():
        assert c.severity in SEVERITIES, c.code
        for text in (c.rule, c.title, c.why, c.faulty, c.correct):
            assert text.strip(), c.code
        assert c.faulty != c.correct, c.code


def test_every_code_has_a_valid_scope():
    assert SCOPES == ("round", "table", "shoe", "log", "chemin", "dealer", "play")
    for c in REGISTRY.values():
        assert c.scope in SCOPES, c.code
    # The families whose scope follows from the name.
    for c in REGISTRY.values():
        family = c.code.split(".")[0]
        if family in ("log", "shoe", "chemin"):
            assert c.scope == family, c.code
        elif family == "procedure":
            assert c.scope == "table", c.code
        elif family in ("draw", "deal", "result", "announce", "settle", "vig", "order"):
            assert c.scope == "round", c.code
    assert {c.scope for c in REGISTRY.values()} == set(SCOPES)


def test_docs_codes_page_is_generated_from_the_registry():
    page = Path(__file__).resolve().parents[2] / "docs" / "codes.md"
    expected = markdown(citations(shipped("rules")))
    assert page.read_text() == expected, "regenerate: bacc-audit codes --markdown > docs/codes.md"
