"""One run's epochs, on Spark or in process: the pipeline's stages, workers, merge, monitor, migration, and the run's assembly."""
