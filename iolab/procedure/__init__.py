"""Checks of the procedure itself: how often its verdicts are wrong, by
simulation (machine_errors, kind_errors, precision_errors), their power,
and how much a decision ratio varies at each level (variance_components).
Sits above the claims and the planning it checks."""
