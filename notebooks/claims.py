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
# verdict is decided by the 95 % interval of the median over repetitions:
# reproduced when the whole interval satisfies the claim, not reproduced
# when the whole interval contradicts it, undecided at this precision
# otherwise (with the number of repetitions expected to decide it).
# "No visible difference" claims use a ±5 % equivalence margin.

# %% tags=["parameters"]
syscall_table = "data/reference"   # each: a Parquet table, or a raw-data root
sendrecv_table = "data/reference"
uring_batch_table = "data/reference"
echo_table = "data/reference"      # "" when the echo experiment is disabled
mpi_table = "data/reference"       # "" when the MPI experiment is disabled
figure_dir = "results/by-hand/figures"
numbers_out = "results/by-hand/numbers/claims.json"
manifest_out = "results/by-hand/figures/claims.json"

# %%
import matplotlib.pyplot as plt

from iolab import tables
from iolab.analysis import claims, verdicts
from iolab.report import numbers, plotting
from iolab.report.outputs import Outputs

plotting.apply_style()
out = Outputs("claims", figure_dir, numbers_out, manifest_out,
              tables=[syscall_table, sendrecv_table, uring_batch_table, echo_table, mpi_table])
findings = claims.evaluate(tables.load("syscall", syscall_table), tables.load("sendrecv", sendrecv_table),
                           tables.load("uring_batch", uring_batch_table),
                           tables.load("echo", echo_table) if echo_table else None,
                           tables.load("mpi", mpi_table) if mpi_table else None)
print(verdicts.RULE_TEXT)
verdicts.table(findings)

# %% [markdown]
# ## Every finding against its threshold

# %%
fig = plotting.claims_forest_figure(findings)
out.figure(fig, "claims_forest", caption="Every testable claim part: our value and its 95 % interval "
           "across repetitions, divided by the claim's bound (1: the threshold; grey: an equivalence "
           "or agreement margin), coloured by verdict. Arrows: the interval continues beyond the axis "
           "or is unbounded (fewer than 6 repetitions).")
plt.show()

# %% [markdown]
# ## Numbers for the paper

# %%
numbers.claims_numbers(out, findings)
out.finish()
out.texts()
