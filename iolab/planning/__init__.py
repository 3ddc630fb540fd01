"""What to measure next: the rounds of adaptive precision within a run
(precision) and the launches a verdict about the machine kind still needs
(launches). Reads the claims' verdicts, never decides them."""
