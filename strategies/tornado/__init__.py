"""Tornado: the A-Grid, the textual hash baseline, and the rebalancing adjuster."""
