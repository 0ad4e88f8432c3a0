"""The paper's textual partitioning (SSTD Sec. 4.1.2, l.188; Sec. 4.2, l.221): an object goes to
exactly ONE textual child, the one whose Eq. 2 workload grows least if it takes the object, and
that child's keyword list (with its H_srq, H_skq of Eq. 1 and its object count) is updated by the
object's keywords. The same rule splits a node at fit (Algorithm 1's textualPartitioning), routes
objects at every router (each router evolving its own keyword lists, l.227) and splits a leaf in
FG (strategies/sstd/fgtree.py): one compiled increment (`_increment`) serves all three.

A node's cost is |O| * (c0 + P_s(H_srq) + P_k(H_skq)) (paper_cost.py): c0 gathers the types
without a text factor (STQ, CRQ, CKQ, CTQ), P_s and P_k are Eq. 1's polynomials times Pr(type) and
p_type. Only keywords with mass in M_srq or M_skq change H, so a keyword list keeps those alone.

Router state (per dispatcher d): n[d, node], hs[d, node], hk[d, node], and a hash set of
(d, node, term) keys, the keyword list entries added since fit; the fit's lists are a CSR per node
shared by every dispatcher (`base_off`, `base_terms`, sorted).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from harness.core.kernels import lower_bound
from strategies.sstd.qttree.route import LEAF, SPATIAL, TEXT

EMPTY = np.int64(-1)


@njit(cache=True, inline="always")
def _poly(coef, row, h):
    v = 0.0
    for j in range(coef.shape[1] - 1, -1, -1):
        v = v * h + coef[row, j]
    return v


@njit(cache=True, inline="always")
def _increment(n, hs, hk, ds, dk, c0, ps, pk, row):
    """Eq. 2's workload increment of a child holding n objects with H_srq = hs, H_skq = hk when it
    takes one more object bringing keyword masses ds, dk: (n + 1) W(H') - n W(H), written as
    W(H') + n (W(H') - W(H)) so that an object bringing no new mass costs exactly W(H) (ties are
    exact, and go to the child with fewer objects: `_better`)."""
    after = c0 + _poly(ps, row, hs + ds) + _poly(pk, row, hk + dk)
    if ds == 0.0 and dk == 0.0:
        return after
    return after + n * ((_poly(ps, row, hs + ds) - _poly(ps, row, hs)) + (_poly(pk, row, hk + dk) - _poly(pk, row, hk)))


@njit(cache=True, inline="always")
def _better(inc, n, best_inc, best_n):
    """The paper assigns an object to the child of smallest increment (l.188); it is silent on
    ties, which go to the child holding fewer objects, then to the lower child (ADR-0096)."""
    return inc < best_inc or (inc == best_inc and n < best_n)


# --- the fit's and FG's split: one node's objects over four empty children ----------------------


@njit(cache=True)
def split_objects(o_off, o_idx, ms, mk, c0, ps, pk):
    """Algorithm 1's textualPartitioning (l.188): the node's objects in order (CSR `o_off` over
    `o_idx`, each keyword as its index into `ms`/`mk`, the cell's M_srq, M_skq masses; -1 = a
    keyword without mass), each to the child of least increment (ties: the lowest child), that
    child's keyword list updated. Returns (child per object, per child its member flags)."""
    n_obj = len(o_off) - 1
    member = np.zeros((4, len(ms)), np.bool_)
    n = np.zeros(4)
    hs = np.zeros(4)
    hk = np.zeros(4)
    child = np.empty(n_obj, np.int64)
    for i in range(n_obj):
        best = 0
        best_d = np.inf
        for c in range(4):
            ds = 0.0
            dk = 0.0
            for j in range(o_off[i], o_off[i + 1]):
                u = o_idx[j]
                if u >= 0 and not member[c, u] and (j == o_off[i] or o_idx[j - 1] != u):
                    ds += ms[u]
                    dk += mk[u]
            d = _increment(n[c], hs[c], hk[c], ds, dk, c0, ps, pk, 0)
            if c == 0 or _better(d, n[c], best_d, n[best]):
                best_d = d
                best = c
        child[i] = best
        for j in range(o_off[i], o_off[i + 1]):
            u = o_idx[j]
            if u >= 0 and not member[best, u]:
                member[best, u] = True
                hs[best] += ms[u]
                hk[best] += mk[u]
        n[best] += 1.0
    return child, member


# --- the routers' keyword lists: a hash set of (dispatcher, node, term) -------------------------


@njit(cache=True, inline="always")
def _slot(key, mask):
    h = (key * np.int64(0x9E3779B97F4A7C15)) ^ (key >> 29)
    return h & mask


