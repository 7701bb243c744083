"""What the shift audit report shows, read from the database (DuckDB does the sums).

The page is built section by section: each `section_*` function gives the keys of the
template context its part of reports/templates/report.html.j2 reads, from a `Basis`
(basis.py) that holds what several sections share (the tables in scope, their rule packs, the
findings), read once. The sections live by family: front.py (cover, needs action, summary),
table_figures.py, procedures.py, history.py (dealers, trend), details.py (findings in full,
side wagers), appendix.py (findings listed, sources). `gather` only assembles them in the
order of SECTIONS, so a new section of the report is one function in a family module, one
line here and one block in the template. Turning the context into HTML and PDF is
auditor.report.render. Nothing here reads the clock of the machine that renders: the same
database and arguments give the same context.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import duckdb

from auditor.config import PropertyConfig, parse_date, parse_shift
from auditor.errors import UserError
from auditor.report.appendix import section_appendix, section_sources
from auditor.report.basis import Basis, Scope, read_basis
from auditor.report.details import section_findings, section_side_bets
from auditor.report.front import (
    section_cover,
    section_ledger,
    section_needs_action,
    section_summary,
)
from auditor.report.history import section_dealers, section_trend
from auditor.report.procedures import section_procedures
from auditor.report.table_figures import section_tables
from auditor.store.stamps import refuse_impossible_stamps


def scope_for(
    conf: PropertyConfig,
    con: duckdb.DuckDBPyConnection,
    shift: str | None = None,
    date: str | None = None,
    pit: str | None = None,
    table: str | None = None,
) -> Scope:
    zone = conf.zone_for(con)
    if shift:
        day, name = parse_shift(shift)
        start, end = conf.shift_window(day, name, zone)
        title, slug = f"{name} shift of gaming day {day:%Y-%m-%d}", f"{day:%Y-%m-%d}_{name}"
    elif date:
        day = parse_date(date)
        start, end = conf.gaming_day_window(day, zone)
        title, slug = f"gaming day {day:%Y-%m-%d}", f"{day:%Y-%m-%d}"
    else:
        raise UserError("name the period: --shift GAMING-DAY/NAME or --date GAMING-DAY")
    if pit:
        title, slug = f"{title}, pit {pit}", f"{slug}_{pit}"
    if table:
        title, slug = f"{title}, table {table}", f"{slug}_{table}"
    return Scope(title, slug, start, end, zone, pit, table)


Section = Callable[[Basis], dict[str, Any]]
# In the order of the page. Each section owns its keys: no two give the same one.
SECTIONS: tuple[Section, ...] = (
    section_cover,
    section_needs_action,
    section_summary,
    section_tables,
    section_procedures,
    section_dealers,
    section_trend,
    section_side_bets,
    section_findings,
    section_appendix,
    section_sources,
    section_ledger,
)


def gather(con: duckdb.DuckDBPyConnection, conf: PropertyConfig, scope: Scope) -> dict[str, Any]:
    """Everything the report shows, as plain values: the keys of every section together.
    A database holding a time no clock can show is refused first, naming where."""
    refuse_impossible_stamps(con)
    basis = read_basis(con, conf, scope)
    context: dict[str, Any] = {"for_web": False}  # render_report sets it for an HTML page
    for section in SECTIONS:
        part = section(basis)
        assert not part.keys() & context.keys(), f"{section.__name__} repeats a key"
        context.update(part)
    return context

