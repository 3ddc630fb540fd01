"""Zero-copy send's room (cost-probe send-zc): its raw "# zc_usage:" lines
and tidy table (tidy), its ratios and crossover (stats), and its numbers,
figure and caption for the paper (present, send_zc_cost.rst)."""
