"""Helpers shared by the tests; no tests here.

- `helpers.events`: the event log v1 examples (valid, allowed variations, forbidden lines), the
  schema they are checked against, and builders for events and JSONL lines.
- `helpers.db`: `AuditDb`, a fresh audit database with one run, for the ingest and CLI tests.
- `helpers.tablelog`: `Log`, which writes small table and pit logs, and `TablePassDb`, which
  ingests them and runs the table pass (the table, pit and shoe tests).
- `helpers.cli`: `run_cli`, `bacc-audit ARGS...` in-process: exit code, stdout, stderr.
- `helpers.shared`: `once`, `value_once` and `built_once`, what several modules or both xdist
  workers would build alike, built once a run (the sample night's databases:
  `helpers.sample.built`; the planted nights and renders of test_dealers, test_integrity,
  test_report and test_trends).
- `helpers.recall`: `audited_night`, a simulated night and its batch audit, once a run.

pytest puts tests/ on sys.path (rootdir-relative "prepend" import mode), so tests import them as
`from helpers.events import event`.
"""
