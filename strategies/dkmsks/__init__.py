"""DkM-SKS and its baselines KOP and SOP: cost model, subscription partitioning, placement of new subscriptions."""
