"""The challenge balance, as the agent counts it from the node's queue.

The market does not publish a provider's balance of completed challenge
proofs (documentation/en/experimental-features/Snark-Market.md: slots =
balance // 50), and Curio keeps no count of it. So the agent counts: it
starts from the balance the operator read on the market's dashboard
(`market_challenges`, the ledger's `based_on`) and, reading after reading:

- +1 per challenge proof (``was_pow``) seen computed and submitted;
- +1 paid proof (`paid_proofs_total`, not the balance) per paid row seen
  submitted;
- -`PENALTY_CHALLENGES` (50, not below 0) per row seen still open
  (not submitted) past its deadline, ``obtained_at`` + 45 minutes. The doc
  says "assigned work"; a late challenge proof is charged too (the
  simulator charges it nothing, so there the count errs low: the safe
  side for the guards, which refuse what would spend a balance the agent
  is not sure of);
- -1 per ask the agent withdrew (`withdrew`, counted by the levers:
  activities/market.py).

Each row counts once: its ``service_id`` is kept (the newest `MAX_IDS`
per kind; PSListQueue shows the 15 newest rows, so an id that old is long
out of view).

**The limits, honestly.** PSListQueue shows the 15 newest rows only: at
more than 15 rows between two readings (high rates, or a long gap between
polls) a row can come and go unseen, and its challenge, payment or penalty
is missed. A row Curio deletes (a late answer the service calls gone,
HTTP 410) is missed unless a reading saw it open past its deadline. Asks
withdrawn by anyone else (the operator in the GUI) are not counted, nor is
the market's own doing ("may assign real proofs as challenges"). So the
count drifts, and the operator re-bases it: when `market_challenges`
changes (the policy's `challenges` is not the ledger's `based_on`), the
balance becomes the new value; the totals and the ids seen stay, so rows
already counted are not counted again.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from datetime import timedelta

from fleet_agent.demand.sources import CURIO_DEADLINE_MINUTES

from .point import MAX_IDS, PENALTY_CHALLENGES, ChallengeLedger, MarketPolicy, MarketReading

__all__ = ["advance", "withdrew"]

_LIMIT = 10**9
_DEADLINE = timedelta(minutes=CURIO_DEADLINE_MINUTES)


def _kept(ids: list[str], new: list[str]) -> list[str]:
    """`ids` and `new` (in order), the newest `MAX_IDS`."""
    return (ids + new)[-MAX_IDS:] if new else ids


def advance(
    ledger: ChallengeLedger | None, reading: MarketReading, policy: MarketPolicy
) -> ChallengeLedger:
    """The ledger after `reading` (None: the first reading, from the
    operator's balance; a changed `policy.challenges` re-bases it)."""
    if ledger is None:
        ledger = ChallengeLedger(based_on=policy.challenges, challenges=policy.challenges)
    elif policy.challenges != ledger.based_on:
        ledger = ledger.model_copy(
            update={"based_on": policy.challenges, "challenges": policy.challenges}
        )
    pow_seen, paid_seen, late_seen = set(ledger.pow_ids), set(ledger.paid_ids), set(ledger.late_ids)
    pow_new: list[str] = []
    paid_new: list[str] = []
    late_new: list[str] = []
    # Oldest first, so the ids kept last are the newest.
    for row in sorted(reading.rows, key=lambda r: r.obtained_at):
        sid = row.service_id
        if row.submitted:
            if row.was_pow and row.computed and sid not in pow_seen:
                pow_seen.add(sid)
                pow_new.append(sid)
            elif not row.was_pow and sid not in paid_seen:
                paid_seen.add(sid)
                paid_new.append(sid)
        elif reading.as_of > row.obtained_at + _DEADLINE and sid not in late_seen:
            late_seen.add(sid)
            late_new.append(sid)
    challenges = ledger.challenges + len(pow_new)
    challenges = max(0, challenges - PENALTY_CHALLENGES * len(late_new))
    return ledger.model_copy(
        update={
            "challenges": min(challenges, _LIMIT),
            "pow_done_total": min(ledger.pow_done_total + len(pow_new), _LIMIT),
            "penalties_total": min(ledger.penalties_total + len(late_new), _LIMIT),
            "paid_proofs_total": min(ledger.paid_proofs_total + len(paid_new), 10**12),
            "pow_ids": _kept(ledger.pow_ids, pow_new),
            "paid_ids": _kept(ledger.paid_ids, paid_new),
            "late_ids": _kept(ledger.late_ids, late_new),
        }
    )


def withdrew(ledger: ChallengeLedger, n: int) -> ChallengeLedger:
    """The ledger after the agent withdrew `n` asks (1 challenge proof each)."""
    if n <= 0:
        return ledger
    return ledger.model_copy(
        update={
            "challenges": max(0, ledger.challenges - n),
            "withdrawals_total": min(ledger.withdrawals_total + n, _LIMIT),
        }
    )
