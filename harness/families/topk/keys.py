"""The result key of a top-k entry: (query, object, trigger seq) as one int64.

A message may leave a top-k and enter it again (on a refill after an expiry), so the pair alone
does not name an entry; the trigger (the seq of the event the entry happened at: the message's
arrival, the subscription's registration, or an expiry that made room) does. Shared by the merger
and the oracle because it is the digest's encoding, not a way of computing results.
"""

from __future__ import annotations

import numpy as np

from harness.core.events import pair_keys, splitmix64


def entry_keys(qid: np.ndarray, oid: np.ndarray, trigger: np.ndarray) -> np.ndarray:
    pair = splitmix64(pair_keys(qid, oid))
    return (pair ^ splitmix64(~np.asarray(trigger, np.int64))).view(np.int64)
