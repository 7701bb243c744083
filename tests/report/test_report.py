"""The shift report: its content read back from the PDF, determinism, attachments."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections import Counter
from pathlib import Path
from zoneinfo import ZoneInfo

import pypdf
import pytest
from helpers.shared import built_once

from auditor import config
from auditor.audit.run import audit
from auditor.errors import UserError
from auditor.ingest.run import ingest
from auditor.report import formatting, gather, procedures, render
from auditor.store import db, runs

SAMPLE = Path(__file__).resolve().parents[2] / "sample_logs"
SHIFT = "2026-11-28/grave"


@pytest.fixture(scope="module")
def night(sample_audited, tmp_path_factory):
    """The sample night ingested and audited under the default config (conftest.py): a copy."""
    path = tmp_path_factory.mktemp("report") / "audit.duckdb"
    path.write_bytes(sample_audited[0].read_bytes())
    return path


@pytest.fixture(scope="module")
def rendered(night, tmp_path_factory):
    """The grave shift's report rendered twice and its context, once a run (the two PDFs in
    the shared folder: read them)."""
    out, context = built_once(tmp_path_factory, "report-grave-twice",
                              lambda d: _render_twice(night, d))
    first, second = out / "a.pdf", out / "b.pdf"
    reader = pypdf.PdfReader(first)
    text = "\n".join(page.extract_text() for page in reader.pages)
    return first, second, reader, re.sub(r"\s+", " ", text), context


def _render_twice(night: Path, out: Path) -> dict:
    con = db.connect(night, read_only=True)
    conf = config.PropertyConfig(name="Harbor Point Casino", time_zone="America/New_York")
    scope = gather.scope_for(conf, con, shift=SHIFT)
    render.write_report(con, conf, scope, out / "a.pdf")
    render.write_report(con, conf, scope, out / "b.pdf")
    context = gather.gather(con, conf, scope)
    con.close()
    return context


def _local(
    year: int, month: int, day: int, hour: int, minute: int = 0, second: int = 0
) -> dt.datetime:
    return dt.datetime(year, month, day, hour, minute, second, tzinfo=ZoneInfo("America/New_York"))


@pytest.mark.slow
def test_two_renders_of_the_same_database_are_byte_identical(rendered):
    first, second, *_ = rendered
    assert first.read_bytes() == second.read_bytes()


@pytest.mark.slow
def test_cover_names_property_shift_packs_and_tool(rendered):
    *_, text, context = rendered
    assert "Harbor Point Casino" in text
    assert "grave shift of gaming day 2026-11-28" in text
    assert "2026-11-28 22:00 to 2026-11-29 06:00" in text
    assert "nj-mini_baccarat 1.0.0" in text and "nz-mini_baccarat 1.0.0" in text
    assert "Reviewed by" in text and "Title" in text
    assert f"{context['rounds']:,}" in text


@pytest.mark.slow
def test_every_page_has_page_x_of_y_and_the_logs_digest(rendered):
    _, _, reader, _, context = rendered
    n = len(reader.pages)
    last = reader.pages[-1].extract_text()
    assert f"page {n} of {n}" in last
    assert context["sources_digest"][:16] in last


@pytest.mark.slow
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


@pytest.mark.slow
def test_hold_and_theoretical_hold_per_table(rendered):
    *_, context = rendered
    by_table = {t["table_id"]: t for t in context["tables"]}
    mb01 = by_table["MB-01"]
    assert mb01["rounds"] > 400
    assert mb01["handle"] > 0
    # Exact edges blend Banker 1.06%, Player 1.24%, Tie 14.36%: between the extremes.
    assert 0.0106 < mb01["theo_hold"] < 0.1436
    assert by_table["CF-01"]["theo_hold"] is None  # no chemin de fer pack yet


@pytest.mark.slow
def test_observed_outcomes_are_counted_from_the_cards(rendered):
    *_, context = rendered
    o = context["outcomes"]
    assert sum(o.values()) > 2500
    assert 0.40 < o["banker"] / sum(o.values()) < 0.50


@pytest.mark.slow
def test_findings_are_attached_as_jsonl_and_csv(rendered):
    _, _, reader, _, context = rendered
    files = reader.attachments
    assert set(files) == {"findings.jsonl", "findings.csv", "ledger.json"}
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_past_the_listing_limit_tables_changes_and_sources_are_listed_one_a_line(
    night, monkeypatch
):
    """A property-wide day has thousands of tables; their rows are fixed-width lines then
    (a PDF table that long takes minutes and gigabytes). Same facts, every row."""
    monkeypatch.setattr(formatting, "LISTING_ROWS", 2)
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
    dealers = "\n".join(context["dealers_listing"]).splitlines()
    assert [x.split()[0] for x in dealers] == [d.dealer for d in context["dealers"]]
    for d, line in zip(context["dealers"], dealers, strict=True):
        day, span = line.split("|")
        m = context["dealers_span"][d.dealer]
        assert day.split()[1:5] == [f"{d.rounds:,}", f"{d.error_rounds:,}",
                                    f"{d.rate * 1000:.1f}", f"{d.upper * 1000:.1f}"]
        assert span.split()[:4] == [f"{m.count.rounds:,}", f"{m.count.error_rounds:,}",
                                    f"{m.rate * 1000:.1f}", f"{m.upper * 1000:.1f}"]
    assert any(d.error_rounds for d in context["dealers"])
    assert '<table class="by-dealer">' not in html
    assert context["dealers_listing_head"].split()[:2] == ["dealer", "rounds"]


# --- layout (issue 19) -----------------------------------------------------------------------

TEMPLATES = Path(__file__).resolve().parents[2] / "reports" / "templates"


@pytest.mark.slow
def test_a_closed_table_shows_no_procedure_after_its_close(rendered):
    """MB-04's log closes the table at 02:04:30: its lane ends there, not at 06:00 (pit P2
    looked mixed after 03:00 when MB-03 and MB-05 moved to procedure 4)."""
    *_, context = rendered
    lanes = {x["table"]: x for x in context["procedures"]["lanes"]}
    assert lanes["MB-04"]["spans"] == [
        {"from": _local(2026, 11, 28, 22), "to": _local(2026, 11, 29, 2, 4, 30), "procedure": 3}
    ]
    assert lanes["MB-04"]["closed"] == [_local(2026, 11, 29, 2, 4, 30)]
    assert [(x["procedure"], x["to"]) for x in lanes["MB-03"]["spans"]] == [
        (3, _local(2026, 11, 29, 3, 0, 21)), (4, _local(2026, 11, 29, 6))
    ]
    assert lanes["CF-01"]["spans"] == [] and lanes["CF-01"]["closed"] == []  # no procedures
    assert ">closed 02:04</text>" in context["procedures"]["timeline_svg"]


def test_a_reopened_table_starts_a_new_span_and_keeps_its_procedure():
    utc = dt.UTC
    start, end = dt.datetime(2026, 1, 1, 0, tzinfo=utc), dt.datetime(2026, 1, 1, 8, tzinfo=utc)

    def at(hour: int) -> dt.datetime:
        return dt.datetime(2026, 1, 1, hour, tzinfo=utc)

    events = [
        {"type": "table_open", "ts": at(1), "procedure": 3},
        {"type": "table_close", "ts": at(2), "procedure": None},
        {"type": "procedure_change", "ts": at(3), "procedure": 1},  # while closed: no span
        {"type": "table_open", "ts": at(4), "procedure": None},  # declares none: 1 stays
        {"type": "procedure_change", "ts": at(5), "procedure": 4},
    ]
    spans, closes = procedures.open_spans(events, start, end)
    assert spans == [(at(1), at(2), 3), (at(4), at(5), 1), (at(5), end, 4)]
    assert closes == [at(2)]


@pytest.mark.slow
def test_the_last_hour_label_of_the_timeline_is_inside_the_chart(rendered):
    """'06:00' was centred on the chart's right edge and cut in half."""
    *_, context = rendered
    svg = context["procedures"]["timeline_svg"]
    size = re.search(r'<svg [^>]*width="(\d+)"', svg)
    last = re.search(r'<text x="([\d.]+)"[^>]*text-anchor="middle"[^>]*>06:00</text>', svg)
    assert size and last
    width, x = float(size.group(1)), float(last.group(1))
    half = 11.6  # half of "06:00" in DejaVu Sans at 8 px: 4 digits of 0.636 em, a colon 0.337
    assert x + half <= width


