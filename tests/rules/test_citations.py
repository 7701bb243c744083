"""Citations come from the rule pack (issue 15, point 4): each pack maps the codes it can
raise to its own provisions, and a finding cites its table's pack, so a jurisdiction added as
a rule file cites only its own rules, with no engine change."""

from __future__ import annotations

import gzip
import json
import re
import shutil
import tomllib
from pathlib import Path

import pytest
from helpers.pdfs import pdf_text
from helpers.sample import built

from auditor.rules.codes import REGISTRY
from auditor.rules.pack import RULES_ENV, RulePackError, load_pack, load_pack_file
from auditor.shipped import shipped

SAMPLE = Path(__file__).resolve().parents[2] / "sample_logs"
CONFIG = SAMPLE / "property.toml"
SHIPPED = [("NJ", "mini_baccarat"), ("NJ", "punto_banco"), ("NZ", "mini_baccarat"),
           ("NJ", "chemin_de_fer")]


@pytest.mark.parametrize(("jurisdiction", "game"), SHIPPED)
def test_every_shipped_pack_cites_exactly_the_codes_it_can_raise(jurisdiction, game):
    pack = load_pack(jurisdiction, game, shipped("rules"))
    raisable = {c for c in REGISTRY if pack.can_raise(c)}
    assert set(pack.citations) == raisable
    for code, text in pack.citations.items():
        # Its own jurisdiction's text, or a house option of this very pack.
        own = "N.J.A.C." if jurisdiction == "NJ" else "NZ Gazette 1996"
        assert own in text or "of this pack" in text, (code, text)
        other = "NZ Gazette" if jurisdiction == "NJ" else "N.J.A.C."
        assert other not in text, (code, text)


def test_what_each_pack_can_raise_follows_its_game_and_rules():
    nj = load_pack("NJ", "mini_baccarat", shipped("rules"))
    nz = load_pack("NZ", "mini_baccarat", shipped("rules"))
    cf = load_pack("NJ", "chemin_de_fer", shipped("rules"))
    # NZ has no payout procedures, no automated shuffler, no face-up rule, no dragon 7 call.
    for code in ("procedure.notice_missing", "order.procedure_mismatch",
                 "shoe.batch_not_alternated", "shoe.void_required", "announce.dragon7_missing"):
        assert nj.can_raise(code) and not nz.can_raise(code), code
    assert nz.can_raise("irregularity.disposition") and not nj.can_raise("irregularity.disposition")
    assert cf.can_raise("chemin.priority") and not nj.can_raise("chemin.priority")
    assert not cf.can_raise("vig.missing")
    # The log codes are the format's: no pack raises them, each cites the format.
    for code in ("log.altered", "log.malformed", "log.seq_gap"):
        assert not any(p.can_raise(code) for p in (nj, nz, cf))
        assert REGISTRY[code].rule.startswith("Event log v1")
    assert nj.cite("procedure.notice_late") == "N.J.A.C. 13:69F-7.10(c)3"
    assert nz.cite("draw.banker_missed").startswith("NZ Gazette 1996 No 7, Mini Baccarat rules 9.4")
    # A code raised all the same where the pack has no citation says so, citing no one else.
    assert nz.cite("vig.not_allowed") == (
        "No vigorish under a variant that charges none "
        "(rule pack nz-mini_baccarat cites no provision for vig.not_allowed)"
    )


def _pack_copy(tmp_path: Path, edit) -> Path:
    rules = tmp_path / "rules"
    shutil.copytree(shipped("rules"), rules)
    path = rules / "nj-mini_baccarat.toml"
    path.write_text(edit(path.read_text()))
    return path


def test_a_pack_missing_a_citation_is_refused_naming_the_code(tmp_path):
    path = _pack_copy(tmp_path, lambda t: re.sub(r'\n"vig\.missing" = .*', "", t))
    with pytest.raises(RulePackError) as e:
        load_pack_file(path)
    assert str(e.value) == (
        f"{path}: citations has no provision for vig.missing, which this pack can raise."
    )


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('"log.altered" = "N.J.A.C. 13:69F-1"',
         "cannot be raised at this pack's tables: the event log format defines it, not a "
         "rule pack."),
        ('"chemin.priority" = "N.J.A.C. 13:69F-4.7(b)"',
         "cannot be raised at this pack's tables: only chemin_de_fer tables raise it."),
        ('"draw.late" = "N.J.A.C. 13:69F-7.7"', "is not a finding code (bacc-audit codes)."),
        ('"deal.order" = ""', "must be a provision, as text."),
    ],
)
def test_a_citation_the_pack_cannot_use_is_refused(tmp_path, line, problem):
    code = line.split('"')[1]

    def edit(text: str) -> str:
        text = re.sub(rf'\n"{re.escape(code)}" = .*', "", text)
        return text.replace("[citations]\n", f"[citations]\n{line}\n")

    path = _pack_copy(tmp_path, edit)
    with pytest.raises(RulePackError) as e:
        load_pack_file(path)
    assert str(e.value) == f"{path}: citations.{code} {problem}"


def test_a_pack_without_citations_is_refused(tmp_path):
    path = _pack_copy(tmp_path, lambda t: t.split("[citations]")[0])
    with pytest.raises(RulePackError, match="citations is missing; a pack cites a provision"):
        load_pack_file(path)


