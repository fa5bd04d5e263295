"""Pass/fail for the error rows that tests/helpers/interp_checks.py produces.

fp32 must match the float64 reference to 1e-5 norm-wise (1e-4 at the worst element), or 4x torch's
own fp32 error where that is larger (near one-hot softmax gradients cancel). bf16 keeps
8 bits of mantissa (unit roundoff u = 2**-8 = 3.9e-3): an output rounded once from fp32 math is
within u, but the CPU interpreter truncates fp32 -> bf16 (up to 2u), and gradients built from
rounded values lose more where they cancel. So, as the verifier does (kernelagent/verifier/compare.py),
bf16 may err up to 4x the reference's own bf16 error (`floor`) within [8e-3, 2e-2], and never
less than 2x that floor; the worst element up to 3e-2 or 4x the floor's worst element.
"""

from __future__ import annotations


def limits(row: dict) -> tuple[float, float]:
    """(norm-wise limit, worst-element limit) for one row."""
    floor, floor_peak = row["floor"], row["floor_peak"]
    if "float32" in row["ref_dtype"]:  # as for bf16: within [1e-5, 1e-4], and never below 2x torch's own error
        return max(min(1e-4, max(1e-5, 4 * floor)), 2 * floor), max(1e-4, 4 * floor_peak)
    return max(min(2e-2, max(8e-3, 4 * floor)), 2 * floor), max(3e-2, 4 * floor_peak)


def failure(row: dict) -> str | None:
    """Why this row fails (wrong dtype or shape, NaN, too large an error), or None."""
    if row["dtype"] != row["ref_dtype"] or row["shape"] != row["ref_shape"]:
        return f"got {row['dtype']} {row['shape']}, reference gives {row['ref_dtype']} {row['ref_shape']}"
    rel, peak = limits(row)
    if row["nan"] or not (row["rel"] <= rel and row["peak"] <= peak):
        return (f"rel {row['rel']:.2e} (limit {rel:.1e}), peak {row['peak']:.2e} (limit {peak:.1e}), "
                f"torch's own error {row['floor']:.2e}" + (", NaN" if row["nan"] else ""))
    return None
