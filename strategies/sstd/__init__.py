"""SSTD: the QT-tree, its Quadtree and Text ablations, and load balancing (PM, FM, FG)."""
