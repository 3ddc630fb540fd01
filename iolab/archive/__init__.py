"""A run kept and shared: its archive as a Provenance Run Crate, the check of
a crate, the paper rebuilt from one offline, and runs compared side by side.

It sits on the read side above ``report`` (it rebuilds tables, notebooks and
the paper from a crate's raw files), and never reaches the run side.
"""
