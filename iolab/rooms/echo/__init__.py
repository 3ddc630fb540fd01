"""The echo servers' room: closed-loop cells of every server and ring
preset, with their per-request costs."""
