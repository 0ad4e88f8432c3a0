"""DSkype's distributions of top-k subscriptions to workers: hash, location, keyword, prefix and hybrid."""
