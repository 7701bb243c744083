"""`bacc-audit simulate`: logs of a night with deviations planted, and their ground truth
(auditor.simulate)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated

import typer

from auditor import config as cfg
from auditor.cli import console
from auditor.errors import UserError
from auditor.words import count

MAX_TABLES = 9_999  # the bulk generator's table ids run MB-0001 to MB-9999
LIVE_TABLES, LIVE_HOURS = 4, 9.0  # --live's night unless told: 22:00 to 07:00


def simulate_cmd(
    out_dir: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Folder to write the logs into: new or empty, unless --replace (or "
            "--continue instead). Optional with --live (then a temporary folder, removed at "
            "the end).",
            show_default=False,
        ),
    ] = None,
    tables: Annotated[
        int | None,
        typer.Option("--tables", help="How many tables (4 with --live).", show_default=False),
    ] = None,
    hours: Annotated[
        float | None,
        typer.Option(
            "--hours",
            help="Hours each table is open: from 22:00 on --date (at most 13), or with --bulk "
            "from 06:00 (at most 24).",
            show_default=False,
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Same seed, same bytes.")] = 1,
    deviation_rate: Annotated[
        float,
        typer.Option(
            "--deviation-rate",
            help="Probability of a deviation per round (round codes), and per shoe, pit, "
            "table or file for the kinds planted there (see README).",
        ),
    ] = 0.0,
    games: Annotated[
        str,
        typer.Option(
            "--games",
            help="Comma-separated: mini_baccarat, punto_banco, chemin_de_fer, nz (NZ "
            "mini-baccarat).",
        ),
    ] = "mini_baccarat,punto_banco,chemin_de_fer",
    bulk: Annotated[
        bool,
        typer.Option(
            "--bulk",
            help="Vectorised generator for volume: NJ mini-baccarat tables only (--games is "
            "ignored), deviation kinds draw.*, settle.wrong_amount, vig.missing, "
            "vig.wrong_amount, order.collect_after_pay, result.misannounced, "
            "announce.tie_missing; up to 24 hours from 06:00 (one gaming day).",
        ),
    ] = False,
    date: Annotated[
        str | None,
        typer.Option(
            "--date",
            help="The gaming day simulated, e.g. 2026-11-28 (default 2026-12-01): it names "
            "the files and shoes and dates the events.",
            show_default=False,
        ),
    ] = None,
    replace: Annotated[
        bool,
        typer.Option(
            "--replace",
            help="Let --out hold files already: first remove the *.jsonl, *.jsonl.gz, "
            "*.jsonl.later and ground_truth.ndjson directly in it (what a simulation "
            "writes); nothing else is touched.",
        ),
    ] = False,
    error_prone_dealer: Annotated[
        bool,
        typer.Option(
            "--error-prone-dealer",
            help="Plant a dealer with ten times the others' rate of deviations during the "
            "grave shift (dealer.error_rate; docs/dealers.md). Needs --deviation-rate.",
        ),
    ] = False,
    counting_seat: Annotated[
        bool,
        typer.Option(
            "--counting-seat",
            help="Plant a seat whose Dragon 7 wagers follow the count at the first Dragon 7 "
            "table (play.side_bet_counting; docs/side-bets.md).",
        ),
    ] = False,
    shoe_twice: Annotated[
        bool,
        typer.Option(
            "--shoe-twice",
            help="Plant a shoe dealt in the order of another table's shoe "
            "(shoe.repeated_order; docs/shoe-integrity.md).",
        ),
    ] = False,
    unshuffled: Annotated[
        bool,
        typer.Option(
            "--unshuffled",
            help="Plant a shoe shuffled with two riffles only and a run of spades in a new "
            "pack's order (shoe.unshuffled; docs/shoe-integrity.md).",
        ),
    ] = False,
    phantom_shoe: Annotated[
        bool,
        typer.Option(
            "--phantom-shoe",
            help="Plant a lie: the round with a shoe's card too many logged in a shoe id one "
            "character off, the shoe's remaining raised to match (shoe.not_started; the "
            "shoe.composition stands; docs/procedures.md, Shoes).",
        ),
    ] = False,
    shoe_reopened: Annotated[
        bool,
        typer.Option(
            "--shoe-reopened",
            help="Plant a lie: the round with a shoe's card too many logged as the next "
            "round of the table's previous shoe, the remaining raised to match "
            "(shoe.reopened; the shoe.composition stands).",
        ),
    ] = False,
    unnotified_change: Annotated[
        bool,
        typer.Option(
            "--unnotified-change",
            help="Plant a pit's procedure change made with no written notice "
            "(procedure.notice_missing at each table that makes it), for an officer to "
            "answer with a notice entered by hand (bacc-audit notice add, or the board).",
        ),
    ] = False,
    days: Annotated[
        int,
        typer.Option(
            "--days",
            help="Consecutive gaming days to simulate from --date, into the one folder: each "
            "table's and pit's seq goes on across the days, the files are named by day, the "
            "ground truth covers them all.",
        ),
    ] = 1,
    continue_dir: Annotated[
        Path | None,
        typer.Option(
            "--continue",
            help="A previous simulate's folder: add the next gaming day (or --days of them) "
            "after its last, each stream's seq going on from its logs, the ground truth "
            "added to its own. Instead of --out; not with --date or --replace.",
            show_default=False,
        ),
    ] = None,
    lying: Annotated[
        bool,
        typer.Option(
            "--lying",
            help="Make the logs lie, one table each (issue 28): events added after a round "
            "ended or its table closed, a change stamped later than the round after it, a "
            "card and pit notices delivered after the night's audit (*.jsonl.later: ingest "
            "and audit the folder, then those files). The ground truth lists each lie's "
            "finding and the deviation it hid (docs/event-log.md).",
        ),
    ] = False,
    live: Annotated[
        Path | None,
        typer.Option(
            "--live",
            help="Then write the night into this spool folder line by line, each line at its "
            "logged time divided by --speed, every table's file growing at once as table "
            "systems write them: for `bacc-audit watch --spool` and its board "
            "(docs/live.md). Ctrl-C stops it (exit 130).",
            show_default=False,
        ),
    ] = None,
    speed: Annotated[
        float | None,
        typer.Option(
            "--speed",
            help="With --live: how many times faster than the logged times (default 60, an "
            "hour of play a minute).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Write event log v1 files for a simulated night, with deviations planted at random and
    listed in ground_truth.ndjson (code, table, shoe, round, kind) beside the logs.

    --out must be new or empty: the logs of two nights in one folder would be ingested as one,
    and the ground truth would describe only the newer; --replace clears a previous run's
    files first. --days N simulates N gaming days into it as one history (each table's seq
    going on across the days), and --continue DIR adds the day after DIR's last.

    A pattern asked for that the night cannot plant, or plants below what the audit's own
    test detects at its size, is said on stderr and is a not_planted line of the ground
    truth, never a finding promised.

    With --live SPOOL the night is then fed into SPOOL as table systems write it, at --speed
    times the logged pace (a night of 4 tables and 9 hours by default), for `bacc-audit watch
    --spool SPOOL` to follow: try the live audit and the board without tables.
    """
    given = dict(locals())  # the options, to run again into a temporary --out (--live)
    from auditor.cli.live_feed import check_live, feed_live
    from auditor.simulate.bulk import BULK_DATE, simulate_bulk
    from auditor.simulate.history import simulate_days
    from auditor.simulate.planted import SIM_DATE, NightSettings
    from auditor.simulate.power import said

    pace = check_live(live, speed, out_dir)
    if live is not None:  # a night to watch: 4 tables, 22:00 to 07:00, unless told
        tables = LIVE_TABLES if tables is None else tables
        hours = LIVE_HOURS if hours is None else hours
    if tables is None or hours is None:
        raise UserError("--tables and --hours are needed: how many tables, open how many hours")
    if out_dir is None and continue_dir is None and live is not None:
        with tempfile.TemporaryDirectory(prefix="bacc-audit-live-") as scratch:
            simulate_cmd(**{**given, "out_dir": Path(scratch), "speed": pace})
        return

    if tables > MAX_TABLES:  # it would take hours and all the memory before it said so
        raise UserError(f"--tables {tables:,}: at most {MAX_TABLES:,} tables a simulated "
                        "night; for more, simulate several nights into folders of their own")
    chosen = tuple(g.strip() for g in games.split(",") if g.strip())
    try:
        day = cfg.parse_date(date) if date is not None else None
    except UserError as e:
        raise UserError(f"--date: {e}") from None
    patterns = [name for name, on in (
        ("--error-prone-dealer", error_prone_dealer), ("--counting-seat", counting_seat),
        ("--shoe-twice", shoe_twice), ("--unshuffled", unshuffled),
        ("--phantom-shoe", phantom_shoe), ("--shoe-reopened", shoe_reopened),
        ("--lying", lying), ("--unnotified-change", unnotified_change)) if on]
    if bulk and patterns:
        raise UserError(f"{', '.join(patterns)}: not with --bulk, whose generator plants only "
                        "round deviations; leave out --bulk")
    out_dir = _folder(out_dir, continue_dir, date, replace)
    if bulk and (days != 1 or continue_dir is not None):
        raise UserError("--days and --continue: not with --bulk, which simulates one gaming "
                        "day; leave out --bulk, or simulate each day into a folder of its own")
    try:
        if bulk:
            result = simulate_bulk(
                out_dir, tables, hours, seed, deviation_rate,
                day=day or BULK_DATE, replace=replace,
            )
        else:
            settings = NightSettings(
                tables, hours, seed, deviation_rate, chosen, day or SIM_DATE,
                error_prone_dealer=error_prone_dealer, counting_seat=counting_seat,
                shoe_twice=shoe_twice, unshuffled=unshuffled, phantom_shoe=phantom_shoe,
                shoe_reopened=shoe_reopened, lying=lying, unnotified_change=unnotified_change,
            )
            result = simulate_days(out_dir, settings, days, replace,
                                   continuing=continue_dir is not None)
    except ValueError as e:
        raise UserError(str(e)) from None
    except OSError as e:  # a folder the user cannot write: their setup, not a bug
        where = e.filename or out_dir
        raise UserError(f"{where}: cannot write the simulated logs there ({e.strerror})") from None
    out = console.out
    for path in result.files:
        out.print(str(path))
    for path in result.later:
        out.print(f"{path} (deliver after auditing the others: bacc-audit ingest {path})")
    out.print(str(result.ground_truth))
    for line in result.not_planted:  # asked for, yet the audit could not find it: say so
        console.err.print(said(line))
    out.print(
        f"{count(result.tables, 'table')}, {count(result.rounds, 'round')}, "
        f"{count(result.events, 'event')}, {count(len(result.deviations), 'deviation')} planted; "
        f"{result.rounds_per_second:,.0f} rounds/s"
    )
    if live is not None:
        feed_live(result, live, pace)


def _folder(out_dir: Path | None, continue_dir: Path | None, date: str | None,
            replace: bool) -> Path:
    """The folder written into: --out, or the previous simulation's that --continue names."""
    if continue_dir is None:
        if out_dir is None:
            raise UserError("--out is needed: the folder to write the logs into (or --continue "
                            "a previous simulation's folder, or --live SPOOL to feed a night "
                            "into a spool)")
        return out_dir
    clash = [name for name, given in (("--out", out_dir is not None and out_dir != continue_dir),
                                      ("--date", date is not None), ("--replace", replace))
             if given]
    if clash:
        raise UserError(f"--continue {continue_dir}: not with {', '.join(clash)}; it writes "
                        "into that folder, from the day after its last")
    return continue_dir
