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
# # Echo servers: io_uring ring configurations against epoll
#
# Every configuration of `echo-uring` and `echo-epoll` under `loadgen`
# (closed-loop ping-pong, every echoed byte verified), across connections and
# message sizes, in a random order per repetition. The server and the load
# generator are pinned to different CPUs. Besides requests/s we report the
# server's CPU time per request, the stable quantity on a shared machine,
# against the floor 2w from the cost probes, and the load generator's own
# CPU per request, to show it is not the bottleneck.

# %% tags=["parameters"]
# What to look at: change one and run all cells.
node = ""  # "": the first node in name order
reps = []  # repetitions to use, e.g. [1, 2, 3]; []: all
presets = []  # e.g. ["epoll", "default"]; []: every preset

# %% [markdown]
# ### Where the data come from, and where the outputs go
# The pipeline sets these (papermill writes its values into the cell after
# this one). Opened by hand, each table is "auto": the pipeline's latest
# table when this checkout has one, else the reference data shipped in
# data/reference/ (a Parquet table or another raw-data root works too; ""
# is an experiment that did not run), and the figures and numbers go to
# results/by-hand/.

# %%
echo_table = "auto"
syscall_table = "auto"
sendrecv_table = "auto"
uring_batch_table = "auto"
latency_table = "auto"  # the open-loop latency experiment; "": not run
figure_dir = "results/by-hand/figures"
numbers_out = "results/by-hand/numbers/echo.json"
manifest_out = "results/by-hand/figures/echo.json"

# %% tags=["injected-parameters"]
# (papermill's values replace this cell)

# %%
import matplotlib.pyplot as plt

from iolab import tables
from iolab.report import plots
from iolab.report.outputs import Outputs
from iolab.rooms.cost_probes import cost_model as costmodel
from iolab.rooms.cost_probes import summaries as models
from iolab.rooms.echo import modern_stats as echo_stats
from iolab.rooms.echo import perbyte as echo_per_byte
from iolab.rooms.echo import present as echo_present
from iolab.rooms.echo import present_modern as echo_modern
from iolab.rooms.echo import summaries as echostats
from iolab.rooms.latency import present as latency_present
from iolab.rooms.latency import stats as latency

plots.style.apply()
sources = {
    "echo": echo_table,
    "syscall": syscall_table,
    "sendrecv": sendrecv_table,
    "uring_batch": uring_batch_table,
    "latency": latency_table,
}
out = Outputs("echo", figure_dir, numbers_out, manifest_out, tables=sources)
print(tables.describe_all(sources))
all_echo = tables.load("echo", echo_table, reps=reps)
node = models.choose_node(all_echo, node)
# Our event-loop client's cells (on io_uring where the node ran it) where
# several client models ran (the claims notebook judges the sources' claims
# with theirs).
echo = echostats.one_setup(echostats.select(all_echo, node, presets), echostats.OUR_SETUP)
print("setup:", echostats.setup_note(echo))
summary = echostats.summarize(echo)
syscall = tables.load("syscall", syscall_table, reps=reps)
# The floor comes from the cost probes of the echo node, or of the first
# node that ran them when the echo node did not (the inventory's choice).
cost_node = models.cost_node(syscall, node)
sendrecv = tables.load("sendrecv", sendrecv_table, reps=reps)
uring_batch = tables.load("uring_batch", uring_batch_table, reps=reps)
floor = models.floor_request(syscall, sendrecv, uring_batch, cost_node)
print(echostats.describe(echo, node, floor, cost_node))
echostats.unavailable(echo)

# %% [markdown]
# ## Every preset against epoll, and what each preset runs
# Ratios are formed within each repetition (cells of one repetition run
# seconds apart), then summarised across repetitions: the median and its
# 95 % interval, in the cells the paper discusses. The Go servers are set
# against Go's net package.

# %%
cells = echostats.discussed_cells(echo)
ratios = echostats.ratios_to_base(echo, cells)
fig = echo_present.ratio_figure(ratios, cells)
out.figure(fig, "echo_rps", data=echo)
plt.show()
flags = echostats.preset_flags(echo)
flags

# %% [markdown]
# ## Server CPU per request, against the 2w floor

# %%
fig = echo_present.cpu_figure(summary, floor)
out.figure(fig, "echo_cpu_per_request", data=echo)
plt.show()

# %% [markdown]
# ## Latency and the batch size each server reached

# %%
fig = echo_present.latency_figure(summary)
out.figure(fig, "echo_latency", data=echo)
plt.show()
fig = echo_present.batch_figure(summary)
out.figure(fig, "echo_batch_size", data=echo)
plt.show()

