"""docs/codes.md, written from the registry of finding codes (auditor.rules.codes) and the
rule packs' citations: the page is generated, never edited by hand (`bacc-audit codes
--markdown`), and a test keeps the file in step."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from auditor.rules.codes import REGISTRY


def markdown(citations: Sequence[tuple[str, Mapping[str, str]]] = ()) -> str:
    """docs/codes.md, generated from the registry and the citations of the rule packs given
    as (pack id, {code: provision}) (a test keeps the file in step)."""
    lines = [
        "# Finding codes",
        "",
        "Generated from `auditor/rules/codes.py` and the `[citations]` of the rule packs in",
        "`rules/` by `bacc-audit codes --markdown > docs/codes.md`; do not edit by hand. A code,",
        "once published, keeps its meaning.",
        "",
        "The scope says what a finding concerns: `round` (one round of any game), `table` (a",
        "table or pit: its procedures and their notices), `shoe`, `log` (the event log itself),",
        "`chemin` (the chemin de fer rules of a coup) or `dealer` (a dealer over a shift).",
        "",
        "A finding cites the provision of its own table's rule pack: each pack maps every code",
        "it can raise to its provisions, and the list under each code below is read from the",
        "packs shipped. A code's rule names what the rule is about in words true of every",
        "jurisdiction; the `log` codes cite the event log format, which is the same everywhere,",
        "and `dealer.error_rate`, the shoe-integrity codes and `play.side_bet_counting` the",
        "house's own controls, which are no jurisdiction's.",
        "",
        "| code | severity | scope | title |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| [`{c.code}`](#{c.code.replace('.', '')}) | {c.severity_text} | {c.scope} | {c.title} |"
        for c in REGISTRY.values()
    ]
    for c in REGISTRY.values():
        lines += ["", f"## {c.code}", ""]
        if not c.games:
            lines.append(
                f"**{c.title}.** Severity: {c.severity_text}. Scope: {c.scope}. "
                f"Provision: {c.rule}."
            )
        else:
            lines.append(
                f"**{c.title}.** Severity: {c.severity_text}. Scope: {c.scope}. Rule: {c.rule}."
            )
            cited = [(pack, texts[c.code]) for pack, texts in citations if c.code in texts]
            if cited:
                lines += ["", "Provision, by rule pack:", ""]
                lines += [f"- `{pack}`: {text}" for pack, text in cited]
            else:
                lines += ["", "No rule pack shipped can raise it."]
        lines += [
            "",
            c.why,
            "",
            f"- Faulty: {c.faulty}",
            f"- Correct: {c.correct}",
        ]
    return "\n".join(lines) + "\n"
