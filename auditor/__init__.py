"""bacc-audit: re-derive baccarat rounds from table event logs and flag deviations."""

__version__ = "0.1.0"
