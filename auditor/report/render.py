"""The shift audit report as a file: what a compliance officer reads, signs and files.

`render_html` fills the jinja2 templates in reports/templates with the context that
auditor.report.gather builds; `render_pdf` turns that into a PDF with weasyprint, the findings
attached as JSONL and CSV; with a [signing] key the PDF is then signed (signing.py). The same
database and arguments give the same bytes before signing: nothing in the report depends on
the clock of the machine that renders it, and nothing is fetched from anywhere. A signature
adds its own time, so two signed renders differ in their signature only.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import io
import json
import os
import re
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from auditor.audit.run import Progress
from auditor.config import PropertyConfig
from auditor.errors import UserError
from auditor.report import signing
from auditor.report.formatting import LOCAL_TIME, money, pct
from auditor.report.gather import Scope, gather
from auditor.rules.codes import REGISTRY
from auditor.shipped import shipped
from auditor.store import findings

TEMPLATES = shipped("reports/templates")
DEFAULT_OUT = Path("reports") / "out"


def environment(folder: Path = TEMPLATES):
    """The jinja2 environment of the report's templates (or of `folder`, the board's), with
    the report's formatters: the board shows money and times as the report does."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(folder),
        undefined=jinja2.StrictUndefined,
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    # The report's formatters: a table's figures read as those of its fixed-width listing.
    env.filters["money"] = money
    env.filters["pct"] = pct
    env.filters["local"] = lambda t, f="%Y-%m-%d %H:%M": t.strftime(f)
    env.filters["stamp"] = lambda t: t.strftime(LOCAL_TIME)  # a time to the second
    env.globals["registry_title"] = lambda code: REGISTRY[code].title
    env.globals["registry_severity"] = lambda code: REGISTRY[code].severity
    return env


@functools.cache
def _report_environment():
    """One environment a process: compiling the report's templates costs ~80 ms, and a
    nightly run renders each shift's HTML two or three times (its content hash, its PDF)."""
    return environment()


def render_html(context: dict[str, Any]) -> str:
    return _report_environment().get_template("report.html.j2").render(**context)


LEDGER_HEAD_FORMAT = "bacc-audit ledger head 1"


def attachments_data(context: dict[str, Any]) -> tuple[bytes, bytes]:
    """The complete findings of the report as JSONL and CSV (findings format v1: the
    acknowledgements the report shows are not part of the format, so they stay out). Each
    JSONL record adds `ledger`: its leaf, index and inclusion proof in the ledger head the
    report prints (null: not sealed when the report was made; docs/findings-format.md)."""
    records = [{k: v for k, v in f.items() if k != "ack"} for f in context["findings"]]
    head = context.get("ledger")
    entries = head["entries"] if head else {}
    jsonl = "".join(
        json.dumps({**f, "ledger": entries.get(f["fingerprint"])}, separators=(",", ":"),
                   sort_keys=False) + "\n"
        for f in records
    ).encode()
    buf = io.StringIO()
    findings.write_csv(buf, records)  # the same cells as `bacc-audit findings --format csv`
    return jsonl, buf.getvalue().encode()


def ledger_json(context: dict[str, Any]) -> bytes:
    """ledger.json: the head the report prints (auditor/ledger_check.py reads it), and the
    check of the database when the report was made, if one ran."""
    head = context.get("ledger")
    check = context.get("ledger_check")
    data = {
        "format": LEDGER_HEAD_FORMAT,
        "tree": "RFC 9162 section 2.1 Merkle tree over SHA-256 (docs/ledger.md)",
        "size": head["size"] if head else 0,
        "root": head["root"] if head else None,
        "sealed_at": head["sealed_at"].isoformat() if head else None,
        "not_sealed_when_made": head["pending"] if head else None,
        "check": check,
    }
    return (json.dumps(data, indent=1) + "\n").encode()


