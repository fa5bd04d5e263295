"""What a worker's `import torch, triton` costs with and without a bytecode cache (prints JSON).

Workers run with PYTHONDONTWRITEBYTECODE=1; where the installed packages ship no .pyc (the lent H200
image), every worker compiles torch's sources again. A cache under PYTHONPYCACHEPREFIX filled by a
trusted process and read by workers would remove that. Rounds: default environment, no bytecode
writes, and a prefix cache (first call fills it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

IMPORT = "import torch, triton"


def run(env: dict[str, str]) -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", IMPORT], env=env, check=True)
    return round(time.perf_counter() - t, 3)


def main() -> None:
    import torch

    site = Path(torch.__file__).parent
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    prefix = tempfile.mkdtemp(prefix="pyc-")
    out = {
        "torch_dir": str(site),
        "torch_has_pycache": (site / "__pycache__").is_dir(),
        "torch_dir_writable": os.access(site, os.W_OK),
        "no_write": [run({**base, "PYTHONDONTWRITEBYTECODE": "1"}) for _ in range(2)],
        "prefix_fill": run({**base, "PYTHONPYCACHEPREFIX": prefix}),
        "prefix_read": [run({**base, "PYTHONPYCACHEPREFIX": prefix, "PYTHONDONTWRITEBYTECODE": "1"})
                        for _ in range(3)],
        "default": [run(base) for _ in range(2)],  # last: it may write caches beside the sources
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
