"""`bacc-audit doctor`: is this machine able to ingest, audit, render reports and run the
nightly job? Each check finds something that would otherwise break a command later, at night,
unattended; a failed check says what to do."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer

from auditor.cli import console
from auditor.cli.options import ConfigOption, DbOption
from auditor.config import PropertyConfig
from auditor.errors import EXIT_INPUT, EXIT_OK

# (passed, what was checked, what to do when it failed); passed None: a note (not checked).
Check = tuple[bool | None, str, str]

CONFIG_ADVICE = (
    "fix the config file (docs/property.example.toml shows every key), or point --config "
    "(BACC_AUDIT_CONFIG) at another"
)
AS_ROOT = (
    "permissions checked as root, who may read and write anywhere: run doctor as the user "
    "of the nightly job (e.g. sudo -u bacc-audit bacc-audit doctor) to check its own"
)


def doctor_cmd(
    db_path: DbOption = None,
    config_path: ConfigOption = None,
    spool: Annotated[
        Path | None,
        typer.Option(
            envvar="BACC_AUDIT_SPOOL",
            help="The nightly job's spool: checked to exist and be readable.",
            show_default=False,
        ),
    ] = None,
    archive: Annotated[
        Path | None,
        typer.Option(
            envvar="BACC_AUDIT_ARCHIVE",
            help="The nightly job's archive (default as nightly: [property] archive in the "
            "config, else reports/archive): checked to exist and be writable.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Check what bacc-audit needs: PDF libraries, fonts, rule packs, the property config
    and its signing key, the nightly job's spool and archive, and the database and its
    folder.

    Each failed check says what to do; exit 2 when any failed. The spool and archive are
    checked when a spool is given or an archive given or configured. Permissions are those
    of the user running doctor: run it as the user of the nightly job.
    """
    from auditor.store import db

    failed = 0
    for ok, what, advice in checks(db_path or db.default_db_path(), config_path, spool, archive):
        console.out.print(f"{'note' if ok is None else 'ok  ' if ok else 'FAIL'} {what}")
        if ok is False:
            failed += 1
            console.out.print(f"     {advice}")
    raise typer.Exit(EXIT_INPUT if failed else EXIT_OK)


def checks(
    db_path: Path,
    config_path: Path | None = None,
    spool: Path | None = None,
    archive: Path | None = None,
) -> Iterator[Check]:
    yield _weasyprint()
    yield _font_subsetter()
    yield _fonts()
    yield _rule_packs()
    check, conf = _config(config_path)
    yield check
    from auditor.report.signing import doctor_checks

    yield from doctor_checks(conf)
    yield from _nightly_folders(conf, spool, archive)
    yield from _database(db_path)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        yield None, AS_ROOT, ""


def _weasyprint() -> Check:
    try:
        import weasyprint

        weasyprint.HTML(string="<p>ok</p>").write_pdf()
        return True, f"weasyprint {weasyprint.__version__} renders PDF", ""
    except Exception as e:  # OSError when Pango is missing, among others
        return (
            False,
            f"weasyprint cannot render PDF ({type(e).__name__}: {e})",
            "install Pango: Debian/Ubuntu `apt-get install libpango-1.0-0 libpangoft2-1.0-0`; "
            "macOS `brew install pango`",
        )


def _font_subsetter() -> Check:
    """WeasyPrint cuts each embedded font down to the glyphs used with HarfBuzz's subsetter
    when the library is there, else with fontTools in Python: the same report, written in
    about two thirds of the CPU time (docs/benchmarks.md). A note, not a failure."""
    try:
        from weasyprint.text.ffi import harfbuzz_subset
    except Exception:  # weasyprint itself missing: _weasyprint says so
        return None, "font subsetter not checked (weasyprint does not load)", ""
    if harfbuzz_subset is not None:
        return True, "HarfBuzz subsetter (libharfbuzz-subset) writes the PDFs' fonts", ""
    return (
        None,
        "HarfBuzz subsetter (libharfbuzz-subset) not installed: PDFs take longer to write "
        "(fonts are subset in Python); Debian/Ubuntu `apt-get install libharfbuzz-subset0`",
        "",
    )


def _fonts() -> Check:
    fc = shutil.which("fc-list")
    if not fc:
        return False, "fontconfig not found (fc-list)", "install fontconfig and fonts-dejavu-core"
    listed = subprocess.run([fc, ":family=DejaVu Sans"], capture_output=True, text=True).stdout
    if listed.strip():
        return True, "font DejaVu Sans (card suits, tables) installed", ""
    return (
        False,
        "font DejaVu Sans not installed: reports fall back to another font, suits may not show",
        "Debian/Ubuntu: `apt-get install fonts-dejavu-core`",
    )


