"""Replay: re-derive each round from its cards and the rule pack, as pure functions."""