@pytest.mark.slow
def test_card_captions_sit_under_the_card_not_across_its_border(rendered):
    *_, text, context = rendered
    html = render.render_html(context)
    assert ('<span class="card red">8<span class="suit">♦</span></span>'
            '<span class="card-cap">P #1146</span>') in html
    css = (TEMPLATES / "report.css").read_text()
    assert re.search(r"\.card-cap \{ display: block;", css)
    assert ".card .hand" not in css
    assert "8 ♦ P #1146 9 ♠ B #1147 9 ♦ P #1148 3 ♦ B #1149 Player 7, Banker 2" in text


@pytest.mark.slow
def test_page_numbers_and_change_times_do_not_wrap(rendered):
    """'page 10 of / 11' and '(seq / 3816)' broke over two lines."""
    _, _, reader, _, _ = rendered
    n = len(reader.pages)
    assert n >= 10
    for i, page in enumerate(reader.pages, 1):
        assert f"page {i} of {n}" in page.extract_text()
    raw = "\n".join(page.extract_text() for page in reader.pages)
    for change in ("02:00:49 (seq 3816)", "03:00:21 (seq 4944)", "03:00:42 (seq 4502)"):
        assert change in raw
    css = (TEMPLATES / "report.css").read_text()
    right = css[css.index("@bottom-right"):]
    assert "white-space: nowrap" in right[: right.index("}")]
    assert '<td class="nowrap">' in (TEMPLATES / "report.html.j2").read_text()