def _rule_packs() -> Check:
    from auditor.rules.pack import RulePackError, list_packs, load_pack_file

    try:
        refs = list_packs()
        for ref in refs:
            load_pack_file(ref.path)
    except (RulePackError, OSError) as e:
        return (
            False,
            f"rule packs do not load: {e}",
            "fix the pack named above, or set BACC_AUDIT_RULES",
        )
    if not refs:
        return False, "no rule packs found", "set BACC_AUDIT_RULES to the folder of rules/*.toml"
    names = ", ".join(f"{r.jurisdiction} {r.game}" for r in refs)
    return True, f"{len(refs)} rule packs load ({names})", ""


def _config(path: Path | None) -> tuple[Check, PropertyConfig | None]:
    """The property config loaded exactly as every command loads it: an error here is one
    that `audit`, `report` and `nightly` would each stop on."""
    from auditor import config as cfg
    from auditor.errors import UserError

    try:
        conf = cfg.load(path)
    except UserError as e:
        return (False, f"property config: {e}", CONFIG_ADVICE), None
    return (True, f"property config: {conf.source}", ""), conf


def _nightly_folders(
    conf: PropertyConfig | None, spool: Path | None, archive: Path | None
) -> Iterator[Check]:
    """The spool and archive as `nightly` resolves them (its own `archive_dir`). Checked when
    the nightly job is set up here: a spool given, or an archive given or configured; a
    machine that only runs the commands by hand needs neither."""
    from auditor.jobs.archive import archive_dir

    if spool is None and archive is None and (conf is None or conf.archive is None):
        why = "the property config did not load" if conf is None else (
            "no --spool or BACC_AUDIT_SPOOL, no --archive, BACC_AUDIT_ARCHIVE or "
            "[property] archive"
        )
        yield None, f"nightly spool and archive: not checked ({why})", ""
        return
    if conf is None and archive is None:  # where the config would put it is unknown
        yield None, "nightly archive: not checked (the property config did not load)", ""
    else:
        yield _archive(archive_dir(conf or PropertyConfig(), archive))
    if spool is None:
        yield None, "nightly spool: not checked (no --spool or BACC_AUDIT_SPOOL)", ""
    else:
        yield _spool(spool)


def _spool(spool: Path) -> Check:
    """The job lists the spool and reads every file in it; it writes nothing there."""
    what = f"nightly spool {spool}"
    advice = (
        "create it or correct --spool (BACC_AUDIT_SPOOL): the folder the table systems "
        "deliver their logs to"
    )
    problem = _not_a_folder(spool)
    if problem:
        return False, f"{what}: {problem}", advice
    try:
        n, why = sum(1 for e in os.scandir(spool) if e.is_file()), ""
    except OSError as e:
        n, why = 0, e.strerror or str(e)
    if not why and not _access(spool, os.R_OK | os.X_OK):
        why = "Permission denied"  # listed, but its files cannot be opened
    if why:
        return (
            False,
            f"{what}: cannot be read ({why})",
            "let the user of the job read it and its files (chmod/chown, or its group)",
        )
    return True, f"{what}: readable, {n:,} files", ""


def _archive(archive: Path) -> Check:
    """The job writes a folder per gaming day and its PDFs there, and reads the PDFs already
    filed. A missing archive is a failure, although the job would create it: a misspelt path
    would file the night's PDFs where nobody looks."""
    what = f"nightly archive {archive}"
    advice = (
        f"create it (mkdir -p {archive}) writable by the user of the job, or correct --archive "
        "(BACC_AUDIT_ARCHIVE, or [property] archive in the config)"
    )
    problem = _not_a_folder(archive)
    if problem:
        return False, f"{what}: {problem}", advice
    problem = _cannot_write(archive)
    if problem:
        return (
            False,
            f"{what}: cannot be written ({problem})",
            "let the user of the job write it (chmod/chown), or point --archive elsewhere",
        )
    return True, f"{what}: writable", ""


