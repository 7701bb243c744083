"""auditor/merkle.py against RFC 9162's definitions, written here the plain recursive way, and
against the published vectors of Certificate Transparency's tests."""

from __future__ import annotations

import hashlib

import pytest

from auditor import merkle


def mth(leaves: list[bytes]) -> bytes:
    """MTH of RFC 9162 2.1.1, as written there (leaves are the data, not their hashes)."""
    n = len(leaves)
    if n == 0:
        return hashlib.sha256(b"").digest()
    if n == 1:
        return hashlib.sha256(b"\x00" + leaves[0]).digest()
    k = merkle.split(n)
    return hashlib.sha256(b"\x01" + mth(leaves[:k]) + mth(leaves[k:])).digest()


def path(m: int, leaves: list[bytes]) -> list[bytes]:
    """PATH(m, D[n]) of RFC 9162 2.1.3.1, as written there."""
    n = len(leaves)
    if n == 1:
        return []
    k = merkle.split(n)
    if m < k:
        return [*path(m, leaves[:k]), mth(leaves[k:])]
    return [*path(m - k, leaves[k:]), mth(leaves[:k])]


# Certificate Transparency's test data (merkle_tree_test): 8 leaves and the roots of their
# first 1..8.
CT_LEAVES = [bytes.fromhex(h) for h in (
    "", "00", "10", "2021", "3031", "40414243", "5051525354555657",
    "606162636465666768696a6b6c6d6e6f",
)]
CT_ROOTS = [
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]


def test_the_published_roots() -> None:
    hashes = [merkle.leaf_hash(d) for d in CT_LEAVES]
    for n in range(1, 9):
        assert merkle.root(hashes[:n]).hex() == CT_ROOTS[n - 1]
        assert mth(CT_LEAVES[:n]).hex() == CT_ROOTS[n - 1]
    assert merkle.root([]).hex() == hashlib.sha256(b"").hexdigest()


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 16, 17, 31, 33])
def test_roots_proofs_and_their_check_agree_with_the_rfc(n: int) -> None:
    data = [f"record {i}".encode() for i in range(n)]
    hashes = [merkle.leaf_hash(d) for d in data]
    expected = mth(data)
    assert merkle.root(hashes) == expected
    for m in range(n):
        proof = merkle.inclusion_proof(m, n, lambda a, b: merkle.leaves_root(hashes, a, b))
        assert proof == path(m, data)
        assert merkle.verify_inclusion(m, n, hashes[m], proof, expected)
        # another leaf, another index or a bit flipped in the proof: refused (the size comes
        # with the root, from the head printed: a proof alone does not fix it)
        other = merkle.leaf_hash(b"forged")
        assert not merkle.verify_inclusion(m, n, other, proof, expected)
        if n > 1:
            assert not merkle.verify_inclusion((m + 1) % n, n, hashes[m], proof, expected)
            bad = [bytes([proof[0][0] ^ 1]) + proof[0][1:], *proof[1:]]
            assert not merkle.verify_inclusion(m, n, hashes[m], bad, expected)


def test_the_frontier_grows_as_the_tree_and_keeps_its_perfect_subtrees() -> None:
    hashes = [merkle.leaf_hash(bytes([i])) for i in range(40)]
    f = merkle.Frontier(keep_level=2)
    for n, h in enumerate(hashes, start=1):
        f.append(h)
        assert f.root() == merkle.root(hashes[:n])
        again = merkle.Frontier.load(f.size, f.dump())
        assert again.root() == f.root()
    # every aligned subtree of 4 leaves or more, once, with its own root
    assert sorted((lv, i) for lv, i, _ in f.made) == sorted(
        [(2, i) for i in range(10)] + [(3, i) for i in range(5)] + [(4, i) for i in range(2)]
        + [(5, 0)]
    )
    for lv, i, h in f.made:
        assert h == merkle.root(hashes[i << lv:(i + 1) << lv])
    with pytest.raises(ValueError):
        merkle.Frontier.load(7, f.dump())
