"""The installable wheel: built from this tree, installed into a fresh venv, run from another
directory, it ingests, audits and reports the sample night exactly as the checkout does.

The rule packs and templates live at the top of the repository; only the wheel's own copy
(auditor/_shipped/) can serve an installed tool, so this is the test that they ship. The fresh
venv gets the wheel alone (no index, no deps); the third-party packages it needs come from this
test's own environment through a path file, which keeps the test off the network. That the
wheel declares those dependencies is checked against pyproject.toml.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import tomllib
import venv
import zipfile
from pathlib import Path

import duckdb
import pytest
from helpers.sample import built
from pypdf import PdfReader

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_logs"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "--wheel-dir", str(out), str(ROOT)],
        check=True,
    )
    [built] = out.glob("bacc_audit-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel installed (its entry point included); returns its bin/."""
    home = tmp_path_factory.mktemp("venv")
    venv.create(home, with_pip=False)
    python = home / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
         "--no-deps", "--no-index", str(wheel)],
        check=True,
    )
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()
    (Path(purelib) / "_deps_of_this_test.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return home / "bin"


def run(bin_dir: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("BACC_AUDIT_RULES", "BACC_AUDIT_DB", "BACC_AUDIT_CONFIG", "PYTHONPATH")}
    return subprocess.run([str(bin_dir / "bacc-audit"), *args], cwd=cwd, env=env,
                          capture_output=True, text=True)


def test_the_wheel_carries_the_rule_packs_templates_and_schema(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    packs = sorted(p.name for p in (ROOT / "rules").glob("*.toml"))
    folder = ROOT / "reports" / "templates"
    templates = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    assert packs and templates
    for name in packs:
        assert f"auditor/_shipped/rules/{name}" in names
    for name in templates:
        assert f"auditor/_shipped/reports/templates/{name}" in names
    assert "auditor/ingest/schema/event-log-v1.schema.json" in names
    # The published side-bet counts, in a folder of their own beside the packs.
    assert "auditor/_shipped/rules/surveillance/side_bet_counts.toml" in names
    assert not any(n.startswith(("tests/", "bench/", "sample_logs/")) for n in names)


def test_the_wheel_declares_the_dependencies_of_pyproject(wheel: Path) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    with zipfile.ZipFile(wheel) as z:
        [meta] = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        text = z.read(meta).decode()
    required = {line.split(": ", 1)[1] for line in text.splitlines()
                if line.startswith("Requires-Dist: ") and "extra ==" not in line}
    assert required == set(project["dependencies"])
    assert "License-Expression: Apache-2.0" in text


def test_installed_from_the_wheel_it_audits_the_sample_night_from_any_directory(
    installed: Path, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    located = subprocess.run(
        [str(installed / "python"), "-c",
         "import auditor; from auditor.shipped import shipped; "
         "print(auditor.__file__, shipped('rules'), shipped('reports/templates'))"],
        cwd=tmp_path, capture_output=True, text=True, check=True,
    ).stdout.split()
    for path in located:  # the package, packs and templates are the wheel's own copies
        assert Path(path).is_relative_to(installed.parent), path
    assert run(installed, tmp_path, "doctor").returncode == 0

    db = tmp_path / "night.duckdb"
    ingest = run(installed, tmp_path, "ingest", str(SAMPLE), "--db", str(db))
    assert ingest.returncode == 1, ingest.stderr  # the sample holds a malformed line
    audit = run(installed, tmp_path, "audit", "--db", str(db),
                "--config", str(SAMPLE / "property.toml"))
    assert audit.returncode == 1, audit.stderr  # and planted deviations
    found = run(installed, tmp_path, "findings", "--db", str(db), "--format", "jsonl")
    codes = sorted(json.loads(line)["code"] for line in found.stdout.splitlines())
    pdf = tmp_path / "swing.pdf"  # the sample's shortest report (5 pages; the grave's 15)
    report = run(installed, tmp_path, "report", "--db", str(db), "--config",
                 str(SAMPLE / "property.toml"), "--shift", "2026-11-28/swing", "--out", str(pdf))
    assert report.returncode == 0, report.stderr
    text = "".join(page.extract_text() for page in PdfReader(pdf).pages)

    # the same night through the checkout's own code (the database built once for the run)
    with duckdb.connect(str(built(tmp_path_factory, tmp_path / "ref.duckdb", True)),
                        read_only=True) as ref:
        assert codes == [c for c, in ref.execute(
            "SELECT code FROM current_findings ORDER BY code").fetchall()]
    assert len(codes) == 22
    assert "draw.banker_missed" in codes and "log.malformed" in codes
    assert "settle.wrong_amount" in text and "Harbor Point Casino (sample)" in text
