"""The order of payments and vigorish: which payout procedures (13:69F-7.10(b)1-4) fit it.

Reading of the regulation (findings format v1, "How the order codes read the regulation"):
a seat's payment is all of its pays (side wagers included); seats are taken from the
highest-numbered one with a winning wager down; pushes and collections are not part of it.
A round fits every procedure whose order it follows, so with one winning seat 1 and 3 look
alike (pay, then vigorish) and so do 2 and 4, and without vigorish all four coincide.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

PAY, VIG = "pay", "vig"
PROCEDURES = (1, 2, 3, 4)

Step = tuple[str, int]  # (PAY or VIG, seat)


def steps(pays_and_vigs: Iterable[tuple[str, int]], vig_charged: bool) -> list[Step]:
    """The observed order as steps: consecutive events of one kind at one seat are one step
    (a seat paid on two wagers in a row is one payment). Other event types are dropped, and
    so are vigorish events where the variant charges none (7.10(b)5: only the payments'
    order matters there; the vigorish itself is reported as vig.not_allowed)."""
    out: list[Step] = []
    for kind, seat in pays_and_vigs:
        if kind != PAY and not (kind == VIG and vig_charged):
            continue
        if not out or out[-1] != (kind, seat):
            out.append((kind, seat))
    return out


def procedure_order(
    procedure: int, pay_seats: Iterable[int], vig_seats: Iterable[int]
) -> list[Step]:
    """The order procedure 1-4 requires for these seats to be paid and charged vigorish."""
    return _required(procedure, sorted(set(pay_seats), reverse=True),
                     sorted(set(vig_seats), reverse=True))


def _required(procedure: int, pays: list[int], vigs: list[int]) -> list[Step]:
    """procedure_order of seats given each once, highest first."""
    if procedure == 1:  # pay every winner, then go back for the vigorish
        return [(PAY, s) for s in pays] + [(VIG, s) for s in vigs]
    if procedure == 2:  # all the vigorish, then go back and pay
        return [(VIG, s) for s in vigs] + [(PAY, s) for s in pays]
    first, then = (PAY, VIG) if procedure == 3 else (VIG, PAY)
    seats = {PAY: set(pays), VIG: set(vigs)}
    order: list[Step] = []
    for seat in sorted(seats[PAY] | seats[VIG], reverse=True):  # seat by seat
        for kind in (first, then):
            if seat in seats[kind]:
                order.append((kind, seat))
    return order


def required_order(procedure: int, observed: Sequence[Step]) -> list[Step]:
    """What `procedure` requires for the seats that appear in the observed steps."""
    return procedure_order(
        procedure,
        (s for k, s in observed if k == PAY),
        (s for k, s in observed if k == VIG),
    )


def consistent_procedures(
    pays_and_vigs: Iterable[tuple[str, int]], vig_charged: bool
) -> frozenset[int]:
    """The procedures 1-4 whose order the round's pays and vigorish follow.

    `pays_and_vigs` is ("pay" | "vig", seat) in event order; collect and push events may be
    included and are ignored. Empty when the order fits none (seats out of descending order,
    a seat's payment split, pays and vigorish interleaved in no procedure's way). Used per
    round here and over runs of rounds by the table audit (procedure.undeclared_change).
    """
    observed = steps(pays_and_vigs, vig_charged)
    pays = sorted({s for k, s in observed if k == PAY}, reverse=True)
    vigs = sorted({s for k, s in observed if k == VIG}, reverse=True)
    if len(pays) + len(vigs) != len(observed):  # a seat paid or charged twice apart
        return frozenset()
    return frozenset(p for p in PROCEDURES if _required(p, pays, vigs) == observed)


def first_departure(observed: Sequence[Step], required: Sequence[Step]) -> int:
    """Index of the first observed step that differs from the required order (observed and
    required differ; a seat paid twice apart makes the observed order the longer one)."""
    for i, (got, want) in enumerate(zip(observed, required, strict=False)):
        if got != want:
            return i
    return min(len(required), len(observed) - 1)