# %% [markdown]
# ## Open-loop latency
# The figures above are closed loop: a connection sends its next request only
# when the echo is back, so a stalled server is simply not asked, and the
# requests that would have queued behind the stall never count (coordinated
# omission). Here requests leave on a fixed schedule, at shares of each
# server's closed-loop capacity measured in the same repetition, and each is
# timed from when it was due. Percentiles per repetition, summarised across
# repetitions; crosses: all repetitions' histograms merged (HdrHistogram).
# The fixed-rate cells offer every server the same requests/s (a share of
# the slowest one's capacity): equal work, so server CPU per request compares
# the servers at one rate, as paired ratios to epoll.

# %%
open_loop = latency.select(tables.load("latency", latency_table, reps=reps), node) if latency_table else None
if open_loop is not None:
    print(latency.describe(open_loop, node))
    curves = latency.curves(open_loop)
    fig = latency_present.open_loop_figure(curves, latency.paired_ratios(open_loop))
    out.figure(fig, "echo_open_loop_latency", data=open_loop)
    plt.show()
    latency_present.numbers(out, table=open_loop, curves=curves)
    print("server CPU per request over epoll's at one rate for every preset:")
    print(latency_present.fixed_rate_text(latency.fixed_rate_cpu(open_loop)))
curves if open_loop is not None else None

# %% [markdown]
# ## Modern io_uring: does it beat epoll here?
# The presets whose flags turn on what Linux 6.9+ added (receive bundles,
# incremental buffer rings, batched waits, NAPI busy polling) or a gathered
# send, beside the cheapest older ring, as paired ratios to epoll under our
# setup at every depth (requests in flight) measured; the counters show
# whether each feature was in effect, and cells where none was are drawn
# hollow and left out of the answer. The modern overlay runs them.

# %%
node_echo = echostats.select(all_echo, node, presets)
modern_view = echo_stats.ratios(node_echo)
modern_counts = echo_stats.counters(node_echo)
modern_presets = echo_stats.modern_presets(node_echo)
if modern_presets:
    # Beside the saturated cells: the same ratio at the fixed offered rates
    # (the latency experiment), for the presets of this view.
    fixed, fixed_rows, fixed_cell = echo_modern.fixed_rate_view(open_loop, set(modern_view["preset"]))
    fig = echo_present.modern_figure(
        modern_view,
        echo_stats.GOAL,
        echo_stats.all_inert_cells(modern_counts),
        echo_stats.floor_ratios(node_echo, floor),
        fixed=fixed,
        fixed_cell=fixed_cell,
    )
    out.figure(fig, "echo_modern", data=echo_stats.figure_rows(node_echo, modern_presets, fixed_rows))
    plt.show()
    echo_modern.numbers(out, modern_view)
    out.text("echo_modern_features", echo_modern.features_text(modern_presets))
# The cost model's view: model B (the cost probes' fits) prices each preset's
# request at the SQEs and io_uring_enter calls it used; measured over that
# price is what the counts do not explain.
modern_cost = echo_stats.cost_view(
    node_echo, costmodel.central_inputs(costmodel.per_rep_inputs(syscall, sendrecv, uring_batch, node=cost_node))
)
out.text("echo_modern_answer", echo_modern.answer(modern_view, modern_counts, cost=modern_cost))
# Where the rings' extra cost at the largest sizes comes from: the servers'
# counters per echoed request beside those at the smallest size.
per_byte = echo_per_byte.excess_per_byte(node_echo)
if echo_per_byte.sentence(per_byte):
    out.text("echo_per_byte", echo_per_byte.sentence(per_byte))
print(modern_cost.round(2).to_string(index=False))
modern_counts

# %% [markdown]
# ## The two load generators
# The claims read the sources' setup (a blocking thread per connection,
# nothing pinned), the figures above ours (an event-loop client, pinned):
# the default ring over epoll under each, where this run drove both.

# %%
clients = echostats.clients_view(all_echo, node)
if echostats.clients_planned(all_echo, node):
    fig = echo_present.clients_figure(clients)
    out.figure(fig, "echo_clients", data=echostats.select(all_echo, node, presets))
    plt.show()
if len(clients):
    out.text("echo_clients_sentence", echostats.clients_sentence(clients))
clients

# %% [markdown]
# ## The sources' table, with our numbers beside theirs
# The article's requests/s are quoted (i5-7500, Linux 5.11, 60 s runs); ours
# are medians of this run's repetitions on this node. The claims' verdicts
# (paired ratios per repetition) are in the claims notebook.

# %%
echostats.seed_table(echostats.select(all_echo, node, presets))

# %% [markdown]
# ## Numbers for the paper

# %%
echo_present.numbers(out, echo_table=echo, summary=summary, floor=floor, ratios=ratios, flags=flags)
echo_present.cell_lengths(out, echostats.select(all_echo, node, presets))
out.finish()
out.texts("echo_default")