@dataclass(frozen=True)
class Attached:
    """A file attached to the PDF beside the findings (a filed version's record)."""

    name: str
    data: bytes
    description: str


def render_pdf(
    context: dict[str, Any], html: str, extra: Sequence[Attached] = ()
) -> bytes:
    import weasyprint
    from weasyprint.urls import FatalURLFetchingError, URLFetcher

    class NoNetwork(URLFetcher):
        """Reports are self-contained: a template that asks for any URL is a bug."""

        def fetch(self, url: str, headers: Any = None) -> Any:
            raise FatalURLFetchingError(
                f"the report template asked for {url}; reports fetch nothing"
            )

    jsonl, csv_bytes = attachments_data(context)
    when = context["generated_at"]
    attachments = [
        weasyprint.Attachment(
            string=jsonl,
            name="findings.jsonl",
            created=when,
            modified=when,
            description="All findings of this report, findings format v1",
        ),
        weasyprint.Attachment(
            string=csv_bytes,
            name="findings.csv",
            created=when,
            modified=when,
            description="All findings of this report, CSV",
        ),
        weasyprint.Attachment(
            string=ledger_json(context),
            name="ledger.json",
            created=when,
            modified=when,
            description="The ledger head this report rests on (docs/ledger.md)",
        ),
        *(
            weasyprint.Attachment(
                string=a.data, name=a.name, created=when, modified=when,
                description=a.description,
            )
            for a in extra
        ),
    ]
    doc = weasyprint.HTML(string=html, base_url=str(TEMPLATES), url_fetcher=NoNetwork())
    identifier = hashlib.sha256(html.encode()).hexdigest()[:32].encode()
    # fontTools stamps embedded font subsets with "now" unless SOURCE_DATE_EPOCH says when.
    before = os.environ.get("SOURCE_DATE_EPOCH")
    os.environ["SOURCE_DATE_EPOCH"] = str(int(when.timestamp()))
    try:
        return doc.write_pdf(attachments=attachments, pdf_identifier=identifier)
    finally:
        if before is None:
            del os.environ["SOURCE_DATE_EPOCH"]
        else:
            os.environ["SOURCE_DATE_EPOCH"] = before


def write_report(
    con: duckdb.DuckDBPyConnection,
    conf: PropertyConfig,
    scope: Scope,
    out: Path | None = None,
    fmt: str = "pdf",
    progress: Progress | None = None,
    check: dict[str, Any] | None = None,
) -> Path:
    """Render and write the report; the file appears under its name only when complete.

    `progress` is told as each step starts (gather, render, write): a day of a large floor
    spends minutes in the PDF render, long enough to look stuck. A PDF is signed with the
    [signing] key when one is configured (its cover says which, or that it is unsigned); the
    key is opened first, so a key that will not open costs no render. `check` is what the
    check of the ledger found (jobs/verify.Verification.cover), printed on the cover.
    """
    tell = progress or (lambda step, done, total: None)
    steps = 3 if fmt == "html" else 4
    path = report_path(out, scope, fmt)
    with _the_place(path):  # before the render: a wrong --out is said at once, not minutes on
        _can_write(path)
    data = report_bytes(con, conf, scope, fmt, tell, check)
    tell("write", steps - 1, steps)
    with _the_place(path):
        _write_out(path, data)
    tell("written", steps, steps)
    return path


@contextlib.contextmanager
def _the_place(path: Path) -> Iterator[None]:
    """An OSError at `path` is the place asked for, not the report: one sentence."""
    try:
        yield
    except OSError as e:
        if e.errno == errno.EPIPE:
            raise  # the reader of --out /dev/stdout stopped early: its choice (cli/app.py)
        raise UserError(
            f"{path}: cannot write the report there ({e.strerror or e}); choose another "
            "--out, in a folder this user may write to"
        ) from None


