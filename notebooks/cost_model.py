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
# # The echo cost model: s, w, t(n)
#
# The OpenAnolis model prices one operation (a send or a recv) at *s + w*
# under epoll and *(t + s)/n* under io_uring, where *s* is the user↔kernel
# switch cost, *w* the kernel work of the send/recv, *t* the kernel time of
# submitting a batch and *n* the batch size. We measure each term with
# `cost-probe` and fit two forms of the io_uring cost:
#
# * (A) the article's: *t* constant per batch, per operation *(t + s)/n*;
# * (B) linear batch time *T(n) = a + b·n*, per operation *(s + a)/n + b*.
#
# Run by hand, this notebook reads the reference data in `data/reference/`;
# the pipeline passes the tables it just measured. The claims' verdicts are
# in the claims notebook.

# %% tags=["parameters"]
# What to look at: change one and run all cells.
node = ""  # "": the first node in name order
reps = []  # repetitions to use, e.g. [1, 2, 3]; []: all

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
nop_table = "auto"
trace_table = "auto"  # "" when the trace experiment is disabled
echo_table = "auto"  # "" when the echo experiment is disabled
send_zc_table = "auto"  # "" when the send_zc experiment did not run
epoll_wait_table = ""  # "" when it did not run; the reference data has none
epoll_ctl_table = ""  # "" when it did not run; the reference data has none
figure_dir = "results/by-hand/figures"
numbers_out = "results/by-hand/numbers/cost_model.json"
manifest_out = "results/by-hand/figures/cost_model.json"

# %% tags=["injected-parameters"]
# (papermill's values replace this cell)

# %%
import matplotlib.pyplot as plt

from iolab import tables
from iolab.estimation.intervals import ESTIMATOR
from iolab.report import numbers, plots
from iolab.report.outputs import Outputs
from iolab.rooms.cost_probes import cost_model as costmodel
from iolab.rooms.cost_probes import present_epoll_ctl as epoll_ctl_present
from iolab.rooms.cost_probes import steps as cost_probe_steps
from iolab.rooms.cost_probes import summaries as models
from iolab.rooms.echo import summaries as echostats
from iolab.rooms.send_zc import present as send_zc_present
from iolab.rooms.send_zc import stats as send_zc_stats

plots.style.apply()
sources = {
    "syscall": syscall_table,
    "sendrecv": sendrecv_table,
    "uring_batch": uring_batch_table,
    "nop": nop_table,
    "trace": trace_table,
    "echo": echo_table,
    "send_zc": send_zc_table,
    "epoll_wait": epoll_wait_table,
    "epoll_ctl": epoll_ctl_table,
}
out = Outputs("cost_model", figure_dir, numbers_out, manifest_out, tables=sources)
print(tables.describe_all(sources))
syscall = tables.load("syscall", syscall_table, reps=reps)
sendrecv = tables.load("sendrecv", sendrecv_table, reps=reps)
uring = tables.load("uring_batch", uring_batch_table, reps=reps)
nop = tables.load("nop", nop_table, reps=reps)
node = models.choose_node(syscall, node)
print(f"node {node}: {models.node_context(syscall, node)}; every interval: {ESTIMATOR}")

# %% [markdown]
# ## s: the null-syscall cost
# Each repetition is a separate process; its median over batches is one
# estimate, and the interval comes from the spread of those estimates.

# %%
measured = models.measured(syscall, node)
overall = models.median_summary(models.measured(syscall), by=["node", "variant"])
fig = plots.cost.syscall_cost_figure(measured, models.rows_of(overall, node))
out.figure(fig, "syscall_cost", data=measured)
plt.show()
overall

# %% [markdown]
# ## epoll_wait: what an epoll server pays to learn what is ready
# One epoll_wait with a zero timeout, beside *s*: over a readable eventfd it
# returns one event, over an idle one none.

# %%
epoll_wait = tables.load("epoll_wait", epoll_wait_table, reps=reps) if epoll_wait_table else None
if epoll_wait is not None:
    epoll_wait_medians = models.median_summary(models.measured(epoll_wait), by=["node", "variant"])
    print(epoll_wait_medians.drop(columns="estimate", errors="ignore").to_string())

# %% [markdown]
# ## epoll_ctl: what an epoll server pays to change what it waits for
# One EPOLL_CTL_MOD of a TCP socket, beside *s*: echo-epoll pays it when a
# send is short (adding EPOLLOUT) and again when the rest is written.

