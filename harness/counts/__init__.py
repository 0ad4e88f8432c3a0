"""The count mode (issue 51 part 1): what each worker and dispatcher of a run does, counted in
process without timing, the objects optionally sampled."""
