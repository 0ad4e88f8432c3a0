"""The command line: the Hydra application, the config schema and its checks, an invocation's runs, their records, Spark and the cluster."""
