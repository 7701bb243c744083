"""`bacc-audit doctor`: is this machine able to ingest, audit and render reports?"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

Check = tuple[bool, str, str]  # (passed, what was checked, what to do when it failed)


def checks(db_path: Path) -> Iterator[Check]:
    yield _weasyprint()
    yield _fonts()
    yield _rule_packs()
    yield _database(db_path)


def _weasyprint() -> Check:
    try:
        import weasyprint

        weasyprint.HTML(string="<p>ok</p>").write_pdf()
        return True, f"weasyprint {weasyprint.__version__} renders PDF", ""
    except Exception as e:  # OSError when Pango is missing, among others
        return (
            False,
            f"weasyprint cannot render PDF ({type(e).__name__}: {e})",
            "install Pango: Debian/Ubuntu `apt-get install libpango-1.0-0 libpangoft2-1.0-0`; "
            "macOS `brew install pango`",
        )


def _fonts() -> Check:
    fc = shutil.which("fc-list")
    if not fc:
        return False, "fontconfig not found (fc-list)", "install fontconfig and fonts-dejavu-core"
    listed = subprocess.run([fc, ":family=DejaVu Sans"], capture_output=True, text=True).stdout
    if listed.strip():
        return True, "font DejaVu Sans (card suits, tables) installed", ""
    return (
        False,
        "font DejaVu Sans not installed: reports fall back to another font, suits may not show",
        "Debian/Ubuntu: `apt-get install fonts-dejavu-core`",
    )


def _rule_packs() -> Check:
    from auditor.rules.pack import RulePackError, list_packs, load_pack_file

    try:
        refs = list_packs()
        for ref in refs:
            load_pack_file(ref.path)
    except (RulePackError, OSError) as e:
        return (
            False,
            f"rule packs do not load: {e}",
            "fix the pack named above, or set BACC_AUDIT_RULES",
        )
    if not refs:
        return False, "no rule packs found", "set BACC_AUDIT_RULES to the folder of rules/*.toml"
    names = ", ".join(f"{r.jurisdiction} {r.game}" for r in refs)
    return True, f"{len(refs)} rule packs load ({names})", ""


def _database(path: Path) -> Check:
    from auditor.errors import UserError
    from auditor.store import db

    if not Path(path).exists():
        return True, f"{path}: no database yet (bacc-audit ingest creates it)", ""
    try:
        con = db.connect(path, read_only=True)
        n = con.execute("SELECT count(*) FROM events").fetchall()[0][0]
        con.close()
    except UserError as e:
        return False, str(e), "another process may be writing; try again when it has finished"
    return True, f"{path}: readable, {n:,} events", ""
