"""Where the data shipped with bacc-audit lives: the rule packs and the report templates.

The product keeps them at the top of the repository (`rules/`, `reports/templates/`), where a
checkout and an editable install find them beside the package. A wheel installs only the
package, so the build copies both into it under `auditor/_shipped/` (pyproject.toml); that copy
is looked for first and the checkout's folders second.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
IN_WHEEL = PACKAGE / "_shipped"


def shipped(relative: str) -> Path:
    """The shipped folder `relative` (e.g. "rules", "reports/templates")."""
    inside = IN_WHEEL / relative
    return inside if inside.is_dir() else PACKAGE.parent / relative