def _can_write(path: Path) -> None:
    """Refuse before the render what `_write_out` would refuse after it: not a file, or a
    folder where no file can be made (tried with the temporary file's name, then removed).
    A folder still to be made is only checked for being under one this user may write. A
    full disk still shows at the write."""
    st, through = _out_kind(path)
    if through:
        return
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise UserError(NOT_A_FILE.format(path=path))
    if path.parent.is_dir():
        probe = path.with_name(f".{path.name}.partial")
        with probe.open("ab"):
            pass
        probe.unlink()
        return
    above = next((a for a in path.parents if a.exists()), None)
    if above is not None and not os.access(above, os.W_OK | os.X_OK):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))


def _out_kind(path: Path) -> tuple[os.stat_result | None, bool]:
    """What is at `path` now, and whether it is written through (a link, a pipe, a device)."""
    try:
        st = path.stat()
        linked = path.is_symlink()
    except FileNotFoundError:
        return None, False
    through = linked or stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode)
    return st, through and not stat.S_ISDIR(st.st_mode)


def report_bytes(
    con: duckdb.DuckDBPyConnection,
    conf: PropertyConfig,
    scope: Scope,
    fmt: str = "pdf",
    progress: Progress | None = None,
    check: dict[str, Any] | None = None,
) -> bytes:
    """The report's bytes, as `write_report` writes them (and the board serves them): the
    PDF signed with the [signing] key when one is configured, or the HTML page."""
    tell = progress or (lambda step, done, total: None)
    steps = 3 if fmt == "html" else 4
    key = signing.key_for(conf) if fmt != "html" else None
    tell("gather", 0, steps)
    context = {**gather(con, conf, scope), "ledger_check": check}
    context["for_web"] = fmt == "html"  # a page: no attachments, nothing cut to fit
    if fmt != "html":
        context["signature"] = signing.cover(key)
    tell("render HTML", 1, steps)
    html = render_html(context)
    if fmt != "html":
        tell("render PDF", 2, steps)
    return html.encode() if fmt == "html" else sign_if(render_pdf(context, html), key, conf)


def _write_out(path: Path, data: bytes) -> None:
    """A file is replaced whole (write_whole). A symlink, a pipe or a terminal (`--out
    /dev/stdout`, itself a link) is written through, as `cp` writes: renaming over it would
    put a file where the link or the device was (and root may). Anything else that is not
    a file (a socket, a disk) is refused."""
    st, through = _out_kind(path)
    if through:
        with path.open("wb") as fh:
            fh.write(data)
        return
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise UserError(NOT_A_FILE.format(path=path))
    path.parent.mkdir(parents=True, exist_ok=True)
    write_whole(path, data)


NOT_A_FILE = ("{path}: not a file (a socket or a disk?); the report is written to a file, a "
              "folder, a pipe or /dev/stdout")


def report_path(out: Path | None, scope: Scope, fmt: str) -> Path:
    """Where the report goes: `out`; inside it under the default name when it is a folder;
    else reports/out/. The default name is the scope's (day, shift, pit, table), with no
    character that would make it a path of its own."""
    name = re.sub(r"[/\\\x00]", "_", scope.slug).lstrip(".") + f".{fmt}"
    if out is None:
        return DEFAULT_OUT / name
    return out / name if out.is_dir() else out


def sign_if(data: bytes, key: signing.SigningKey | None, conf: PropertyConfig) -> bytes:
    """The rendered PDF, signed when there is a key (the property named as where)."""
    return signing.sign(data, key, conf.name) if key else data


def write_whole(path: Path, data: bytes) -> None:
    """Write to `.NAME.partial`, flush it to disk, then rename: a crash (or power loss) at any
    point leaves either the old file or the new one under `path`, never half of one. The
    fsyncs matter for power loss only; a killed process loses nothing the kernel has."""
    tmp = path.with_name(f".{path.name}.partial")
    try:
        with tmp.open("wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:  # a full disk, a folder where the file goes: no half file left
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
