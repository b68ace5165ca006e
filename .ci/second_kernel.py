"""Print an OpenBLAS core type other than the one numpy's OpenBLAS picks here, that this CPU can run.

CI reruns the numerically sensitive tests under it: a test whose answer depends on
the BLAS kernel's rounding fails before it lands, whatever CPU the next machine has. Prints
nothing when numpy's BLAS is not OpenBLAS or no second kernel fits.
"""

from pathlib import Path

import numpy  # noqa: F401  (loads the BLAS threadpoolctl inspects)
from threadpoolctl import threadpool_info

# (core type, CPU flag it needs), most capable first; every x86-64 CPU has SSE3 (Prescott)
KERNELS = [("SkylakeX", "avx512f"), ("Haswell", "avx2"), ("Sandybridge", "avx"), ("Prescott", "sse3")]


def main() -> None:
    blas = [i for i in threadpool_info() if i.get("internal_api") == "openblas"]
    if not blas:
        return
    current = (blas[0].get("architecture") or "").lower()
    try:
        flags = set(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        return
    flags.add("sse3" if "pni" in flags else "")
    for name, flag in KERNELS[1:] + KERNELS[:1]:  # prefer Haswell, the common denominator
        if name.lower() != current and flag in flags:
            print(name)
            return


if __name__ == "__main__":
    main()
