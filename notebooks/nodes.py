# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Nodes compared: bare metal against VMs (and any two node kinds)
#
# Every experiment runs unchanged on every node of the inventory. Here the
# same quantities are set side by side per node: the cost-model components s
# and w, and, for a pair of node kinds, ratios of every echo and MPI metric
# computed from the summarised costs. Time ratios are native/virtual (below 1:
# the VM's penalty, as in the HPC HUB figures); throughput ratios are
# virtual/native. With one node kind only the per-node table is shown.

# %% tags=["parameters"]
# What to look at: change one and run all cells.
reps = []  # repetitions to use, e.g. [1, 2, 3]; []: all
kind_a = ""  # "": bare-metal if present
kind_b = ""  # "": vm if present

# %% [markdown]
# ### Where the data come from, and where the outputs go
# The pipeline sets these (papermill writes its values into the cell after
# this one). Opened by hand, each table is "auto": the pipeline's latest
# table when this checkout has one, else the reference data shipped in
# data/reference/ (a Parquet table or another raw-data root works too; ""
# is an experiment that did not run), and the figures and numbers go to
# results/by-hand/.

# %%
syscall_table = "auto"
sendrecv_table = "auto"
uring_batch_table = "auto"
echo_table = "auto"  # "" when the echo experiment is disabled
mpi_table = "auto"  # "" when the mpi experiment is disabled
figure_dir = "results/by-hand/figures"
numbers_out = "results/by-hand/numbers/nodes.json"
manifest_out = "results/by-hand/figures/nodes.json"

# %% tags=["injected-parameters"]
# (papermill's values replace this cell)

# %%
import matplotlib.pyplot as plt

from iolab import tables
from iolab.claims import nodecompare
from iolab.report import numbers, plots
from iolab.report.outputs import Outputs, figure_caption

plots.style.apply()
sources = {
    "syscall": syscall_table,
    "sendrecv": sendrecv_table,
    "uring_batch": uring_batch_table,
    "echo": echo_table,
    "mpi": mpi_table,
}
out = Outputs("nodes", figure_dir, numbers_out, manifest_out, tables=sources)
print(tables.describe_all(sources))
syscall = tables.load("syscall", syscall_table, reps=reps)
sendrecv = tables.load("sendrecv", sendrecv_table, reps=reps)
uring = tables.load("uring_batch", uring_batch_table, reps=reps)
echo = tables.load("echo", echo_table, reps=reps) if echo_table else None
mpi = tables.load("mpi", mpi_table, reps=reps) if mpi_table else None
kinds = nodecompare.node_kinds(syscall, echo, mpi)
pair = nodecompare.pick_pair(kinds, kind_a or None, kind_b or None)
print(f"nodes: {kinds}; compared: {pair or 'nothing (one node kind)'}")

# %% [markdown]
# ## s and w per node

# %%
costs = nodecompare.costs_per_node(syscall, sendrecv, uring)
fig = plots.nodes.costs_figure(costs)
out.figure(fig, "nodes_costs", data=syscall)
plt.show()
costs

# %% [markdown]
# ## Ratios between the two node kinds

# %%
echo_summary, mpi_per_rep = nodecompare.summaries(echo, mpi)
mpi_r = nodecompare.mpi_ratios(mpi_per_rep, *pair) if pair and mpi_per_rep is not None else None
echo_r = nodecompare.echo_ratios(echo_summary, *pair) if pair and echo_summary is not None else None
title = nodecompare.pair_title(kinds, pair)
if mpi_r is not None:
    fig = plots.nodes.mpi_ratio_figure(mpi_r, "MPI time ratio " + title, nodecompare.seed_lines())
    out.figure(fig, "nodes_mpi_ratio", caption=f"{figure_caption('nodes_mpi_ratio')} Nodes: {title}.", data=mpi)
    plt.show()
if echo_r is not None:
    fig = plots.nodes.echo_ratio_figure(echo_r, "Echo metric ratio " + title)
    out.figure(
        fig,
        "nodes_echo_ratio",
        caption=f"Echo ratios {title} per server configuration: "
        "req/s as second/first, CPU per request and p99 as first/second (below 1: the "
        "second node is worse).",
        data=echo,
    )
    plt.show()
mpi_r

# %% [markdown]
# ## Numbers for the paper

# %%
numbers.nodes(out, kinds=kinds, costs=costs, pair=pair, mpi_ratios=mpi_r, echo_ratios=echo_r)
out.finish()
out.texts()
