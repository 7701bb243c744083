"""The `bacc-audit` command: the app, its commands in the order `--help` lists them (one
module each in auditor/cli/), and `main`, which turns every error into a sentence and an exit
code.

Exit codes: 0 clean (also when stdout's reader stops early: `findings | head -1`); 1 findings
(quarantined lines, refused files, findings at or above --fail-on; for verify, a record that
is not as sealed); 2 usage, input or
configuration error; 3 internal failure; 4 database busy; 5 another nightly run holds its
lock; 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import functools
import gc
import sys
from typing import Annotated

import typer
import typer.core
import typer.main
from typer import _click  # the click typer carries: its Context is what commands are given

from auditor import __version__
from auditor.cli import (
    ack,
    audit,
    backfill,
    close_day,
    codes,
    console,
    dealers,
    doctor,
    findings,
    ingest,
    nightly,
    notice,
    odds,
    report,
    runs,
    signoff,
    simulate,
    verify,
    watch,
)
from auditor.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, UserError
from auditor.store import db

EXIT_CODES_HELP = (
    "Exit codes: 0 clean (also when the reader of the output stops early, as `| head -1`); "
    "1 findings (quarantined lines, refused files, findings at or above "
    "--fail-on; for verify, a record that is not as sealed); "
    "2 usage, input or configuration error; 3 internal failure; 4 database busy; "
    "5 another nightly run holds its lock; 130 interrupted (Ctrl-C)."
)


class _Commands(typer.core.TyperGroup):
    """The root group: every command and subcommand is parsed inside its invoke, so a usage
    error's wording is mended here once.

    Typer validates values with pydantic, whose message for a ValueError (an enum's choices, a
    callback's refusal) begins "Value error, "; the sentence reads cleanly without it.
    """

    def invoke(self, ctx: _click.Context) -> object:
        try:
            return super().invoke(ctx)
        except typer.BadParameter as e:
            e.message = e.message.removeprefix("Value error, ")
            raise


_typed_display = typer.core.TyperOption.display_type_rich


def _flag_display_type(self: typer.core.TyperOption, ctx: _click.Context) -> str | None:
    """Typer 0.29 shows every flag as `--json <bool>`, which reads as if it took a value
    (`--json=true` is refused); a flag is shown bare."""
    return None if self.is_flag else _typed_display(self, ctx)


typer.core.TyperOption.display_type_rich = _flag_display_type  # type: ignore[method-assign]


app = typer.Typer(
    name="bacc-audit",
    cls=_Commands,
    help="Audit baccarat table event logs against the rules of the jurisdiction.\n\n"
    + EXIT_CODES_HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
    context_settings={"help_option_names": ["-h", "--help"]},  # subcommands inherit it
)

# In the order `bacc-audit --help` lists them.
COMMANDS = (
    ("ingest", ingest.ingest_cmd),
    ("audit", audit.audit_cmd),
    ("findings", findings.findings_cmd),
    ("dealers", dealers.dealers_cmd),
    ("codes", codes.codes_cmd),
    ("report", report.report_cmd),
    ("doctor", doctor.doctor_cmd),
    ("verify", verify.verify_cmd),
    ("odds", odds.odds_cmd),
    ("nightly", nightly.nightly_cmd),
    ("close-day", close_day.close_day_cmd),
    ("runs", runs.runs_cmd),
    ("ack", ack.ack_cmd),
    ("signoff", signoff.signoff_cmd),
    ("simulate", simulate.simulate_cmd),
    ("watch", watch.watch_cmd),
    ("backfill", backfill.backfill_cmd),
)
for _name, _command in COMMANDS:
    app.command(_name)(_command)
app.add_typer(notice.notice_app, name="notice")


def _version(value: bool) -> None:
    if value:
        console.out.print(f"bacc-audit {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show version.")
    ] = False,
) -> None:
    pass


@functools.cache
def command() -> _click.Command:
    """The click command typer builds from `app`, built once a process: `app()` builds it
    anew on every call (~0.1 s of CPU reading every command's signature), which a process
    that runs several commands (the tests, in-process) would pay each time. With pretty
    exceptions off, calling it is what `app()` does."""
    return typer.main.get_command(app)


def main() -> None:
    """Entry point: user errors become one sentence and an exit code, never a traceback.

    Click handles usage errors itself (exit 2) and typer.Exit carries each command's code.
    Ctrl-C is the operator's choice, not a bug: one line and 130, as a shell expects.
    """
    err = console.err
    try:
        command()()
    except SystemExit as e:
        if e.code == EXIT_INTERRUPTED:  # typer turns a KeyboardInterrupt into a silent 130
            err.print("interrupted")
        if console.closed_pipe(e):
            console.quiet_stdout()
            sys.exit(EXIT_OK)
        try:  # output still buffered meets a closed pipe here, not in the command
            sys.stdout.flush()
        except BrokenPipeError:
            console.quiet_stdout()
            sys.exit(EXIT_OK)
        raise
    except UserError as e:
        console.error(e)
        sys.exit(e.exit_code)
    except Exception as e:
        if db.interrupted(e):
            err.print("interrupted")
            sys.exit(EXIT_INTERRUPTED)
        full = db.setup_error(e)
        if full is not None:
            console.error(full)
            sys.exit(full.exit_code)
        err.print_exception()
        err.print(f"internal error: {e}; please report it with the command you ran")
        sys.exit(EXIT_INTERNAL)


def console_script() -> None:
    """What the `bacc-audit` command runs: `main`, once what the imports made is out of the
    garbage collector's sight. Those ~100,000 objects live as long as the process, yet every
    collection of the oldest generation walks them, and so does the last one at exit: about
    0.1 s of CPU a short command, 0.45 s of a shift report's 3.8 (docs/benchmarks.md,
    session 60). Garbage the command makes is collected as before. Not in `main`: a test
    that runs commands in its own process would freeze its own garbage with them."""
    gc.freeze()
    main()


if __name__ == "__main__":
    console_script()
