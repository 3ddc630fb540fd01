"""The setups table's machine line (iolab.claims.setups): what each claim's
cells ran on, read from a table's per-row facts."""

from __future__ import annotations

import pandas as pd

from iolab.claims import setups


def test_the_machine_line_names_each_model_kind_and_kernel_once() -> None:
    rows = 5000
    table = pd.DataFrame(
        {
            "cpu_model": pd.array(["AMD EPYC", "Intel Xeon"] * (rows // 2), dtype="string[pyarrow]"),
            "cpus": [2] * rows,
            "kind": pd.array(["vm"] * rows, dtype="string[pyarrow]"),
            "kernel": pd.array(["6.18.0"] * (rows - 1) + ["6.1.0"], dtype="string[pyarrow]"),
        }
    )
    hardware, kernel = setups._machine(table)
    assert hardware == "AMD EPYC / Intel Xeon, 2 CPUs, vm"
    assert kernel == "6.1.0, 6.18.0"


def test_a_table_without_a_model_says_so() -> None:
    table = pd.DataFrame({"cpu_model": [""], "cpus": [4]})
    assert setups._machine(table) == ("CPU not recorded, 4 CPUs, ", "not recorded")
    assert setups._machine(None) == ("not measured", "not measured")