# --- A new jurisdiction, as a rule file and nothing else ------------------------------------


def _xanadu(tmp_path: Path) -> Path:
    """The shipped packs and a copy of NJ mini-baccarat as jurisdiction XX, citing its own
    (made-up) rules for every code."""
    rules = tmp_path / "rules"
    shutil.copytree(shipped("rules"), rules)
    text = (rules / "nj-mini_baccarat.toml").read_text()
    head, _, _ = text.partition("[citations]\n")
    head = head.replace('id = "nj-mini_baccarat"', 'id = "xx-mini_baccarat"')
    head = head.replace('jurisdiction = "NJ"', 'jurisdiction = "XX"', 1)
    codes = tomllib.loads(text)["citations"]
    lines = [f'"{c}" = "Xanadu Gaming Rules r. {i + 1} ({c})"' for i, c in enumerate(codes)]
    (rules / "xx-mini_baccarat.toml").write_text(head + "[citations]\n" + "\n".join(lines) + "\n")
    return rules


def _logs_at(tmp_path: Path, jurisdiction: str) -> Path:
    """The sample night with its mini-baccarat tables under `jurisdiction`."""
    logs = tmp_path / f"logs-{jurisdiction}"
    logs.mkdir()
    for src in sorted(SAMPLE.glob("2026-11-28_*.jsonl*")):
        opener = gzip.open if src.suffix == ".gz" else open
        with opener(src, "rt") as f:
            text = f.read()
        text = text.replace(
            '"game":"mini_baccarat","jurisdiction":"NJ"',
            f'"game":"mini_baccarat","jurisdiction":"{jurisdiction}"',
        )
        (logs / src.name.removesuffix(".gz")).write_text(text)
    return logs


def _findings(bacc_audit, logs: Path, db: Path) -> list[dict]:
    assert bacc_audit("ingest", logs, "--db", db).code in (0, 1)
    assert bacc_audit("audit", "--db", db, "--config", CONFIG).code == 1
    return _listed(bacc_audit, db)


def _listed(bacc_audit, db: Path) -> list[dict]:
    run = bacc_audit("findings", "--db", db, "--config", CONFIG, "--format", "jsonl")
    assert run.code == 0, run.err
    return [json.loads(line) for line in run.out.splitlines()]


@pytest.mark.slow
def test_a_new_jurisdiction_is_a_rule_file_and_its_findings_cite_only_its_rules(
    tmp_path, tmp_path_factory, bacc_audit, monkeypatch
):
    # Under NJ, the sample night as audited once for the whole run (helpers/sample.py).
    nj_db = built(tmp_path_factory, tmp_path / "nj.duckdb", with_mb01=True)
    nj = _listed(bacc_audit, nj_db)
    monkeypatch.setenv(RULES_ENV, str(_xanadu(tmp_path)))
    xx = _findings(bacc_audit, _logs_at(tmp_path, "XX"), tmp_path / "xx.duckdb")

    def where(f: dict) -> tuple:
        return (f["code"], f["table"], f["shoe"], f["round"], f["seq"])

    # The same rules under another name: the same deviations, found without an engine change.
    assert sorted(map(where, xx)) == sorted(map(where, nj))
    mini = {"MB-01", "MB-02", "MB-03", "MB-04", "MB-05"}
    at_xx = [f for f in xx if f["table"] in mini]
    assert {f["code"] for f in at_xx} >= {"draw.banker_missed", "settle.wrong_amount",
                                          "vig.wrong_amount", "order.collect_after_pay"}
    for f in at_xx:
        assert re.fullmatch(rf"Xanadu Gaming Rules r\. \d+ \({re.escape(f['code'])}\)",
                            f["rule"]), f
    # The pit P2 notices at the mini-baccarat tables: Xanadu's rule, not 13:69F-7.10(c)3.
    late = [f for f in xx if f["code"] == "procedure.notice_late"]
    assert late and all(f["rule"].startswith("Xanadu Gaming Rules") for f in late)
    assert not any("N.J.A.C." in f["rule"] or "NZ Gazette" in f["rule"] for f in at_xx)
    # The other tables keep their own packs' provisions.
    for f in xx:
        if f["code"].startswith("log."):
            assert f["rule"] == REGISTRY[f["code"]].rule
        elif f["table"] in ("PB-01", "CF-01"):
            assert "N.J.A.C." in f["rule"] or "of this pack" in f["rule"], f
        elif f["table"] == "NZ-01":
            assert "NZ Gazette" in f["rule"] or "of this pack" in f["rule"], f
    # And the PDF a compliance officer signs shows the table's own provision.
    out = tmp_path / "xx.pdf"
    run = bacc_audit("report", "--db", tmp_path / "xx.duckdb", "--config", CONFIG,
                     "--shift", "2026-11-28/grave", "--out", out)
    assert run.code == 0, run.err
    text = pdf_text(out)
    assert "Rule: Xanadu Gaming Rules r. 3 (draw.banker_missed)" in text
    assert "Rule: Xanadu Gaming Rules r. 20 (procedure.notice_late)" in text
