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
# # MPI ping-pong and collectives: Hockney and the collective-latency models
#
# `mpi-probe` timed every iteration on every rank: ping-pong, bcast,
# allreduce, alltoall and barrier, over shared memory, TCP on this host, and
# TCP between network namespaces (separate TCP/IP stacks joined by veth and
# a bridge), one of them rate-shaped with tbf to a known bandwidth. A
# collective iteration's time is the maximum over ranks; a ping-pong's is
# half the round trip. Each repetition (one launch per transport and rank
# count) gives a median; we report the median over repetitions with its 95 %
# interval across them and, for comparison with the HPC HUB study, its own
# estimator (mean of the 3 smallest series means). Points with more ranks than CPUs (oversubscribed,
# `mpi_yield_when_idle` on) are drawn hollow.

# %% tags=["parameters"]
# What to look at: change one and run all cells.
node = ""  # "": the first node in name order
reps = []  # repetitions to use, e.g. [1, 2, 3]; []: all
transports = []  # e.g. ["shm", "tcp"]; []: every transport

# %% [markdown]
# ### Where the data come from, and where the outputs go
# The pipeline sets these (papermill writes its values into the cell after
# this one). Opened by hand, each table is "auto": the pipeline's latest
# table when this checkout has one, else the reference data shipped in
# data/reference/ (a Parquet table or another raw-data root works too; ""
# is an experiment that did not run), and the figures and numbers go to
# results/by-hand/.

# %%
mpi_table = "auto"
figure_dir = "results/by-hand/figures"
numbers_out = "results/by-hand/numbers/collectives.json"
manifest_out = "results/by-hand/figures/collectives.json"

# %% tags=["injected-parameters"]
# (papermill's values replace this cell)

# %%
import matplotlib.pyplot as plt

from iolab import tables
from iolab.report import plots
from iolab.report.outputs import Outputs
from iolab.rooms.cost_probes import summaries as models
from iolab.rooms.mpi import latency_models as mpimodels
from iolab.rooms.mpi import present as mpi_present
from iolab.rooms.mpi import stats as mpistats

plots.style.apply()
out = Outputs("collectives", figure_dir, numbers_out, manifest_out, tables={"mpi": mpi_table})
print(tables.describe("mpi", mpi_table))
# Pinned algorithms where both selections ran: the models need the algorithm.
raw = mpistats.one_selection(mpistats.select(tables.load("mpi", mpi_table, reps=reps), transports), "pinned")
node = models.choose_node(raw, node)
times = mpistats.iteration_times(raw)
# This node's transports, plus MPI across nodes from whichever node ran it.
summary = mpistats.report_rows(mpistats.summarize(times), node)
per_rep = mpistats.report_rows(mpistats.rep_medians(times), node)
measured = mpistats.transports(summary)
print(mpistats.describe(raw, times, node, measured))
mpistats.overview(summary)

# %% [markdown]
# ## Ping-pong: Hockney fits, piecewise for the eager and rendezvous ranges
# The breakpoint is chosen from the data (least total weighted error). The
# tbf-shaped cluster's bandwidth, the slope of an unconstrained line through
# its large-message times (tbf's burst makes the intercept negative), is
# checked against the imposed rate.

# %%
hockney = mpimodels.hockney_fits(summary, per_rep)
rate_mbit = mpistats.tbf_rate(summary)
fig = mpi_present.pingpong_figure(summary, hockney, rate_mbit)
out.figure(fig, "mpi_pingpong", data=raw)
plt.show()
mpimodels.hockney_table(hockney)

# %% [markdown]
# ## mpi-probe against a minimal OSU-style ping-pong
# The reference times one loop of blocking MPI_Send/MPI_Recv round trips and
# divides by the count, as `osu_latency` does; ours times each round trip.
# Both are compared on the same statistic: the median over series of the
# series' mean (so a few slow round trips count alike in both).

# %%
agreement = mpistats.reference_agreement(mpistats.report_rows(times, node))
agreement

# %% [markdown]
# ## Collectives against the models
# The paper's formulas, and the formula of the algorithm that ran (pinned
# through `coll_tuned`; recorded by the probe through MPI_T). Fits use the
# rank counts that fit on the CPUs; oversubscribed points are shown, with the
# fitted curves extended to them, but not fitted.

# %%
fits = mpimodels.collective_fits(summary, per_rep)
fig = mpi_present.collectives_figure(summary, mpimodels.fit_curves(fits))
out.figure(fig, "mpi_collectives", data=raw)
plt.show()
fig = mpi_present.prediction_error_figure(mpimodels.prediction_errors(fits), summary, mpimodels.fit_curves(fits))
out.figure(fig, "mpi_prediction_error", data=raw)
plt.show()
fits.drop(columns="errors")

# %% [markdown]
# ## Transport ratios, as the HPC HUB native/VM figures
# With one node kind there is no bare-metal/VM pair: we show the same kind of
# ratio between transports instead (faster over slower, so below 1 is the
# penalty of the slower path), each formed within a repetition.

# %%
ratio_tables = mpistats.transport_ratios(per_rep, measured)
fig = mpi_present.ratio_figure(ratio_tables)
out.figure(fig, "mpi_transport_ratio", data=raw)
plt.show()

# %% [markdown]
# ## Our timing method against OSU's
# Where `mpi-probe --method osu` ran too (`experiments.mpi.methods`), both
# methods on OSU's statistic (average over ranks of each rank's mean time),
# size by size, each ratio formed within a repetition. Ours writes and checks
# the buffers every iteration and synchronises before it; OSU reuses them.

# %%
method_ratios = mpistats.method_ratios(mpistats.osu_values(mpistats.report_rows(raw, node)))
if len(method_ratios):
    fig = mpi_present.method_ratio_figure(method_ratios)
    out.figure(fig, "mpi_method_ratio", data=raw)
    plt.show()
mpi_present.method_agreement(out, method_ratios)
method_ratios

# %% [markdown]
# ## Numbers for the paper

# %%
mpi_present.collectives(
    out,
    raw=raw,
    summary=summary,
    transports=measured,
    hockney=hockney,
    rate_mbit=rate_mbit,
    agreement=agreement,
    fits=fits,
    ratio_tables=ratio_tables,
)
out.finish()
out.texts("mpi_tbf")
