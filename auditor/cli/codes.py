"""`bacc-audit codes`: the registry of finding codes, with what each rule pack cites for them
(auditor.rules.codes)."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from auditor.cli import console
from auditor.errors import UserError


def codes_cmd(
    code: Annotated[
        str | None,
        typer.Argument(
            metavar="[CODE]",
            help="Only this code (`*` matches any text: draw.*), e.g. draw.banker_missed.",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the registry as JSON.")] = False,
    as_markdown: Annotated[
        bool, typer.Option("--markdown", help="Print docs/codes.md (generated from the registry).")
    ] = False,
) -> None:
    """List every finding code (or the one asked for) with its severity, its rule, the
    provision each rule pack cites for it, and why it matters. The packs are those in use
    (BACC_AUDIT_RULES, else the packs shipped); --markdown always documents the packs
    shipped, every code."""
    from auditor.rules.codes import REGISTRY
    from auditor.rules.codes_page import markdown
    from auditor.rules.pack import RulePackError, citations
    from auditor.shipped import shipped
    from auditor.store.filters import code_pattern, near

    if as_markdown:
        if code is not None:
            raise UserError("--markdown documents every code; leave out the code")
        sys.stdout.write(markdown(citations(shipped("rules"))))
        return
    chosen = list(REGISTRY.values())
    if code is not None:
        pattern = code_pattern(code.strip().lower())  # the codes are lower case
        chosen = [c for c in chosen if pattern.fullmatch(c.code)]
        if not chosen:
            raise UserError(
                f"{code}: no such finding code{near(code.strip(), list(REGISTRY))} "
                "(bacc-audit codes lists them; * matches any text, as in draw.*)"
            )
    try:
        cited = citations()
    except (RulePackError, OSError) as e:
        raise UserError(f"the rule packs cannot be read: {e}") from None
    out = console.out
    if as_json:
        rows = [
            {**vars(c), "citations": {p: texts[c.code] for p, texts in cited if c.code in texts}}
            for c in chosen
        ]
        out.print_json(json.dumps(rows))
        return
    for c in chosen:
        out.print(f"{c.code}  ({c.severity_text})  {c.title}")
        out.print(f"    rule: {c.rule}")
        for pack, texts in cited:
            if c.code in texts:
                out.print(f"      {pack}: {texts[c.code]}")
        out.print(f"    why:  {c.why}")
