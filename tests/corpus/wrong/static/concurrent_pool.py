# expect: threads
# A thread pool from concurrent.futures.
from concurrent.futures import ThreadPoolExecutor

import torch.nn as nn

_pool = ThreadPoolExecutor(max_workers=1)


class ModelNew(nn.Module):
    def forward(self, x):
        return _pool.submit(x.clone).result()
