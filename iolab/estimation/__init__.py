"""How iolab estimates, whatever the experiment: every interval it reports
(intervals), the spread between occasions (occasion_spread) and change
points over a series of runs (changepoints). Knows no experiment and no
claim; the rooms and the claims build on it."""
