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
    as_json: Annotated[bool, typer.Option("--json", help="Print the registry as JSON.")] = False,
    as_markdown: Annotated[
        bool, typer.Option("--markdown", help="Print docs/codes.md (generated from the registry).")
    ] = False,
) -> None:
    """List every finding code with its severity, its rule, the provision each rule pack
    cites for it, and why it matters. The packs are those in use (BACC_AUDIT_RULES, else the
    packs shipped); --markdown always documents the packs shipped."""
    from auditor.rules.codes import REGISTRY
    from auditor.rules.codes_page import markdown
    from auditor.rules.pack import RulePackError, citations
    from auditor.shipped import shipped

    if as_markdown:
        sys.stdout.write(markdown(citations(shipped("rules"))))
        return
    try:
        cited = citations()
    except (RulePackError, OSError) as e:
        raise UserError(f"the rule packs cannot be read: {e}") from None
    out = console.out
    if as_json:
        rows = [
            {**vars(c), "citations": {p: texts[c.code] for p, texts in cited if c.code in texts}}
            for c in REGISTRY.values()
        ]
        out.print_json(json.dumps(rows))
        return
    for c in REGISTRY.values():
        out.print(f"{c.code}  ({c.severity_text})  {c.title}")
        out.print(f"    rule: {c.rule}")
        for pack, texts in cited:
            if c.code in texts:
                out.print(f"      {pack}: {texts[c.code]}")
        out.print(f"    why:  {c.why}")
