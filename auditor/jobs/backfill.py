"""`bacc-audit backfill`: ingest and audit many logs on a Dask cluster, into one database.

The logs are split into partitions by stream (docs/scale-out.md): every file goes with the
table (or pit) its first events name, so the files of one table stream, every gaming day of
it and its resent copies, land in one partition, and small streams are grouped until a
partition is worth a task. Each partition is ingested and its rounds replayed on a worker
(`run_partition`), into a DuckDB file of its own. The driver merges the finished partitions
into the audit database, each once, in one transaction each, with ids renumbered, and then
does there what crosses partitions, with the one-machine code: the sequence gaps of streams
that more than one partition holds (`record_seq_gaps`), the ingest of files that meet what
another partition or the database already holds (`ingest`, which judges duplicates and
altered files), and `audit`, which replays only the rounds no partition recorded whole and
runs every pass over tables, pits, shoes and dealers.

A worker killed mid-partition leaves a `.partial` file that nothing reads: Dask runs the task
again elsewhere, into a new file, and the driver merges the one result it is given.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import os
import shutil
import signal
import socket
import time
import uuid
import zlib
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from auditor import __version__
from auditor.audit.run import AuditResult, Known, audit
from auditor.config import PropertyConfig
from auditor.errors import WRITE_ERRNOS, UserError
from auditor.ingest.log_findings import record_seq_gaps
from auditor.ingest.paths import discover, escape_path, open_log
from auditor.ingest.reader import GZIP_MAGIC
from auditor.ingest.result import FileResult, IngestResult
from auditor.ingest.run import ingest
from auditor.jobs.merge import merge_partition
from auditor.rules.codes import at_least
from auditor.rules.pack import RULES_ENV
from auditor.store import config_record, db, outcome, runs, sql
from auditor.store.events import PIT_EVENTS
from auditor.words import count

ENGINES = ("dask", "ray")
# A partition is worth a task once it holds about this much log: a table's gaming day is
# about 5 MB (1,400 rounds, about a second of work), and the engine's cost a task is a few
# milliseconds; the driver's merge has a fixed cost a partition too.
PARTITION_BYTES = 256 << 20
# What is read of a file to know its stream: its first lines, at most this many bytes.
HEAD_BYTES = 64 << 10
HEAD_LINES = 200
# A task that was running on a worker that died is run again up to this many times.
ALLOWED_FAILURES = 3
# How long to try reaching a scheduler given with --address.
CONNECT_TIMEOUT = "10s"
# Test hook (tests/jobs/test_backfill.py): a path; the first partition task to find it missing
# creates it and kills its own worker process midway.
KILL_HOOK = "BACC_AUDIT_TEST_KILL_PARTITION"

Say = Callable[[str], None]


# --- planning ------------------------------------------------------------------------------


def stream_key(path: Path) -> str:
    """The stream a file belongs with: that of its first event naming one (`table:T`, or
    `pit:P` for a pit event) among its first lines; else the SHA-256 of its first line, so
    that files starting alike still go together; else the file itself."""
    try:
        with open_log(path) as raw:
            gz = raw.read(2) == GZIP_MAGIC
            raw.seek(0)
            fh: Any = gzip.GzipFile(fileobj=raw, mode="rb") if gz else raw
            head = fh.read(HEAD_BYTES)
    except (OSError, EOFError, zlib.error):
        return f"file:{escape_path(path.resolve())}"
    lines = head.split(b"\n")
    if len(head) == HEAD_BYTES:
        lines = lines[:-1]  # the last may be cut
    for line in lines[:HEAD_LINES]:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict):
            continue
        pit, table = event.get("pit"), event.get("table")
        if event.get("type") in PIT_EVENTS and isinstance(pit, str):
            return sql.stream_key("pit", pit)
        if isinstance(table, str):
            return sql.stream_key("table", table)
    if lines and lines[0].strip():
        return "head:" + hashlib.sha256(lines[0].rstrip(b"\r")).hexdigest()
    return f"file:{escape_path(path.resolve())}"


@dataclass
class Partition:
    """The files of some streams, in the order `ingest` would read them."""

    index: int
    keys: list[str]
    files: list[str]  # absolute paths
    size: int  # bytes on disk

    def label(self) -> str:
        first = self.keys[0]
        more = f" and {len(self.keys) - 1} more" if len(self.keys) > 1 else ""
        return f"{first}{more}"


@dataclass
class Plan:
    partitions: list[Partition]
    local: list[Path]  # files the driver ingests itself: their streams meet the database
    files: int
    size: int


def plan(
    paths: Sequence[Path | str],
    partition_bytes: int = PARTITION_BYTES,
    workers: int = 1,
    known: Callable[[list[str]], set[str]] | None = None,
) -> Plan:
    """Group the files under `paths` by stream (`stream_key`), and the streams into
    partitions of about `partition_bytes`, in the order of their first file; smaller when
    there would be fewer than four a worker (while the last partitions run, the other
    workers wait). `known(resolved paths)` names the files the database already holds:
    their streams are left to the driver (`Plan.local`), whose `ingest` tells already
    ingested, grown and altered files apart."""
    files = _discovered(paths)
    groups: dict[str, list[Path]] = {}
    sizes: Counter[str] = Counter()
    for f in files:
        k = stream_key(f)
        groups.setdefault(k, []).append(f)
        with suppress(OSError):
            sizes[k] += f.stat().st_size
    resolved = {f: escape_path(f.resolve()) for f in files}
    held = known(sorted(resolved.values())) if known else set()
    local_keys = {k for k, fs in groups.items() if any(resolved[f] in held for f in fs)}
    total = sum(sizes[k] for k in groups if k not in local_keys)
    target = max(1, min(partition_bytes, total // max(1, 4 * workers)))
    parts: list[Partition] = []
    cur: Partition | None = None
    for k, fs in groups.items():
        if k in local_keys:
            continue
        if cur is None or cur.size >= target:
            cur = Partition(len(parts), [], [], 0)
            parts.append(cur)
        cur.keys.append(k)
        cur.files += [str(f.absolute()) for f in fs]
        cur.size += sizes[k]
    local = [f for k, fs in groups.items() if k in local_keys for f in fs]
    order = {f: i for i, f in enumerate(files)}
    local.sort(key=order.__getitem__)
    return Plan(parts, local, len(files), sum(sizes.values()))


# --- on a worker -----------------------------------------------------------------------------

# The rule packs, table contexts and verdict terms a worker process has worked out: the same
# for every partition it runs while the pack files stay the same (the context's values and
# the packs decide them), so worked out once, not once a partition. Keyed by the packs'
# hashes: a worker that outlives a rule-pack fix must not apply the packs of before.
_KNOWN: dict[str, Known] = {}


def _known() -> Known:
    key = json.dumps(
        [os.environ.get(RULES_ENV), runs.rule_pack_hashes()], sort_keys=True
    )
    if key not in _KNOWN:
        _KNOWN.clear()
        _KNOWN[key] = Known()
    return _KNOWN[key]


@dataclass
class PartitionTask:
    """What a worker is given: the partition, where to write its database, the config."""

    partition: Partition
    work_dir: str
    config: PropertyConfig
    threads: int | None = None  # DuckDB threads (None: DuckDB's default, all cores)


def open_partition_db(path: Path, threads: int | None = None) -> duckdb.DuckDBPyConnection:
    """A private audit database for one partition: the settings of `db.connect`, without
    the serving of readers (nobody else opens it)."""
    con = duckdb.connect(str(path))
    con.execute("SET TimeZone = 'UTC'")
    limit = os.environ.get("BACC_AUDIT_MEMORY_LIMIT")
    if limit:
        con.execute(f"SET memory_limit = '{limit.replace(chr(39), '')}'")
    if threads:
        con.execute(f"SET threads = {int(threads)}")
    con.execute("SET preserve_insertion_order = false")
    db.ensure_schema(con)
    return con


class WorkDirRefused(Exception):
    """A worker's partition could not be written in the work folder (full, read-only): the
    reason, as the system said it; the driver makes it a sentence (exit 2)."""


def run_partition(task: PartitionTask) -> dict[str, Any]:
    """Ingest the partition's files and replay their rounds (`audit(..., tables=False)`)
    into a new DuckDB file, renamed into place only when complete; returns where it is, what
    each file gave, and the seconds spent. Idempotent: every attempt writes a file of its
    own, and a killed one leaves only a `.partial` nobody reads. A work folder that refuses
    the writes is WorkDirRefused (the cause is found here, where the chain of exceptions
    still holds it; DuckDB's rollback after a failed commit raises an error of its own)."""
    try:
        return _run_partition(task)
    except Exception as e:
        reason = write_refusal(e)
        if reason is None:
            raise
        raise WorkDirRefused(reason) from None


def write_refusal(e: BaseException | None) -> str | None:
    """The system's reason when `e`, or an exception it happened during, is a write the file
    system refused (no space, read-only, no permission); else None."""
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno in WRITE_ERRNOS:
            return e.strerror or str(e)
        if isinstance(e, duckdb.Error):
            text = str(e).lower()
            found = next((w for w in _WRITE_REFUSALS if w.lower() in text), None)
            if found:
                return found
        e = e.__cause__ or e.__context__
    return None


# How DuckDB words a write the file system refused (its errors carry the text only).
_WRITE_REFUSALS = ("No space left on device", "Read-only file system", "Permission denied",
                   "Disk quota exceeded")


def _run_partition(task: PartitionTask) -> dict[str, Any]:
    t0 = time.perf_counter()
    cpu0 = time.process_time()
    part = task.partition
    work = Path(task.work_dir)
    if not work.is_dir():  # the driver made it: gone, the run has stopped (or it is not shared)
        raise WorkDirRefused(f"the run's folder {work.name} is not there as this worker sees it")
    token = uuid.uuid4().hex[:12]
    final = work / f"part-{part.index:05d}-{token}.duckdb"
    partial = final.with_name(final.name + ".partial")
    if task.threads:
        try:
            import pyarrow as pa

            pa.set_cpu_count(task.threads)
        except (ImportError, ValueError):
            pass
    con = open_partition_db(partial, task.threads)
    try:
        with runs.recorded(con, "backfill partition", {"partition": part.index}) as run:
            result = ingest(con, part.files, run.id)
            t_ingest = time.perf_counter() - t0
            marker = os.environ.get(KILL_HOOK)
            if marker and not os.path.exists(marker):
                Path(marker).write_text(f"{os.getpid()} partition {part.index}\n")
                os.kill(os.getpid(), signal.SIGKILL)
            audited = audit(con, run.id, task.config, tables=False, known=_known())
        con.execute("CHECKPOINT")
    finally:
        con.close()
    os.replace(partial, final)
    wall = time.perf_counter() - t0
    return {
        "index": part.index,
        "db": str(final),
        "files": files_of(result, part.files),
        "events": result.events,
        "quarantined": result.quarantined,
        "rounds": audited.rounds,
        "round_findings": audited.findings_new,
        "skipped": dict(audited.skipped),
        "seconds": {"ingest": t_ingest, "audit": wall - t_ingest, "total": wall,
                    "cpu": time.process_time() - cpu0},
        "worker": f"{socket.gethostname()}:{os.getpid()}",
        "tool": [__version__, runs.rule_pack_hashes()],
    }


def _file_summary(f: Any) -> dict[str, Any]:
    return f.summary() | {"per_stream": f.per_stream}


def files_of(result: IngestResult, planned: Sequence[Path | str]) -> list[dict[str, Any]]:
    """What an ingest of the `planned` files said of each, and of each it found no more
    (gone, or no longer a file, since the plan): unreadable, an input problem, never left
    out of the count."""
    said = {f.path for f in result.files}
    gone = []
    for f in map(Path, planned):
        if f not in said:
            why = next((e for e in result.errors if e.startswith(f"{escape_path(f)}: ")),
                       f"{escape_path(f)}: gone since the backfill was planned")
            gone.append(FileResult(f, "unreadable", message=why))
    return [_file_summary(f) for f in [*result.files, *gone]]


# --- the engine ------------------------------------------------------------------------------


@dataclass
class Engine:
    """A Dask client, and the local cluster it was started with (None for --address)."""

    client: Any
    cluster: Any
    workers: int
    threads: int | None

    def close(self) -> None:
        with _quiet():
            self.client.close()
            if self.cluster is not None:
                self.cluster.close()


@contextmanager
def _quiet() -> Iterator[None]:
    """Dask logs a worker's death and a closing cluster at WARNING; the run says what
    happened itself."""
    names = ("distributed", "distributed.nanny", "distributed.scheduler", "tornado")
    before = {n: logging.getLogger(n).level for n in names}
    for n in names:
        logging.getLogger(n).setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for n, level in before.items():
            logging.getLogger(n).setLevel(level)


def start_engine(engine: str, address: str | None, workers: int | None) -> Engine:
    """A Dask client: on the scheduler at `address`, or on a local cluster of `workers`
    worker processes (default: one a core), one thread each."""
    if engine == "ray":
        raise UserError(
            "--engine ray is not supported: backfill runs on Dask (docs/scale-out.md says "
            "why); use --engine dask, with --address for a Dask scheduler"
        )
    if engine != "dask":
        raise UserError(f"--engine {engine}: unknown engine; choose dask")
    try:
        import dask
        from distributed import Client, LocalCluster
    except ImportError:
        raise UserError(
            "backfill needs Dask: pip install 'bacc-audit[backfill]' (dask[distributed])"
        ) from None
    dask.config.set({"distributed.scheduler.allowed-failures": ALLOWED_FAILURES})
    if address:
        try:
            with _quiet():
                client = Client(address, timeout=CONNECT_TIMEOUT)
        except (OSError, TimeoutError, ValueError) as e:
            raise UserError(
                f"--address {address}: cannot reach a Dask scheduler there ({e})"
            ) from None
        n = len(client.scheduler_info().get("workers", {}))
        return Engine(client, None, n, None)
    n = workers or os.cpu_count() or 1
    if n < 1:
        raise UserError(f"--workers {n}: give at least 1")
    cores = os.cpu_count() or 1
    threads = max(1, cores // n)
    with _quiet():
        cluster = LocalCluster(
            n_workers=n,
            threads_per_worker=1,
            processes=True,
            memory_limit=0,  # DuckDB manages its own (BACC_AUDIT_MEMORY_LIMIT)
            dashboard_address=None,
            silence_logs=logging.CRITICAL,
        )
        client = Client(cluster)
    return Engine(client, cluster, n, threads)


# --- the driver ------------------------------------------------------------------------------


@dataclass
class BackfillResult:
    run_id: int
    partitions: list[dict[str, Any]] = field(default_factory=list)
    merged: int = 0
    redone_locally: list[int] = field(default_factory=list)  # partitions ingested by the driver
    local: IngestResult | None = None
    files: list[dict[str, Any]] = field(default_factory=list)
    audit: AuditResult | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    workers: int = 0
    spanning: list[str] = field(default_factory=list)  # streams more than one partition held

    @property
    def events(self) -> int:
        return sum(f["events"] for f in self.files)

    @property
    def quarantined(self) -> int:
        return sum(f["quarantined"] for f in self.files)

    def summary(self) -> dict[str, Any]:
        statuses = Counter(f["status"] for f in self.files)
        return {
            "run_id": self.run_id,
            "workers": self.workers,
            "partitions": [
                {k: p[k] for k in ("index", "worker", "events", "rounds", "seconds")}
                | {"files": len(p["files"])}
                for p in self.partitions
            ],
            "merged": self.merged,
            "redone_by_driver": self.redone_locally,
            "streams_across_partitions": self.spanning,
            "files": dict(sorted(statuses.items())),
            "events": self.events,
            "quarantined": self.quarantined,
            "audit": self.audit.summary() if self.audit else {},
            "seconds": self.seconds,
        }


def known_paths(con: duckdb.DuckDBPyConnection) -> Callable[[list[str]], set[str]]:
    """Which of the given resolved paths the database's manifest already names."""

    def known(paths: list[str]) -> set[str]:
        if not paths:
            return set()
        rows = con.execute(
            "SELECT DISTINCT path FROM sources WHERE list_contains(?, path)", [paths]
        ).fetchall()
        return {r[0] for r in rows}

    return known


def backfill(
    con: duckdb.DuckDBPyConnection,
    run_id: int,
    paths: Sequence[Path | str],
    config: PropertyConfig,
    engine: Engine,
    work_dir: Path,
    partition_bytes: int = PARTITION_BYTES,
    say: Say | None = None,
    merge_while_running: bool = True,
) -> BackfillResult:
    """Plan, run the partitions on the engine, merge each as it is done (in partition order;
    with `merge_while_running` false, only once all are done: bench/ measures the workers
    alone so), then what crosses partitions on the merged database; see the module's
    docstring."""
    driver = _Driver(con, run_id, BackfillResult(run_id, workers=engine.workers),
                     say or (lambda _: None))
    result = driver.result
    t0 = time.perf_counter()
    p = plan(paths, partition_bytes, max(1, engine.workers), known_paths(con))
    result.seconds["plan"] = time.perf_counter() - t0
    driver.say(
        f"backfill: {count(p.files, 'file')}, {p.size / 1e6:,.1f} MB in "
        f"{count(len(p.partitions), 'partition')} on {count(engine.workers, 'worker')}"
        + (f"; {count(len(p.local), 'file')} the database already knows, ingested here"
           if p.local else "")
    )
    make_work_dir(work_dir)
    futures: list[Any] = []
    try:
        futures = _submit(engine, p, run_id, work_dir, config)
        t1 = time.perf_counter()
        redo = driver.merge_as_done(p, futures, merge_while_running, work_dir.parent)
        result.seconds["partitions"] = time.perf_counter() - t1
        result.seconds["merge"] = driver.merge_seconds
    finally:  # the run's own folder goes, whatever happened in it (docs/scale-out.md)
        _remove_work_dir(engine, futures, work_dir)
    t2 = time.perf_counter()
    driver.across_partitions(sorted(set(p.local) | set(redo), key=_order_of(paths)))
    result.seconds["across"] = time.perf_counter() - t2
    t3 = time.perf_counter()
    driver.say("audit: the rounds no partition recorded whole, then tables, pits, shoes, dealers")
    result.audit = audit(con, run_id, config)
    result.seconds["audit"] = time.perf_counter() - t3
    result.seconds["total"] = time.perf_counter() - t0
    return result


def _remove_work_dir(engine: Engine, futures: list[Any], folder: Path) -> None:
    """Remove the run's folder once no partition of it is left to start. A run stopped by
    one partition (--work-dir full) has others queued or writing: they are cancelled first,
    and a file a running one creates while the tree is removed fails the removal, so it is
    tried again for a while (a worker never makes the folder again: _run_partition)."""
    pending = [f for f in futures if not f.done()]
    if pending:
        with _quiet(), suppress(Exception):
            engine.client.cancel(pending)
    for _ in range(REMOVE_TRIES):
        shutil.rmtree(folder, ignore_errors=True)
        if not folder.exists():
            return
        time.sleep(0.1)


def make_work_dir(folder: Path) -> None:
    """The run's own folder under --work-dir; a --work-dir that is a file, read-only or
    full is the setup's problem: one sentence, exit 2."""
    try:
        folder.mkdir(parents=True)
    except OSError as e:
        raise UserError(
            f"--work-dir {escape_path(folder.parent)}: cannot make the run's folder there "
            f"({e.strerror or e}); {WORK_DIR_ADVICE}"
        ) from None


WORK_DIR_ADVICE = "choose another --work-dir (docs/scale-out.md: a folder every worker can write)"


# Tries at removing the run's folder, 0.1 s apart, while a stopped partition still writes.
REMOVE_TRIES = 100


def _submit(
    engine: Engine, p: Plan, run_id: int, work_dir: Path, config: PropertyConfig
) -> list[Any]:
    """Every partition of the plan, as a task on the engine."""
    return [
        engine.client.submit(
            run_partition,
            PartitionTask(part, str(work_dir), config, engine.threads),
            key=f"bacc-audit-partition-{run_id}-{part.index}-{uuid.uuid4().hex[:8]}",
            pure=False,
        )
        for part in p.partitions
    ]


@dataclass
class _Driver:
    """The driver's side of one backfill: the database, the run, and what it merged."""

    con: duckdb.DuckDBPyConnection
    run_id: int
    result: BackfillResult
    say: Say
    # Per stream, the partitions merged that hold it (and the driver's own ingest).
    spanning: Counter[str] = field(default_factory=Counter)
    merge_seconds: float = 0.0

    def merge_as_done(
        self, p: Plan, futures: list[Any], while_running: bool, base: Path
    ) -> list[Path]:
        """Merge the partitions as their tasks finish, in partition order (all at the end
        unless `while_running`). Returns the files of those that met what the database
        holds: the driver ingests them itself. A worker that could not write its partition
        under `base` (--work-dir full, read-only) stops the run with a sentence."""
        from distributed import as_completed

        tool = [__version__, runs.rule_pack_hashes()]
        done: dict[int, dict[str, Any]] = {}
        redo: list[Path] = []
        next_index = 0
        t1 = time.perf_counter()
        with _quiet():
            for fut in as_completed(futures):
                try:
                    out = fut.result()
                except WorkDirRefused as e:
                    kept = self.result.merged
                    raise UserError(
                        f"--work-dir {escape_path(base)}: a worker could not write its "
                        f"partition there ({e}); make room there, or {WORK_DIR_ADVICE}"
                        + (f"; the {count(kept, 'partition')} merged before are kept"
                           if kept else "")
                    ) from None
                if out["tool"] != tool:
                    raise UserError(
                        f"worker {out['worker']} runs bacc-audit {out['tool'][0]} with other "
                        f"rule packs or another version than this one ({tool[0]}): install the "
                        "same version and packs on every worker (docs/scale-out.md); nothing "
                        "of its partition was merged"
                    )
                done[out["index"]] = out
                if not while_running:
                    if len(done) < len(futures):
                        continue
                    self.result.seconds["workers"] = time.perf_counter() - t1
                while next_index in done:
                    redo += self._merge(done.pop(next_index), p.partitions[next_index],
                                        len(p.partitions))
                    next_index += 1
        return redo

    def _merge(self, out: dict[str, Any], part: Partition, of: int) -> list[Path]:
        """Merge one finished partition; its files when it cannot be merged."""
        tm = time.perf_counter()
        merged = merge_partition(self.con, Path(out["db"]), self.run_id, self.spanning)
        out["merge_seconds"] = time.perf_counter() - tm
        self.merge_seconds += out["merge_seconds"]
        self.result.partitions.append(out)
        if merged:
            self.result.merged += 1
            self.result.files += out["files"]
        else:
            self.result.redone_locally.append(part.index)
        _remove_db(Path(out["db"]))
        how = "merged" if merged else "meets another partition: ingested here"
        self.say(
            f"partition {part.index + 1} of {of} ({part.label()}, "
            f"{count(len(part.files), 'file')}): {out['seconds']['total']:.1f} s on "
            f"{out['worker']}; {how}"
        )
        return [] if merged else [Path(f) for f in part.files]

    def across_partitions(self, local: list[Path]) -> None:
        """Ingest here the files no partition could take, then judge again on the merged
        database the streams more than one partition held: their sequence gaps, and their
        rounds (`_audit_again`)."""
        result = self.result
        if local:
            self.say(f"ingesting {count(len(local), 'file')} here")
            result.local = ingest(self.con, local, self.run_id)
            result.files += files_of(result.local, local)
        if result.local:  # streams the driver's ingest added to, that partitions hold too
            touched = {s for f in result.local.files for s in f.per_stream}
            self.spanning.update(s for s in touched if self.spanning[s])
        across = sorted(s for s, n in self.spanning.items() if n > 1)
        if not across:
            return
        result.spanning = across
        con = self.con
        con.execute("BEGIN TRANSACTION")
        try:
            con.register("backfill_spanning", _streams_table(across))
            record_seq_gaps(con, self.run_id, "SELECT stream FROM backfill_spanning")
            _audit_again(con, self.run_id)
            con.unregister("backfill_spanning")
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise


def _audit_again(con: duckdb.DuckDBPyConnection, run_id: int) -> None:
    """The rounds of the tables whose streams more than one partition held were replayed
    without the events of the others (a table_open, a procedure change, the chemin de fer
    history, the shoe's dealer): each gets a round_audits row that matches no round (events
    -1), so `audit` replays it over the merged database, and withdraws what it no longer
    finds, as for a round that got more events."""
    con.execute(
        f"""
        INSERT INTO round_audits
        SELECT DISTINCT table_id, shoe, round, -1, -1, 0, {int(run_id)}, now()
        FROM round_audits
        WHERE {sql.stream_key_sql("table", "table_id")} IN (SELECT stream FROM backfill_spanning)
        """
    )


def _order_of(paths: Sequence[Path | str]) -> Callable[[Path], int]:
    files, _ = discover(paths)
    order = {f.resolve(): i for i, f in enumerate(files)}
    return lambda f: order.get(f.resolve(), len(order))


def _streams_table(streams: list[str]) -> Any:
    import pyarrow as pa

    return pa.table({"stream": pa.array(streams, pa.string())})


def _remove_db(path: Path) -> None:
    for p in (path, path.with_name(path.name + ".wal")):
        with suppress(FileNotFoundError):
            p.unlink()


# --- the run --------------------------------------------------------------------------------


def run_backfill(
    db_path: Path,
    paths: Sequence[Path | str],
    config: PropertyConfig,
    *,
    engine: str = "dask",
    address: str | None = None,
    workers: int | None = None,
    work_dir: Path | None = None,
    partition_bytes: int = PARTITION_BYTES,
    fail_on: str = "major",
    say: Say | None = None,
) -> tuple[BackfillResult, int]:
    """The whole command: check the paths, start (or reach) the engine, open the database,
    backfill, and record the run. Returns the result and the exit code (store/outcome.py: as
    `ingest` then `audit`, but counting the findings of this run that still stand)."""
    graver = at_least(fail_on)
    _discovered(paths)
    base = work_dir or db_path.resolve().parent
    probe = base / f".{db_path.name}.backfill-probe-{uuid.uuid4().hex[:8]}"
    make_work_dir(probe)  # a --work-dir that is a file or read-only: said before the cluster
    probe.rmdir()
    eng = start_engine(engine, address, workers)
    try:
        con = db.connect(db_path)
        try:
            args = {
                "paths": [escape_path(p) for p in paths],
                "engine": engine,
                "address": address,
                "workers": eng.workers,
                "config": config.source,
                "rule_packs": runs.rule_pack_hashes(),
                **config_record.run_args(config),
            }
            with runs.recorded(con, "backfill", args) as run:
                config_record.check_unchanged(con, config, "backfill")  # as `audit` does
                # A folder of this run's own, under --work-dir or beside the database: it is
                # removed at the end, and --work-dir may hold other things.
                wd = base / f"{db_path.name}.backfill-{run.id}-{uuid.uuid4().hex[:8]}"
                result = backfill(con, run.id, paths, config, eng, wd, partition_bytes, say)
                code = outcome.exit_code(
                    files=(f["status"] for f in result.files),
                    quarantined=result.quarantined,
                    failing=outcome.failing(con, run.id, graver),
                )
                run.done(code, result.summary() | {"exit_code": code})
        finally:
            con.close()
    finally:
        eng.close()
    return result, code


def _discovered(paths: Sequence[Path | str]) -> list[Path]:
    """The files under `paths`. A path that gives none is refused before any work (a
    backfill is planned whole), never counted as ingest counts it."""
    files, errors = discover(paths)
    if errors:
        raise UserError(errors[0] + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""))
    return files


def partition_costs(result: BackfillResult) -> list[dict[str, Any]]:
    """Per partition: files, events, rounds and the seconds of each step (for bench/)."""
    return [
        {
            "index": p["index"],
            "files": len(p["files"]),
            "events": p["events"],
            "rounds": p["rounds"],
            **{f"{k}_s": v for k, v in p["seconds"].items()},
            "merge_s": p.get("merge_seconds", 0.0),
        }
        for p in result.partitions
    ]