def _database(path: Path) -> Iterator[Check]:
    """The database's folder must take new files (the database itself, its `.wal`, `.tmp/`
    spills and the nightly's `.lock`); the database, if there, must open and take writes."""
    import duckdb

    from auditor.errors import DatabaseBusy, UserError
    from auditor.jobs import verify as verifying
    from auditor.store import db

    path = Path(path)
    folders = [path.parent]
    try:  # the nightly lock goes beside the real file, symlinks followed
        if path.resolve().parent != path.parent.resolve():
            folders.append(path.resolve().parent)
    except (OSError, RuntimeError):  # a symlink loop: the nightly says so itself
        pass
    for folder in folders:
        shown = folder if str(folder) != "." else Path.cwd()
        what = f"database folder {shown}"
        problem = _not_a_folder(folder)
        if problem:
            yield (
                False,
                f"{what}: {problem}",
                f"create it (mkdir -p {shown}) or point --db (BACC_AUDIT_DB) elsewhere",
            )
            return
        problem = _cannot_write(folder)
        if problem:
            yield (
                False,
                f"{what}: cannot be written ({problem}); the database, its .wal and the "
                "nightly lock go there",
                "let the user of bacc-audit write the folder (chmod/chown), or point --db "
                "(BACC_AUDIT_DB) at a folder it can write",
            )
            return
        yield True, f"{what}: writable", ""
    try:
        path.stat()
    except (FileNotFoundError, NotADirectoryError):
        yield True, f"{path}: no database yet (bacc-audit ingest creates it)", ""
        return
    except OSError as e:  # a name too long, a link loop: no file can be there
        yield (
            False,
            f"{path}: cannot be opened ({e.strerror or e})",
            "point --db (BACC_AUDIT_DB) at the audit database file",
        )
        return
    yield from _private(path)
    try:
        con = db.connect(path, read_only=True)
        try:
            n = con.execute("SELECT count(*) FROM events").fetchall()[0][0]
            checked = verifying.fast_check(con)
        finally:
            con.close()
    except DatabaseBusy as e:
        yield False, str(e), "another process may be writing; try again when it has finished"
        return
    except UserError as e:
        yield (
            False,
            str(e),
            "point --db (BACC_AUDIT_DB) at the audit database, or check the file's permissions",
        )
        return
    except duckdb.Error as e:  # a DuckDB file of something else: no events table
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        yield (
            False,
            f"{path}: a DuckDB file, but not an audit database ({first})",
            "point --db (BACC_AUDIT_DB) at the audit database",
        )
        return
    try:
        with open(path, "r+b"):  # opened for writing, nothing written
            pass
    except OSError as e:
        yield (
            False,
            f"{path}: readable, {n:,} events, but cannot be written ({e.strerror})",
            "let the user of bacc-audit write it (chmod/chown): ingest, audit and nightly do",
        )
        return
    yield True, f"{path}: readable and writable, {n:,} events", ""
    yield checked


def _private(path: Path) -> Iterator[Check]:
    """The database and its .wal hold every finding and acknowledgement: readable by this
    user only (bacc-audit creates them 0600). The .wal comes and goes with writers: said
    only when others can read it."""
    for f in (path, path.with_name(path.name + ".wal")):
        try:
            mode = f.stat().st_mode & 0o777
        except OSError:
            continue
        if mode & 0o077:
            yield (
                False,
                f"{f}: readable by other users (mode {mode:04o}); it holds every finding "
                "and acknowledgement",
                f"chmod 600 {f} (and chmod 700 its folder if only this user works there)",
            )
        elif f == path:
            yield True, f"{f}: private to its owner (mode {mode:04o})", ""


def _not_a_folder(path: Path) -> str:
    """What is wrong with `path` as a folder ("" when it is one), as words for the check."""
    try:
        if path.is_dir():
            return ""
        return "not a folder" if path.exists() else "no such folder"
    except OSError as e:  # a folder on the way that this user may not enter
        return f"cannot be reached ({e.strerror})"


def _cannot_write(folder: Path) -> str:
    """Why a file cannot be created in `folder` ("" when it can), found by creating one:
    permission bits, ACLs, a read-only mount and a full disk all show, and for whoever runs
    doctor, root included (os.access would answer for the real user, not the effective)."""
    try:
        fd, name = tempfile.mkstemp(prefix=".bacc-audit-doctor-", dir=folder)
    except OSError as e:
        return e.strerror or str(e)
    os.close(fd)
    os.unlink(name)
    return ""


def _access(path: Path, mode: int) -> bool:
    """os.access for the effective user where the platform can: the user doctor runs as."""
    if os.access in os.supports_effective_ids:
        return os.access(path, mode, effective_ids=True)
    return os.access(path, mode)
