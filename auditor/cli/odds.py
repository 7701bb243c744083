"""`bacc-audit odds`: exact probabilities and house edges of a rule pack (auditor.rules.odds)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from auditor.cli import console
from auditor.cli.options import JsonOption
from auditor.errors import UserError


def odds_cmd(
    decks: Annotated[int, typer.Option(min=1, max=16, help="Decks in the shoe.")] = 8,
    variant: Annotated[
        str | None, typer.Option(help="Only this variant's house edges (default: all).")
    ] = None,
    jurisdiction: Annotated[str, typer.Option(help="Rule pack jurisdiction.")] = "NJ",
    game: Annotated[str, typer.Option(help="Rule pack game.")] = "mini_baccarat",
    as_json: JsonOption = False,
) -> None:
    """Exact probabilities and house edges by complete enumeration of a finite shoe.

    Every ordered deal of the shoe is counted with the rule pack's own draw tables, so the
    figures are the pack's rules, not a textbook's.
    """
    from auditor.rules.odds import odds_report
    from auditor.rules.pack import RulePackError, load_pack

    try:
        pack = load_pack(jurisdiction, game)
    except (RulePackError, FileNotFoundError) as e:
        raise UserError(str(e)) from None
    if pack.game == "chemin_de_fer":
        raise UserError(
            "odds are for the banking games (mini_baccarat, punto_banco): at chemin de fer "
            "the participants play against each other, and the option cells make the odds "
            "depend on the players' choices"
        )
    report = odds_report(pack, decks)
    if variant:
        if variant not in report["house_edge"]:
            known = ", ".join(report["house_edge"])
            raise UserError(f"{pack.id} has no variant {variant!r} (it has: {known})")
        report["house_edge"] = {variant: report["house_edge"][variant]}
    out = console.out
    if as_json:
        out.print_json(json.dumps(report, default=str))
        return
    out.print(f"{report['pack']}, {decks} decks, {report['sequences']:,} ordered deals")
    out.print("probability")
    for k, p in report["probability"].items():
        out.print(f"  {k:<16} {p}")
    for name, edges in report["house_edge"].items():
        out.print(f"house edge, variant {name}")
        for k, edge in edges.items():
            out.print(f"  {k:<16} {edge * 100:.4f}%")
