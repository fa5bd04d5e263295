"""`kernelagent batch`: verify or optimize many problems, one verifier worker set per GPU, resumable.

    problems = discover([Path("examples"), Path("kernelagent/kernels")])
    summary = BatchRunner(open_store(), problems, BatchOptions(mode="verify", gpus=[0, 1])).run()

Conventions for candidates (verify mode): beside `op.py` / `reference.py` / `problem.py` in a folder, the
files `kernel*.py`, `triton*.py`, `cute*.py`; beside any other problem file `NAME.py`, the files
`NAME_kernel*.py`, `NAME_triton*.py`, `NAME_cute*.py`. A KernelBench level folder is read as it is:
every file defining `Model` and `get_inputs` is a problem.

Each local shard is one process pinned to a GPU with CUDA_VISIBLE_DEVICES (its verifier workers
inherit it) that verifies one candidate at a time, so no two timing runs share a GPU. With `ray`, each
problem is one Ray task holding one GPU (or one CPU); the driver writes every result into the store.
"""

from kernelagent.tools.batch.discover import BatchProblem, candidates_of, discover, is_problem
from kernelagent.tools.batch.options import BatchError, BatchOptions
from kernelagent.tools.batch.runner import BatchRunner
from kernelagent.tools.batch.shards import Shard, shard_plan, shard_prepare, shard_verify

__all__ = ["BatchError", "BatchOptions", "BatchProblem", "BatchRunner", "Shard", "candidates_of", "discover",
           "is_problem", "shard_plan", "shard_prepare", "shard_verify"]
