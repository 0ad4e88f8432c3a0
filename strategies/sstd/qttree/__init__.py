"""SSTD's QT-tree (Chen et al., PVLDB 2020, Section 4): a quadtree whose nodes split either
spatially (4 equal quadrants) or textually (4 children with the parent's MBR), whichever lowers
the cost model (Eq. 1-2) more; leaves are allocated to workers by Karmarkar-Karp.

One job per module, in the paper's order (Section 4.1): `stats` (the query distribution
statistics J), `cost` (Eq. 1-2 and the textual split's term assignment), `builder` (Algorithm 1),
`assemble` (a node table -> router, at fit and for FG's rebuild), `route` (the compiled routing
kernels), `router` (`QTTreeRouter`) and `strategy` (`qttree`; its ablations quadtree.py and
text_only.py sit beside this package). Where the paper is vague: docs/decisions.md.
"""
