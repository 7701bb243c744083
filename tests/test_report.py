"""The shift report: its content read back from the PDF, determinism, attachments."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pypdf
import pytest

from auditor import config
from auditor.audit.run import audit
from auditor.errors import UserError
from auditor.ingest.files import ingest
from auditor.report import gather, render
from auditor.store import db, runs

SAMPLE = Path(__file__).resolve().parent.parent / "sample_logs"
SHIFT = "2026-11-28/grave"


@pytest.fixture(scope="module")
def night(tmp_path_factory):
    path = tmp_path_factory.mktemp("report") / "audit.duckdb"
    con = db.connect(path)
    ingest(con, [SAMPLE], runs.start(con, "ingest", {}))
    audit(con, runs.start(con, "audit", {}), config.PropertyConfig())
    con.close()
    return path


@pytest.fixture(scope="module")
def rendered(night, tmp_path_factory):
    con = db.connect(night, read_only=True)
    conf = config.PropertyConfig(name="Harbor Point Casino")
    scope = gather.scope_for(conf, con, shift=SHIFT)
    out = tmp_path_factory.mktemp("pdf")
    first = render.write_report(con, conf, scope, out / "a.pdf")
    second = render.write_report(con, conf, scope, out / "b.pdf")
    context = gather.gather(con, conf, scope)
    con.close()
    reader = pypdf.PdfReader(first)
    text = "\n".join(page.extract_text() for page in reader.pages)
    return first, second, reader, re.sub(r"\s+", " ", text), context


def test_two_renders_of_the_same_database_are_byte_identical(rendered):
    first, second, *_ = rendered
    assert first.read_bytes() == second.read_bytes()


def test_cover_names_property_shift_packs_and_tool(rendered):
    *_, text, context = rendered
    assert "Harbor Point Casino" in text
    assert "grave shift of gaming day 2026-11-28" in text
    assert "2026-11-28 22:00 to 2026-11-29 06:00" in text
    assert "nj-mini_baccarat 1.0.0" in text and "nz-mini_baccarat 1.0.0" in text
    assert "Reviewed by" in text and "Title" in text
    assert f"{context['rounds']:,}" in text


def test_every_page_has_page_x_of_y_and_the_logs_digest(rendered):
    _, _, reader, _, context = rendered
    n = len(reader.pages)
    last = reader.pages[-1].extract_text()
    assert f"page {n} of {n}" in last
    assert context["sources_digest"][:16] in last


def test_the_planted_findings_of_the_shift_are_in_the_pdf(rendered):
    *_, text, context = rendered
    codes = {f["code"] for f in context["findings"]}
    # Planted in the grave shift (22:00-06:00): see sample_logs/README.md.
    for code in ("draw.banker_missed", "draw.player_extra", "vig.wrong_amount",
                 "result.misannounced", "settle.wrong_outcome", "log.malformed", "log.seq_gap"):
        assert code in codes
        assert code in text
    assert "Pull surveillance video by" in text
    assert "2026-11-28_MB-01.jsonl:1149" in text  # the missed Banker draw's source line
    assert "Banker 9s 3d (2) had to draw a third card" in text


def test_hold_and_theoretical_hold_per_table(rendered):
    *_, context = rendered
    by_table = {t["table_id"]: t for t in context["tables"]}
    mb01 = by_table["MB-01"]
    assert mb01["rounds"] > 400
    assert mb01["handle"] > 0
    # Exact edges blend Banker 1.06%, Player 1.24%, Tie 14.36%: between the extremes.
    assert 0.0106 < mb01["theo_hold"] < 0.1436
    assert by_table["CF-01"]["theo_hold"] is None  # no chemin de fer pack yet


def test_observed_outcomes_are_counted_from_the_cards(rendered):
    *_, context = rendered
    o = context["outcomes"]
    assert sum(o.values()) > 2500
    assert 0.40 < o["banker"] / sum(o.values()) < 0.50


def test_findings_are_attached_as_jsonl_and_csv(rendered):
    _, _, reader, _, context = rendered
    files = reader.attachments
    assert set(files) == {"findings.jsonl", "findings.csv"}
    lines = files["findings.jsonl"][0].decode().splitlines()
    assert len(lines) == len(context["findings"])
    first = json.loads(lines[0])
    assert list(first)[:13] == ["code", "severity", "table", "pit", "shoe", "round", "seq", "ts",
                                "rule", "message", "expected", "observed", "source"]
    csv_lines = files["findings.csv"][0].decode().splitlines()
    assert csv_lines[0].startswith("code,severity,table,pit")
    assert len(csv_lines) == len(context["findings"]) + 1


def test_a_shift_with_no_rounds_is_a_clear_error_not_an_empty_pdf(night):
    con = db.connect(night, read_only=True)
    conf = config.PropertyConfig()
    scope = gather.scope_for(conf, con, shift="2026-11-27/grave")
    with pytest.raises(UserError, match="no rounds in the grave shift of gaming day 2026-11-27"):
        gather.gather(con, conf, scope)
    con.close()


def test_a_shift_without_findings_gives_a_clean_report(tmp_path):
    """The first 30 rounds of MB-01 are clean (its first deviation is in round 72)."""
    lines = (SAMPLE / "2026-11-28_MB-01.jsonl").read_text().splitlines()
    end = next(i for i, x in enumerate(lines) if '"round":31,' in x)
    log = tmp_path / "mb01.jsonl"
    log.write_text("\n".join(lines[:end]) + "\n")
    con = db.connect(tmp_path / "clean.duckdb")
    ingest(con, [log], runs.start(con, "ingest", {}))
    audit(con, runs.start(con, "audit", {}), config.PropertyConfig())
    conf = config.PropertyConfig()
    context = gather.gather(con, conf, gather.scope_for(conf, con, shift=SHIFT))
    assert context["findings"] == []
    assert context["rounds"] == 30
    html = render.render_html(context)
    assert "No deviations found" in html
    con.close()


def test_templates_fail_on_a_missing_value():
    import jinja2

    with pytest.raises(jinja2.UndefinedError):
        render.render_html({})


def test_past_the_listing_limit_tables_changes_and_sources_are_listed_one_a_line(
    night, monkeypatch
):
    """A property-wide day has thousands of tables; their rows are fixed-width lines then
    (a PDF table that long takes minutes and gigabytes). Same facts, every row."""
    monkeypatch.setattr(gather, "LISTING_ROWS", 2)
    con = db.connect(night, read_only=True)
    conf = config.PropertyConfig()
    context = gather.gather(con, conf, gather.scope_for(conf, con, date="2026-11-28"))
    con.close()
    html = render.render_html(context)
    tables = "\n".join(context["tables_listing"])
    assert len(tables.splitlines()) == len(context["tables"]) == 8
    mb01 = next(t for t in context["tables"] if t["table_id"] == "MB-01")
    line = next(x for x in tables.splitlines() if " MB-01 " in x)
    assert f"{mb01['rounds']:,}" in line and f"{mb01['handle']:,.2f}" in line
    assert f"{mb01['hold'] * 100:.2f}%" in line
    changes = "\n".join(context["procedures"]["listing"]).splitlines()
    assert [x.split()[0] for x in changes] == [c["table"] for c in context["procedures"]["changes"]]
    assert {"MB-03", "MB-05"} <= {x.split()[0] for x in changes}
    assert context["procedures"]["timeline_svg"] == ""
    sources = "\n".join(context["sources_listing"]).splitlines()
    assert [x.split()[0] for x in sources] == [s["sha256"] for s in context["sources"]]
    assert '<table class="wide">' not in html and html.count('<pre class="listing">') >= 3