@njit(cache=True, inline="always")
def _probe(table, key):
    """The slot holding `key`, or the empty slot where it would go (linear probing)."""
    mask = len(table) - 1
    s = _slot(key, mask)
    while table[s] != EMPTY and table[s] != key:
        s = (s + 1) & mask
    return s


@njit(cache=True)
def hash_contains(table, key):
    return table[_probe(table, key)] == key


@njit(cache=True)
def hash_insert(table, key):
    """Insert `key`; True when it was new (the caller keeps the load factor under 1/2)."""
    s = _probe(table, key)
    if table[s] == key:
        return False
    table[s] = key
    return True


@njit(cache=True)
def hash_rehash(table, cap):
    out = np.full(cap, EMPTY, np.int64)
    for k in table:
        if k != EMPTY:
            hash_insert(out, k)
    return out


@njit(cache=True, inline="always")
def _bsearch(arr, lo, hi, x):
    """Index of x in the sorted arr[lo:hi], or -1."""
    i = lower_bound(arr, lo, hi, x)
    return i if i < hi and arr[i] == x else -1


@njit(cache=True)
def assign_objects(rows, disp, xs, ys, offsets, values, kind, first_child, mid_x, mid_y, node_leaf,
                   m_off, m_terms, m_s, m_k, c0, ps, pk, base_off, base_terms,
                   n, hs, hk, table, used, n_nodes):
    """Each object row (in seq order; `disp` its dispatcher) down the tree: a spatial node sends it
    to the quadrant of its point, a textual node to the child of least Eq. 2 increment under the
    dispatcher's own keyword lists, which it then updates (l.221). Returns the leaf per row; `n`,
    `hs`, `hk`, `table` and `used[0]` (the set's size) are the dispatchers' state, updated in place.
    The caller sizes `table` for every insertion this call can make."""
    out = np.empty(len(rows), np.int64)
    ds = np.zeros(4)
    dk = np.zeros(4)
    for i in range(len(rows)):
        r = rows[i]
        d = disp[i]
        node = 0
        while True:
            k = kind[node]
            if k == LEAF:
                break
            fc = first_child[node]
            if k == SPATIAL:
                node = fc + (1 if xs[r] >= mid_x[node] else 0) + (2 if ys[r] >= mid_y[node] else 0)
                continue
            lo = offsets[r]
            hi = offsets[r + 1]
            mlo = m_off[node]
            mhi = m_off[node + 1]
            best = 0
            best_d = np.inf
            for c in range(4):
                ch = fc + c
                ds[c] = 0.0
                dk[c] = 0.0
                for j in range(lo, hi):
                    t = np.int64(values[j])
                    if j > lo and values[j - 1] == values[j]:
                        continue
                    u = _bsearch(m_terms, mlo, mhi, t)
                    if u < 0:
                        continue
                    if _bsearch(base_terms, base_off[ch], base_off[ch + 1], t) >= 0:
                        continue
                    if hash_contains(table, ((d * n_nodes + ch) << 32) | t):
                        continue
                    ds[c] += m_s[u]
                    dk[c] += m_k[u]
                inc = _increment(n[d, ch], hs[d, ch], hk[d, ch], ds[c], dk[c], c0[node], ps, pk, node)
                if c == 0 or _better(inc, n[d, ch], best_d, n[d, fc + best]):
                    best_d = inc
                    best = c
            ch = fc + best
            for j in range(lo, hi):
                t = np.int64(values[j])
                if j > lo and values[j - 1] == values[j]:
                    continue
                u = _bsearch(m_terms, mlo, mhi, t)
                if u < 0 or _bsearch(base_terms, base_off[ch], base_off[ch + 1], t) >= 0:
                    continue
                if hash_insert(table, ((d * n_nodes + ch) << 32) | t):
                    used[0] += 1
            hs[d, ch] += ds[best]
            hk[d, ch] += dk[best]
            n[d, ch] += 1.0
            node = ch
        out[i] = node_leaf[node]
    return out


@njit(cache=True)
def text_depth(kind, first_child):
    """The most textual nodes on one root-leaf path (bounds a row's keyword-list insertions)."""
    n = len(kind)
    depth = np.zeros(n, np.int64)
    best = 0
    for v in range(n):  # parents precede their children (children contiguous, root first)
        if kind[v] != LEAF:
            add = 1 if kind[v] == TEXT else 0
            for c in range(first_child[v], first_child[v] + 4):
                depth[c] = depth[v] + add
                if depth[c] > best:
                    best = depth[c]
    return best