@pytest.mark.slow
def test_evidence_reads_as_lines_with_local_times_and_the_attachments_keep_utc(rendered):
    _, _, reader, text, _ = rendered
    assert "given_by: 2026-11-29 02:30:21 EST" in text
    assert "ts: 2026-11-29 03:00:21 EST" in text and "given_at: 2026-11-29 02:40:00 EST" in text
    assert "recipients: division, surveillance" in text
    assert "2026-11-29T07:30:21+00:00" not in text and '"given_by"' not in text
    jsonl = reader.attachments["findings.jsonl"][0].decode()
    csv_text = reader.attachments["findings.csv"][0].decode()
    assert '"given_by":"2026-11-29T07:30:21+00:00"' in jsonl
    assert '""given_by"": ""2026-11-29T07:30:21+00:00""' in csv_text


def test_evidence_text_nests_numbers_and_converts_only_whole_timestamps():
    zone = ZoneInfo("America/New_York")
    value = {
        "at": "2026-11-29T07:30:30+00:00",
        "line": '{"ts":"2026-11-29T00:38:23-05:00"}',  # a raw line stays as it was
        "written": True,
        "lead_seconds": 1230.0,
        "missing": [],
        "order": ["pay 7", "vig 7"],
        "notices": [{"recipient": "division", "tables": ["MB-03", "MB-04"]}, {"key": None}],
    }
    assert formatting.evidence_text(value, zone) == "\n".join([
        "at: 2026-11-29 02:30:30 EST",
        'line: {"ts":"2026-11-29T00:38:23-05:00"}',
        "written: yes",
        "lead_seconds: 1230",
        "missing: none",
        "order: pay 7, vig 7",
        "notices:",
        "  1. recipient: division",
        "     tables: MB-03, MB-04",
        "  2. key: none",
    ])
    assert formatting.evidence_text(None, zone) == "none"


@pytest.mark.slow
def test_appendix_lines_carry_the_date(rendered):
    """The shift crosses midnight and the lines run gravest first, so a bare 23:11 or 03:01
    does not say which day."""
    *_, text, context = rendered
    all_lines = "\n".join(context["appendix_blocks"]).splitlines()
    lines = [x for x in all_lines if not x.startswith(" ")]  # a wrapped message goes on below
    assert len(lines) == len(context["findings"])
    # Issue 30: a wrapped message continues under itself, in the message column.
    wrapped = [x for x in all_lines if x.startswith(" ")]
    assert wrapped and all(re.match(r" {114}\S", x) for x in wrapped)
    assert all(len(x) <= 114 + 94 for x in all_lines)
    assert all(re.match(r"2026-11-2[89] \d\d:\d\d:\d\d EST ", x) for x in lines)
    assert lines[0].startswith("2026-11-28 23:11:17 EST critical draw.banker_missed")
    assert "2026-11-29 03:02:09 EST critical draw.player_extra" in text


@pytest.mark.slow
def test_the_document_says_what_is_attached_and_how_to_open_it(rendered):
    *_, text, context = rendered
    n = len(context["findings"])
    note = (f"Attached to this PDF: findings.csv (a header row, then one row a finding, for a "
            f"spreadsheet) and findings.jsonl (one JSON record a line, for other systems), both "
            f"holding all {n} findings of this report")
    assert text.count(note) == 2  # on the cover and above the findings
    assert "attachments panel (paperclip icon)" in text
    assert "pdfdetach -saveall" in text


