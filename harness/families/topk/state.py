"""The top-k worker's epoch state as named tuples: the arrays that form one state travel together.

A kernel of the worker takes a few named parts (the window, the subscriptions, their buffers, the
arena) instead of forty arrays, and unpacks at its top the ones it reads, so its loops run on plain
local arrays. Numba types a namedtuple of arrays as a record passed by value; building one copies
array headers, not data. The fields keep the order the kernels unpack them in.

A part whose arrays may grow during the epoch (the arena, the snapshots, the change rows, the
overflow lists) is rebuilt by the kernel that grows it and returned; the others are fixed in size
for the epoch and written in place.
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

# message -> the subscriptions whose oldest buffer member it is, as doubly linked lists
Oldest = namedtuple("Oldest", ["head", "nxt", "prv"])

# the top-k of each subscription a seq touched, as it was before the seq's changes (grows): the
# subscriptions, CSR offsets into the members, the members' message indexes and scores
Snapshots = namedtuple("Snapshots", ["touched", "off", "msg", "score"])

# what the worker emits, one row per change of a local top-k (grows): slot, trigger seq, message
# index, score, +1 enter / -1 leave
Changes = namedtuple("Changes", ["slot", "trig", "msg", "score", "delta"])

# term -> the subscriptions whose theta fell below the one their postings were sorted by, as linked
# entries (subscription, CSR entry of the term) (grows)
Overflow = namedtuple("Overflow", ["head", "nxt", "sub", "j"])

# the epoch's marks, fixed in size: per subscription the stamp of the last message that met it, the
# last seq its top-k was snapshotted and the last it was marked for re-evaluation, the theta (as a
# text floor) its postings are sorted by and whether it is in the overflow; per message its search
# stamp and its diff mark; room for a seq's re-evaluations, an arrival's candidates and an expiry's
# buffers (each at most every subscription); and the arriving message's Eq. 5 bounds over its u
# most frequent terms (its largest weight and its sum), per u
Marks = namedtuple("Marks", ["s_seen", "s_touch", "s_redo", "posted", "in_ov", "m_seen", "m_mark", "redo", "cand",
                             "leave", "m_rmax", "m_rsum"])

# the messages a window search scored (message_index.best_candidates) and their scores (grows)
Scored = namedtuple("Scored", ["msg", "score"])

# the epoch's events in seq order (seq, kind: 0 object, 1 insert, 2 delete, 3 a replica the route
# gained; ref: the message index of an object, the subscription slot of an insert or delete) and
# its expiries in seq order (seq, message index)
Stream = namedtuple("Stream", ["seq", "kind", "ref", "exp_seq", "exp_msg"])

# how buffers are refilled (skyband.py's CSKYBAND, RATIO or KMAX, its ratio, Kmax's k', cSkyband's
# price of a scored pair in buffer operations) and MaxDist
Policy = namedtuple("Policy", ["mode", "ratio", "kmax", "pair_cost", "max_dist"])

# the parts of an epoch's state that keep their size all epoch, as the phases of the epoch loop
# take them: the window, its message index (message_index.py: the blocks and a search's work space),
# the subscriptions and their index (subscription_index.py), the buffers, the oldest-member lists,
# the marks and the policy
Epoch = namedtuple("Epoch", ["win", "grid", "scratch", "subs", "sub_index", "bufs", "lists", "marks", "policy"])
