"""Statistics, model fits and the claims' verdicts, from tidy tables.

Never imports the runners or an experiment's run code: analysis reads what
was measured, it does not measure.
"""