# %%
epoll_ctl = tables.load("epoll_ctl", epoll_ctl_table, reps=reps) if epoll_ctl_table else None
if epoll_ctl is not None:
    epoll_ctl_measured = models.measured(epoll_ctl, node)
    fig = epoll_ctl_present.figure(epoll_ctl_measured, models.measured(syscall, node))
    out.figure(fig, "epoll_ctl_cost", data=epoll_ctl_measured)
    plt.show()

# %% [markdown]
# ## s + w: send and recv
# `pingpong` is the echo-server regime (delayed ACKs ride on responses);
# `quickack` makes every recv that empties its queue send an ACK, which the
# round-robin pattern does on every call. Their difference is the ACK's cost.

# %%
sr = models.measured(sendrecv, node)
fig = plots.cost.sendrecv_figure(sr)
out.figure(fig, "sendrecv_cost", data=sr)
plt.show()
if cost_probe_steps.sentence(sr):
    out.text("sendrecv_steps", cost_probe_steps.sentence(sr))
models.median_summary(sr, by=["transport", "variant", "pattern", "ack", "bytes"])

# %% [markdown]
# ## t(n): one io_uring_enter with n SQEs
# Every SQE must complete inline for the interval to be *t*; the probe
# counts those that did not and fails above 1 %. The models are fitted to
# each repetition alone; the curves use each parameter's median over them.

# %%
per_rep_inputs = costmodel.per_rep_inputs(syscall, sendrecv, uring, node=node)
per_rep = costmodel.per_rep(per_rep_inputs)
summary = costmodel.summarize(per_rep)
inputs = costmodel.central_inputs(per_rep_inputs)
fig = plots.cost.uring_batch_figure(models.measured(uring, node), models.measured(nop, node), inputs)
out.figure(fig, "uring_batch_time", data=models.measured(uring, node))
plt.show()
print(models.inline_note(uring, node))
summary

# %% [markdown]
# ## Which model, and where io_uring would win
# Per echo request (one recv + one send). The floor is the kernel work alone,
# w_send + w_recv. AIC compares the models on the per-n medians. Where the
# echo experiment ran, the real servers' CPU per request is overlaid at the
# batch size n each one reached (its own counters), and the epoll request is
# extended by its event wait, amortised over the events each wait returned.

# %%
overlay = echostats.node_overlay(tables.load("echo", echo_table, reps=reps), node) if echo_table else None
fig = plots.cost.per_request_figure(inputs, summary, per_rep_inputs, overlay)
out.figure(fig, "cost_model_per_request", data=models.measured(uring, node))
plt.show()
overlay

# %% [markdown]
# ## Repeatability: per-repetition estimates

# %%
per_rep_point = models.per_rep_estimates(syscall, sendrecv, uring, node)
per_rep_point

# %% [markdown]
# ## How far our t(1) is from the source's
# The source timed io_submit_sqes alone; our t(1) is a whole io_uring_enter
# minus s. A bare enter (no SQE) beyond s bounds the part outside submission.

# %%
costmodel.enter_overhead(nop, syscall, node)

# %% [markdown]
# ## Zero-copy send against plain send
# SEND_ZC sends from the user's pages instead of copying them, and pays for
# pinning them and for a second completion. Both kinds of send, and SEND_ZC
# from a registered buffer, run interleaved in one process; the ratio is
# per repetition, then its median and 95 % interval. The kernel reports
# each send it had to copy after all (loopback and veth deliver locally,
# and a local receiver gets a copy).

# %%
send_zc = tables.load("send_zc", send_zc_table, reps=reps) if send_zc_table else None
zc_summary = send_zc_stats.ratios(send_zc, node) if send_zc is not None else None
if zc_summary is not None:
    fig = send_zc_present.figure(zc_summary)
    out.figure(fig, "send_zc_cost", data=models.measured(send_zc, node))
    plt.show()
    print(send_zc_stats.crossover_text(zc_summary))
zc_summary

# %% [markdown]
# ## Kernel-side view (bpftrace tracepoints)

# %%
kernel_view = models.kernel_view(tables.load("trace", trace_table, reps=reps), node) if trace_table else None
kernel_view

# %% [markdown]
# ## Numbers for the paper

# %%
numbers.cost_model(
    out,
    node=node,
    syscall=syscall,
    sendrecv=sendrecv,
    overall=overall,
    summary=summary,
    per_rep_point=per_rep_point,
    inputs=inputs,
    uring_batch_source=uring_batch_table,
    kernel_view=kernel_view,
    overlay=overlay,
    w_pattern=costmodel.w_pattern(per_rep_inputs),
    enter=costmodel.enter_overhead(nop, syscall, node),
    cost_per_rep=per_rep,
)
if zc_summary is not None:
    send_zc_present.numbers(out, zc_summary)
out.finish()
out.texts()