@pytest.mark.slow
def test_a_database_of_one_night_says_the_30_days_rest_on_it(rendered):
    """Issue 17: the By dealer page and the trend cover the last 30 gaming days; the sample
    database holds one, and both pages say so rather than read it as a month."""
    *_, text, context = rendered
    assert "Only 1 of the 30 gaming days has rounds (the first: 2026-11-28)" in text
    assert ("No rounds on the 29 gaming days from 2026-10-30 to 2026-11-27: 1 of the 30 days "
            "has data.") in text
    [day] = context["trend_days"]
    assert day.day == dt.date(2026, 11, 28) and day.rounds >= context["rounds"]
    assert f"2026-11-28 {day.rounds:,} {day.findings:,} {day.per_1000:.1f}" in text
    # Issue 30: one day is no trend: no chart of a grey box and a dot, a sentence instead.
    assert context["chart_trend"] == ""
    assert ("No chart: only 1 of the last 30 gaming days has rounds, and a trend needs two; "
            "the table below gives its figures.") in text
    # One night: each dealer's 30 days are the gaming day's rounds, this shift's among them.
    for d in context["dealers"]:
        assert context["dealers_span"][d.dealer].count.rounds >= d.rounds


@pytest.mark.slow
def test_the_outcome_chart_sets_the_banking_rounds_against_their_exact_odds(rendered, night):
    """Issue 30: with a chemin de fer table in the shift, the exact bars are the banking
    tables' odds (published: Banker 45.86 %, Player 44.62 %, Tie 9.52 % at 8 decks; 45.87 /
    44.63 / 9.51 at 6), the observed bars those tables' decided rounds only, and the chemin de
    fer rounds are named as left out."""
    *_, text, context = rendered
    charted = context["outcomes_charted"]
    cdf = context["outcomes_left_out"]["chemin de fer"]
    m = re.search(
        r"Round outcomes of the banking games: observed \(([\d,]+) rounds\) against exact "
        r"probability observed exact \(rule pack\) ([\d.]+)% ([\d.]+)% Banker ([\d.]+)% "
        r"([\d.]+)% Player ([\d.]+)% ([\d.]+)% Tie", text)
    assert m, text[text.find("Round outcomes"):][:600]
    assert int(m.group(1).replace(",", "")) == charted
    labels = [float(x) for x in m.groups()[1:]]
    observed, exact = labels[0::2], labels[1::2]  # each bar pair: observed, then exact
    assert exact == [45.9, 44.6, 9.5]
    assert abs(sum(observed) - 100) <= 0.2
    banking = {t["table_id"] for t in context["tables"] if t["game"] != "chemin_de_fer"}
    con = db.connect(night, read_only=True)
    try:
        scope = context["scope"]
        cards = con.execute(
            """SELECT e.table_id, e.shoe, e.round, e.to_hand, e.card FROM events e
               JOIN (SELECT DISTINCT table_id, shoe, round FROM events
                     WHERE type = 'round_start' AND ts >= ? AND ts < ?)
               USING (table_id, shoe, round)
               WHERE e.type = 'card'""", [scope.start, scope.end]).fetchall()
    finally:
        con.close()
    hands: dict[tuple, dict[str, list[int]]] = {}
    for table, shoe, rnd, hand, card in cards:
        if table in banking:
            value = min(10, "A23456789T".index(card[0]) + 1) % 10 if card[0] in "A23456789" else 0
            hands.setdefault((table, shoe, rnd), {"player": [], "banker": []})[hand].append(value)
    winners = Counter(
        "player" if sum(h["player"]) % 10 > sum(h["banker"]) % 10
        else "banker" if sum(h["banker"]) % 10 > sum(h["player"]) % 10 else "tie"
        for h in hands.values() if len(h["player"]) + len(h["banker"]) >= 4
    )
    assert sum(winners.values()) == charted
    assert observed == [round(100 * winners[k] / charted, 1) for k in ("banker", "player", "tie")]
    assert cdf > 0
    assert f"The {cdf:,} chemin de fer rounds are left out" in text


@pytest.mark.slow
def test_the_html_report_is_worded_for_a_page(night, tmp_path):
    """Issue 30: a web page has no attachments panel and no page to fill: it says where the
    findings files are instead, and lists every finding that needs action."""
    con = db.connect(night, read_only=True)
    conf = config.PropertyConfig(name="Harbor Point Casino", time_zone="America/New_York")
    scope = gather.scope_for(conf, con, shift=SHIFT)
    context = gather.gather(con, conf, scope)
    out = render.write_report(con, conf, scope, tmp_path / "grave.html", fmt="html")
    con.close()
    html = out.read_text()
    assert "Attached to this PDF" not in html and "paperclip" not in html
    assert "This page has no attachments: the PDF of this report carries findings.csv" in html
    pending = context["needs_action_all"]
    assert len(pending) == context["needs_action_total"]
    cover = html.split("<h2>Needs action</h2>")[1].split("</table>")[0]
    assert [m for m in re.findall(r"<tr><td>(F[0-9a-f]+)</td>", cover)] == [
        f["id"] for f in pending]
    assert "more, in the Findings section" not in html


