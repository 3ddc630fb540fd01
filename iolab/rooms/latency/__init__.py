"""The open-loop room: echo latency at fixed offered rates, with the
load generator's histograms."""
