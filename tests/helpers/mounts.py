"""A command run with a small or read-only file system mounted on a folder: a full disk and a
read-only mount as the user meets them, without root. The mount is a tmpfs in a mount
namespace of the command's own (`unshare --user --map-root-user --mount`), gone when it ends;
what it held at the end is listed first. Skipped, saying why, where the kernel allows no such
namespace."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import NamedTuple

import pytest

# $0 is the folder, "$@" the command; the listing follows a line of its own.
SCRIPT = (
    'mount -t tmpfs -o "$MOUNT_OPTIONS" tmpfs "$0" || exit 99; "$@"; rc=$?; '
    'echo "--- left in $0"; ls -A "$0"; exit $rc'
)
LEFT = "--- left in "


class Mounted(NamedTuple):
    code: int
    out: str
    err: str
    left: list[str]  # what the mounted folder held when the command ended


def usable() -> str | None:
    """Why a namespace cannot be made here, or None."""
    if shutil.which("unshare") is None:
        return "no unshare(1) on this machine"
    probe = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "true"], capture_output=True
    )
    return None if probe.returncode == 0 else f"no user namespaces here: {probe.stderr!r}"


def run_mounted(
    folder: Path, args: list[str | Path], *, size: str = "64k", read_only: bool = False,
    timeout: float = 300, cwd: Path | None = None,
) -> Mounted:
    """Run `args` with a tmpfs of `size` (read-only with `read_only`) on `folder`."""
    why = usable()
    if why:
        pytest.skip(why)
    folder.mkdir(parents=True, exist_ok=True)
    options = f"size={size}" + (",ro" if read_only else "")
    proc = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", SCRIPT, str(folder),
         *map(str, args)],
        capture_output=True, text=True, timeout=timeout, cwd=cwd,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("BACC_AUDIT_")},
             "MOUNT_OPTIONS": options},
    )
    assert proc.returncode != 99, f"the tmpfs could not be mounted: {proc.stderr}"
    out, _, listing = proc.stdout.partition(f"{LEFT}{folder}\n")
    return Mounted(proc.returncode, out, proc.stderr, listing.split())

