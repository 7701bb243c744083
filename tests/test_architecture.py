"""The house by stage (docs/architecture.md): no module imports from a later stage, replay and
rules stay free of the database, and the checker that says so can itself fail.

Imports are read from the source with `ast`, function-level ones included, so a lazy import
inside a function cannot hide a backwards dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "auditor"

# The stages in the order data flows through them; a module may import from its own stage and
# earlier ones only. `base` is what every stage may use: the version, errors, the property
# config, where the shipped data lives, and how sentences count.
STAGES = ("base", "rules", "store", "ingest", "replay", "audit", "report", "board", "simulate",
          "jobs", "cli")
BASE = {
    "auditor", "auditor.errors", "auditor.config", "auditor.finding", "auditor.shipped",
    "auditor.words", "auditor.merkle", "auditor.ledger_check",
}
# Pure rule functions over plain values: no database, no Arrow, no files of their own.
PURE = {"replay": ("duckdb", "pyarrow", "sqlmodel", "sqlalchemy", "auditor.store",
                   "auditor.ingest", "auditor.audit")}


def stage_of(module: str) -> str:
    if module in BASE:
        return "base"
    parts = module.split(".")
    if len(parts) < 2 or parts[0] != "auditor" or parts[1] not in STAGES:
        raise ValueError(f"{module} belongs to no stage: add it to STAGES or BASE")
    return parts[1]


def imports_of(source: str, module: str, is_package: bool = False) -> list[tuple[int, str]]:
    """(line, imported module) for every import in `source`, relative ones resolved."""
    found: list[tuple[int, str]] = []
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base]) if base else ".".join(anchor)
            # `from auditor.store import db` imports the module auditor.store.db
            found += [
                (node.lineno, f"{base}.{a.name}" if f"{base}.{a.name}" in ALL_MODULES else base)
                for a in node.names
            ]
    return found


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        out[".".join(parts)] = path
    return out


ALL_MODULES = _modules()


def violations(module: str, source: str, is_package: bool = False) -> list[str]:
    """What in `source` (the text of `module`) breaks the stage order or the purity rule."""
    own = stage_of(module)
    out = []
    for line, target in imports_of(source, module, is_package):
        if target.split(".")[0] == "auditor":
            other = stage_of(target if target in BASE else ".".join(target.split(".")[:2]))
            if STAGES.index(other) > STAGES.index(own):
                out.append(f"{module}:{line} imports {target}, of the later stage {other}")
        for banned in PURE.get(own, ()):
            if target == banned or target.startswith(banned + "."):
                out.append(f"{module}:{line} imports {target}; {own} must stay pure")
    return out


def test_every_module_belongs_to_a_stage() -> None:
    assert {stage_of(m) for m in ALL_MODULES} == set(STAGES)


@pytest.mark.parametrize("module", sorted(ALL_MODULES))
def test_no_module_imports_from_a_later_stage(module: str) -> None:
    path = ALL_MODULES[module]
    assert violations(module, path.read_text(), path.name == "__init__.py") == []


def test_the_checker_catches_a_backwards_import_even_inside_a_function() -> None:
    source = (
        "from auditor.rules.codes import REGISTRY\n"
        "def f():\n"
        "    from auditor.report import gather\n"
    )
    assert violations("auditor.store.findings", source) == [
        "auditor.store.findings:3 imports auditor.report.gather, of the later stage report"
    ]
    assert violations("auditor.replay.round", "from .. import config\nimport duckdb\n") == [
        "auditor.replay.round:2 imports duckdb; replay must stay pure"
    ]
    assert violations("auditor.rules.odds", "from auditor import cli\n") == [
        "auditor.rules.odds:1 imports auditor.cli, of the later stage cli"
    ]


def test_a_module_outside_every_stage_is_refused() -> None:
    with pytest.raises(ValueError, match="belongs to no stage"):
        stage_of("auditor.misc")


# --- private names stay in their module ----------------------------------------------------
# A name with a leading underscore is its module's own business: a neighbour that needs it
# asks for it to be made public, so that a reader sees every use of a module from its names.
MAX_LINES = 800  # no module over this (data literals aside: none is over it today)


def private_uses(module: str, source: str, is_package: bool = False) -> list[str]:
    """Where `source` (the text of `module`) uses a `_name` of another auditor module: imported
    (`from auditor.x import _y`) or reached through an imported module (`x._y`)."""
    out = []
    tree = ast.parse(source)
    modules: dict[str, str] = {}  # local name -> auditor module it names
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("auditor.") and a.asname:
                    modules[a.asname] = a.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module if is_package else module.rpartition(".")[0]
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base]) if base else ".".join(anchor)
            if not base.startswith("auditor"):
                continue
            for a in node.names:
                if f"{base}.{a.name}" in ALL_MODULES:
                    modules[a.asname or a.name] = f"{base}.{a.name}"
                elif a.name.startswith("_") and not a.name.startswith("__") and base != module:
                    out.append(f"{module}:{node.lineno} imports {a.name} from {base}")
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in modules and modules[node.value.id] != module
                and node.attr.startswith("_") and not node.attr.startswith("__")):
            out.append(f"{module}:{node.lineno} uses {modules[node.value.id]}.{node.attr}")
    return out


@pytest.mark.parametrize("module", sorted(ALL_MODULES))
def test_no_module_uses_a_private_name_of_another(module: str) -> None:
    path = ALL_MODULES[module]
    assert private_uses(module, path.read_text(), path.name == "__init__.py") == []


def test_the_private_name_checker_can_fail() -> None:
    source = (
        "from auditor.report.gather import _card_face\n"
        "from auditor.ingest import commit\n"
        "from auditor.ingest import reader as r\n"
        "def f():\n"
        "    return commit._extend_streams, r._private, commit.finish\n"
    )
    assert private_uses("auditor.board.views", source) == [
        "auditor.board.views:1 imports _card_face from auditor.report.gather",
        "auditor.board.views:5 uses auditor.ingest.commit._extend_streams",
        "auditor.board.views:5 uses auditor.ingest.reader._private",
    ]
    assert private_uses("auditor.ingest.commit", "from auditor.ingest.commit import _x\n") == []


@pytest.mark.parametrize("module", sorted(ALL_MODULES))
def test_no_module_is_over_800_lines(module: str) -> None:
    lines = len(ALL_MODULES[module].read_text().splitlines())
    assert lines <= MAX_LINES, f"{module} has {lines} lines: cut it by job"