@pytest.mark.slow
def test_the_code_table_gives_each_codes_severity_and_a_whole_shoe_finding_no_round(rendered):
    *_, text, context = rendered
    assert "draw.banker_missed critical" in text
    shoe_level = {**context["details"][0], "round": None, "source": None}
    html = render.render_html({**context, "details": [shoe_level],
                               "needs_action": [{**context["needs_action"][0], "round": None}]})
    assert "Source: None" not in html and "rNone" not in html and " rNone" not in html


@pytest.mark.slow
def test_past_the_limits_the_report_shows_what_needs_action_and_counts_the_rest(
    night, monkeypatch
):
    """Issue 30: a night of thousands of findings stays a report a person reads: in full only
    what needs action (critical and major, not acknowledged) up to the limit, Appendix A a
    line per code, table and dealer, each finding still in the attached files; the cover
    says so. Limits lowered here so the sample night crosses them."""
    from auditor.report import appendix, details

    monkeypatch.setattr(details, "DETAIL_LIMIT", 5)
    monkeypatch.setattr(appendix, "APPENDIX_LINES", 10)
    con = db.connect(night, read_only=True)
    conf = config.PropertyConfig(time_zone="America/New_York")
    context = gather.gather(con, conf, gather.scope_for(conf, con, date="2026-11-28"))
    con.close()
    found = context["findings"]
    needs = [f["id"] for f in found if f["severity"] in ("critical", "major") and not f["ack"]]
    assert len(found) > 10 and len(needs) > 5
    assert [f["id"] for f in context["details"]] == needs[:5]
    assert context["appendix_blocks"] == []
    lines = "\n".join(context["appendix_groups"]).splitlines()
    expected = Counter((f["code"], f["table"] or f["pit"] or "", f["dealer"] or "")
                       for f in found)
    got = {(x.split()[0], x[38:46].strip(), x[47:63].strip()): int(x[64:72].replace(",", ""))
           for x in lines}
    assert got == dict(expected)
    assert lines[0].split()[:2] == [found[0]["code"], found[0]["severity"]]
    html = render.render_html(context)
    assert (f"{len(found):,}: too many to show each in full, so the Findings section shows 5 "
            "(those that need action, gravest first) and Appendix A counts them by code, table "
            "and dealer; every one is in the attached files") in html
    assert f"shown are the 5 gravest that need action (critical and major, not acknowledged) " \
           f"of {len(needs)}" in html


@pytest.mark.slow
def test_sign_off_heads_the_summary_page_and_no_table_row_is_split(rendered):
    """Issue 30's layout: Sign-off was alone on page 2 when Needs action filled the cover,
    and a Tables row ran across a page end."""
    _, _, reader, _, context = rendered
    pages = [re.sub(r"\s+", " ", p.extract_text()) for p in reader.pages]
    assert "Needs action" in pages[0] and "Sign-off" not in pages[0]
    # Page 2 may begin with the end of a long Needs action; Sign-off then, the summary under it.
    signoff = pages[1].index("Sign-off I have reviewed this report")
    assert signoff < pages[1].index("Summary") < pages[1].index("critical major minor info")
    for t in context["tables"]:
        # A row's table id and its rounds figure are on the same page.
        assert any(f"{t['table_id']} " in p and f" {t['rounds']:,} " in
                   p[p.index(f"{t['table_id']} "):] for p in pages), t["table_id"]


def test_no_bar_label_of_the_outcome_chart_runs_into_its_legend():
    """Issue 30: the tallest bar's percentage was written over the legend."""
    from auditor.report import charts

    svg = charts.paired_bars(["Banker", "Player", "Tie"], [0.46, 0.45, 0.09],
                             [0.4586, 0.4462, 0.0952], "t", ("observed", "exact (rule pack)"))
    legend_bottom = max(float(y) + float(h) for y, h in
                        re.findall(r'<rect x="[\d.]+" y="([\d.]+)" width="9" height="(\d+)"', svg))
    labels = [(float(y), int(size)) for y, size in
              re.findall(r'y="([\d.]+)" font-size="(\d+)" text-anchor="middle" fill="[^"]+">'
                         r"[\d.]+%</text>", svg)]
    assert len(labels) == 6
    assert min(y - size for y, size in labels) > legend_bottom
