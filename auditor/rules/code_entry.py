"""What an entry of the finding-code registry is (`Code`), and the severities, scopes and
games it names: apart from the registry's data (auditor.rules.codes) so that the data can be
read without the machinery, and the machinery without 70 entries."""

from __future__ import annotations

from dataclasses import dataclass

from auditor.errors import UserError

SEVERITIES = ("critical", "major", "minor", "info")

# What a code's finding concerns: one round (coup) of any game, a table or pit (its procedures
# and their notices), one shoe, the event log itself, or the chemin de fer rules of a coup
# (wagers against the bank, options, commission, bank passing, irregularities judged under
# 13:69F-4.12), a dealer over a shift (the house's own control, docs/dealers.md), or a seat's
# play over a shoe or shift (surveillance's, docs/side-bets.md).
SCOPES = ("round", "table", "shoe", "log", "chemin", "dealer", "play")


def severity_rank(severity: str) -> int:
    """Lower is graver; used to compare a finding with a --fail-on threshold."""
    return SEVERITIES.index(severity)


def check_severity(severity: str, what: str) -> str:
    """`severity` when it is one; a typo (`--fail-on majr`) is a UserError naming `what`,
    since a threshold nothing reaches would read as a clean night."""
    if severity not in SEVERITIES:
        raise UserError(f"{what} must be one of {', '.join(SEVERITIES)}, not {severity!r}")
    return severity


def at_least(severity: str, what: str = "--fail-on") -> tuple[str, ...]:
    """The severities as grave as `severity` or graver (`major`: critical and major): what a
    --fail-on threshold or a --severity filter keeps."""
    return SEVERITIES[: severity_rank(check_severity(severity, what)) + 1]


# The games whose checks can raise a code. A rule pack cites a provision for every code its
# game can raise where its rules have the keys the code `needs` (auditor/rules/pack.py).
ALL_GAMES = ("mini_baccarat", "punto_banco", "chemin_de_fer")
BACCARAT = ("mini_baccarat", "punto_banco")
CHEMIN_ONLY = ("chemin_de_fer",)


@dataclass(frozen=True)
class Code:
    code: str
    severity: str
    scope: str  # one of SCOPES
    # What the rule is about, in words true of every jurisdiction. The provision a finding
    # cites comes from its table's rule pack ([citations]); only the log codes cite this.
    rule: str
    title: str
    why: str  # why a compliance officer cares
    faulty: str  # a faulty example
    correct: str  # the same situation done right
    # A lesser severity some findings of the code carry, and when: (severity, when).
    lesser: tuple[str, str] | None = None
    # Which games can raise it (empty: no game; the log codes, which the event log format
    # defines, not a rule pack), and the pack keys without which it cannot be raised.
    games: tuple[str, ...] = ALL_GAMES
    needs: tuple[str, ...] = ()

    def severities(self) -> tuple[str, ...]:
        """The severities a finding of this code may carry (the first is the default)."""
        return (self.severity,) if self.lesser is None else (self.severity, self.lesser[0])

    @property
    def severity_text(self) -> str:
        """'major' or 'major (minor when ...)', as the docs and `codes` print it."""
        if self.lesser is None:
            return self.severity
        return f"{self.severity} ({self.lesser[0]} when {self.lesser[1]})"
