"""`frwatch demo`: frwatch at work on a real multi-rank torch job that hangs."""
