"""Rule packs for tests that need what no shipped pack has."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from auditor.rules.pack import RULES_ENV, default_rules_dir

PANDA_8 = """
[announcements.panda_8]
value = "panda8_hand"
variants = ["no_vig_dragon7"]
citation = "House rule (recall test): panda 8 hands are announced"
"""


def panda8_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The shipped packs, NJ mini-baccarat announcing panda 8 hands at no-vigorish tables
    (and citing a provision for announce.panda8_missing), in use through BACC_AUDIT_RULES:
    the simulator plants every code only under it."""
    rules = tmp_path / "rules"
    shutil.copytree(default_rules_dir(), rules)
    pack = rules / "nj-mini_baccarat.toml"
    text = pack.read_text().replace(
        "[citations]\n",
        '[citations]\n"announce.panda8_missing" = "House rule (recall test): panda 8 hands"\n',
    )
    pack.write_text(text + PANDA_8)
    monkeypatch.setenv(RULES_ENV, str(rules))
    return rules
