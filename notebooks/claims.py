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
# # The source articles' claims, re-tested
#
# Every claim of the paper's claims table, split into the parts that can be
# measured. Each part's quantity (a ratio of two configurations measured in
# the same repetition, or a cost) is estimated within every repetition; the
# verdict is decided by sign tests on those values, with each claim's error
# held to 2.5 % each way (iolab.claims.evidence): reproduced when the
# part's verdict interval satisfies the claim, not reproduced when it
# contradicts it after the adjustment over the claim's parts, undecided at
# this precision otherwise (with the repetitions expected to decide it).
# Each rule states its own margin.

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
echo_table = "auto"  # "" when the echo experiment is disabled
mpi_table = "auto"  # "" when the mpi experiment is disabled
ib_table = ""  # perftest (M1); "" when no node ran the ib experiment
trace_table = "auto"  # bpftrace counts (U5: io-wq use); "" when the trace experiment is disabled
anytime_after = 0  # adaptive precision is on, with a round 0 of this many repetitions: 0 if it is off
# Records of earlier launches the verdicts about the machine kind pool, read
# when the notebook runs (./repro figures re-reads them): "auto" the
# checkout's data/records/, "" none, or a folder.
records_dir = "auto"
figure_dir = "results/by-hand/figures"
numbers_out = "results/by-hand/numbers/claims.json"
manifest_out = "results/by-hand/figures/claims.json"

# %% tags=["injected-parameters"]
# (papermill's values replace this cell)

# %%
import matplotlib.pyplot as plt

from iolab import claims, tables
from iolab.claims import findings as parts
from iolab.claims import headline, setups, verdicts
from iolab.report import numbers, plots
from iolab.report.outputs import Outputs
from iolab.rooms.cost_probes import cost_model as costmodel
from iolab.rooms.cost_probes import summaries as models

plots.style.apply()
sources = {
    "syscall": syscall_table,
    "sendrecv": sendrecv_table,
    "uring_batch": uring_batch_table,
    "echo": echo_table,
    "mpi": mpi_table,
    "ib": ib_table,
    "trace": trace_table,
}
out = Outputs("claims", figure_dir, numbers_out, manifest_out, tables=sources)
print(tables.describe_all(sources))
syscall = tables.load("syscall", syscall_table, reps=reps)
echo = tables.load("echo", echo_table, reps=reps) if echo_table else None
mpi = tables.load("mpi", mpi_table, reps=reps) if mpi_table else None
sendrecv = tables.load("sendrecv", sendrecv_table, reps=reps)
uring = tables.load("uring_batch", uring_batch_table, reps=reps)
node = models.choose_node(syscall, node)
findings = claims.evaluate(
    syscall,
    sendrecv,
    uring,
    echo,
    mpi,
    node=node,
    ib=tables.load("ib", ib_table, reps=reps) if ib_table else None,
    trace=tables.load("trace", trace_table, reps=reps) if trace_table else None,
    anytime_after=anytime_after,
)
print(verdicts.RULE_TEXT)
parts.table(findings)

# %% [markdown]
# ## How each source measured, and how we did
#
# A verdict means most where the setups match: the systems, the machine,
# the load generator, where each process ran, and the cells.

# %%
setups.compared(syscall, echo, mpi, node)

# %% [markdown]
# ## io_uring against epoll on this machine
#
# The default ring over epoll in every cell of our setup: server CPU per
# request beside the cost model's prediction, and requests/s.

# %%
inputs = costmodel.per_rep_inputs(syscall, sendrecv, uring, node=node)
answer = headline.table(echo, inputs, node)
if len(answer):
    fig = plots.headline.figure(answer)
    out.figure(fig, "headline", data=models.rows_of(syscall, node))
    plt.show()
answer

# %% [markdown]
# ## Every finding against its threshold

# %%
fig = plots.claims.forest_figure(findings)
out.figure(fig, "claims_forest", data=models.rows_of(syscall, node))
plt.show()

# %% [markdown]
# ## Numbers for the paper

# %%
cost = costmodel.per_rep(inputs)
numbers.headline_numbers(out, answer)
numbers.claims_numbers(out, findings)
numbers.claim_scopes(out, findings, [syscall, sendrecv, uring, echo, mpi], syscall, node, records_dir)
numbers.claims_setups(out, syscall=syscall, echo=echo, mpi=mpi, node=node)
out.text("regime_sentence", numbers.regime_sentence(cost, models.node_context(syscall, node)["mitigations"]))
numbers.headline(out, findings=findings, syscall=syscall, cost=cost, echo=echo, node=node, answer=answer)
out.finish()
out.texts()
