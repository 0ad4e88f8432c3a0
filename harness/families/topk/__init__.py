"""Top-k spatial-keyword subscriptions over a sliding window (Skype/DSkype): index, compiled epoch, buffers, merger, oracle."""
