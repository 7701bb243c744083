"""The Merkle tree of RFC 9162 (Certificate Transparency 2.0, section 2.1) over SHA-256, in
plain Python: what the audit database's ledger is built on (docs/ledger.md).

Pure and self-contained on purpose: a regulator re-derives every hash here from the RFC, and
the stand-alone check of a filed report (auditor/ledger_check.py) needs nothing else.

- a leaf's hash is SHA-256(0x00 || its bytes), an inner node's SHA-256(0x01 || left ||
  right); the tree of n leaves is split at the largest power of two below n;
- the tree grows by appending: `Frontier` keeps the roots of its perfect subtrees, largest
  first (one per set bit of the size), so a seal adds k leaves in O(k + log n) hashes;
- an inclusion proof (RFC 9162 2.1.3) says that a leaf is the m-th of the tree whose root a
  report printed; `verify_inclusion` is the RFC's algorithm, step by step.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

LEAF = b"\x00"
NODE = b"\x01"
EMPTY_ROOT = hashlib.sha256(b"").digest()


def leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(LEAF + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(NODE + left + right).digest()


def split(n: int) -> int:
    """The largest power of two below n (n > 1): where the RFC splits a tree of n leaves."""
    return 1 << ((n - 1).bit_length() - 1)


@dataclass
class Frontier:
    """A tree of `size` leaves as the roots of its perfect subtrees, largest first: what a
    seal needs to append to it. `made` collects the perfect subtrees of at least
    2**keep_level leaves that appending completed, as (level, index at that level, hash),
    for a cache of inner nodes (proofs then need no pass over every leaf)."""

    size: int = 0
    peaks: list[tuple[int, bytes]] = field(default_factory=list)  # (level, hash)
    keep_level: int | None = None
    made: list[tuple[int, int, bytes]] = field(default_factory=list)

    def append(self, leaf: bytes) -> None:
        """Add one leaf hash."""
        level, h, start = 0, leaf, self.size
        while self.peaks and self.peaks[-1][0] == level:
            _, left = self.peaks.pop()
            h = node_hash(left, h)
            level += 1
            start -= 1 << (level - 1)
            if self.keep_level is not None and level >= self.keep_level:
                self.made.append((level, start >> level, h))
        self.peaks.append((level, h))
        self.size += 1

    def extend(self, leaves: Iterable[bytes]) -> None:
        for leaf in leaves:
            self.append(leaf)

    def root(self) -> bytes:
        """The root of the tree of `size` leaves (MTH of the RFC)."""
        if not self.peaks:
            return EMPTY_ROOT
        h = self.peaks[-1][1]
        for _, left in reversed(self.peaks[:-1]):
            h = node_hash(left, h)
        return h

    def dump(self) -> list[list[object]]:
        """The peaks as JSON-ready values: [[level, hex], ...]."""
        return [[level, h.hex()] for level, h in self.peaks]

    @classmethod
    def load(cls, size: int, peaks: Sequence[Sequence[object]]) -> Frontier:
        got = [(int(str(level)), bytes.fromhex(str(h))) for level, h in peaks]
        if sum(1 << level for level, _ in got) != size:
            raise ValueError(f"the peaks do not make a tree of {size} leaves")
        return cls(size, got)


def root(leaves: Sequence[bytes]) -> bytes:
    """MTH of the RFC over leaf hashes."""
    f = Frontier()
    f.extend(leaves)
    return f.root()


SubtreeRoot = Callable[[int, int], bytes]  # (start, end) -> MTH of leaves [start, end)


def inclusion_proof(index: int, size: int, subtree: SubtreeRoot) -> list[bytes]:
    """PATH(index, D[size]) of RFC 9162 2.1.3.1, leaf side first; `subtree(start, end)` gives
    the root of the leaves [start, end) (from the leaves, or a cache of inner nodes)."""
    if not 0 <= index < size:
        raise ValueError(f"leaf {index} is not in a tree of {size} leaves")
    path: list[bytes] = []
    start, end = 0, size
    while end - start > 1:
        k = split(end - start)
        if index < start + k:
            path.append(subtree(start + k, end))
            end = start + k
        else:
            path.append(subtree(start, start + k))
            start += k
    path.reverse()
    return path


def verify_inclusion(
    index: int, size: int, leaf: bytes, proof: Sequence[bytes], expected_root: bytes
) -> bool:
    """RFC 9162 2.1.3.2: whether `leaf` is leaf `index` of the tree of `size` leaves whose
    root is `expected_root`, by `proof`."""
    if not 0 <= index < size:
        return False
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == expected_root


def leaves_root(leaves: Sequence[bytes], start: int, end: int) -> bytes:
    """MTH of leaves[start:end] (a subtree for `inclusion_proof` when every leaf is at hand)."""
    return root(leaves[start:end])
