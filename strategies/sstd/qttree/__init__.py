"""SSTD's QT-tree (Chen et al., PVLDB 2020, Section 4): a quadtree whose nodes split either
spatially (4 equal quadrants) or textually (4 children with the parent's MBR), whichever lowers
the cost model (Eq. 1-2) more; leaves are allocated to workers by Karmarkar-Karp.

One job per module, in the paper's order (Section 4.1): `stats` (the query distribution
statistics J), `history` (the six-type historical queries J is fitted on), `paper_cost` (Eq. 1-2
as the paper writes them), `builder` (Algorithm 1), `onecopy` (the least-increment textual
assignment, at fit, in the routers and in FG), `onecopy_build` and `onecopy_router` (the paper's
tree and `OneCopyRouter`), `strategy` (`qttree`; its ablations quadtree.py and text_only.py sit
beside this package, and `qttree_termmap`). The term-map routing of `qttree_termmap`: `cost`
(Eq. 1-2 with the text factor on W_crq, and the term assignment), `assemble`, `route` (the compiled
routing kernels, also used for queries by the one-copy router) and `router` (`QTTreeRouter`).
Where the paper is vague: ADR-0096 (qttree), ADR-0019 (qttree_termmap, quadtree, text_only).
"""
