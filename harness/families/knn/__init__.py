"""kNN spatial-keyword queries, continuous and snapshot (DkM-SKS's subscriptions, SSTD's CKQ and SKQ): index, merger, oracle."""
