"""Metrics, the runs table, plots, experiments, the claims engine, the reports and the results site."""
