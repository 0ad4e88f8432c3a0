"""The top-k worker's epoch state as named tuples: the arrays that form one state travel together.

The worker hands its epoch to the compiled loop (epoch.run_events) as a few named parts (the
window, the subscriptions, their buffers, the arena, the events) instead of forty arrays; the loop
unpacks them once, in the order of their fields, and gets the change rows and the arena back the
same way. Building a tuple copies array headers, not data. The kernels the loop calls on every
seq take the arrays themselves (epoch.py's module docstring says why).
"""

from __future__ import annotations

from collections import namedtuple

# the window's messages (the worker's local window, then the epoch's arrivals, in seq order): seq,
# expiry seq, location, terms as CSR (offsets, term ids) and their normalised weights
Window = namedtuple("Window", ["seq", "exp", "x", "y", "off", "val", "w"])

# the subscriptions by slot: live after seq `ins` and before seq `dele`, location, k, alpha, terms as
# CSR with their weights, and per CSR entry Skype's wtsum (Eq. 3) and Eq. 5's maxwt of the rest
Subscriptions = namedtuple("Subscriptions",
                           ["ins", "dele", "x", "y", "k", "alpha", "off", "val", "w", "wsum", "rmax"])

# each subscription's result buffer (skyband.py): its region of the arena (offset, capacity, length),
# its oldest member (a message index, -1 when empty), theta and the text floor lambda_T it implies
Buffers = namedtuple("Buffers", ["off", "cap", "size", "old", "theta", "lam"])

# the buffers' members, region by region: message index, score, dominance counter (grows)
Arena = namedtuple("Arena", ["msg", "score", "dom"])

# what the worker emits, one row per change of a local top-k (grows): slot, trigger seq, message
# index, score, +1 enter / -1 leave
Changes = namedtuple("Changes", ["slot", "trig", "msg", "score", "delta"])

# the epoch's events in seq order (seq, kind: 0 object, 1 insert, 2 delete, 3 a replica the route
# gained; ref: the message index of an object, the subscription slot of an insert or delete) and
# its expiries in seq order (seq, message index)
Stream = namedtuple("Stream", ["seq", "kind", "ref", "exp_seq", "exp_msg"])

# how buffers are refilled (skyband.py's CSKYBAND, RATIO or KMAX, its ratio, Kmax's k', cSkyband's
# price of a scored pair in buffer operations), MaxDist, and how an arrival finds its candidates
# (arrival.py's IGPT or IPT, ciq.py's CIQ: `index.topk.method`)
Policy = namedtuple("Policy", ["mode", "ratio", "kmax", "pair_cost", "max_dist", "method"])
