"""The filing's own thread (auditor.jobs.filing.FilingThread): `watch --file-reports` asks for
a filing after each sweep and polls on while a report renders (14-25 s for a busy shift), the
asks made meanwhile are answered by one more filing, the last sweep's filing is done before
the run ends, and a filing that fails stops the watch where it asks next."""

from __future__ import annotations

import threading

import pytest

from auditor.jobs.filing import FilingThread


class _Filer:
    """A filing that takes as long as the test says (`release`)."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.calls = 0
        self.fail: Exception | None = None

    def file(self) -> None:
        self.calls += 1
        self.started.set()
        assert self.release.wait(10)
        if self.fail is not None:
            raise self.fail


def test_the_polls_go_on_while_a_filing_runs_and_one_more_answers_what_was_asked_meanwhile():
    filer = _Filer()
    with FilingThread(filer.file) as thread:
        thread.request()
        assert filer.started.wait(10)
        # The filing is under way and holds on: the sweeps that end meanwhile ask at once.
        for _ in range(3):
            thread.request()
        assert not thread.drain(0.05)
        assert filer.calls == 1
        filer.release.set()
        assert thread.drain(10)
        assert filer.calls == 2  # the three asks made during the first: one filing
    assert filer.calls == 3  # the run's end: once more, for what its last sweep decided


def test_a_filing_that_fails_stops_the_watch_where_it_asks_next():
    filer = _Filer()
    filer.fail = OSError(28, "No space left on device")
    filer.release.set()
    thread = FilingThread(filer.file).__enter__()
    thread.request()
    assert thread.drain(10)
    with pytest.raises(OSError, match="No space left"):
        thread.request()
    thread.close()  # raised once: the watch's own stop does not raise it again
    assert filer.calls == 1


def test_a_watch_that_fails_files_nothing_after_it_and_its_error_goes_up():
    filer = _Filer()
    filer.release.set()
    with pytest.raises(RuntimeError, match="poll failed"), FilingThread(filer.file):
        raise RuntimeError("poll failed")
    assert filer.calls == 0
