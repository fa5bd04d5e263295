"""linear_cross_entropy: triton.py's chunked kernels with cublas.py's GEMMs registered, so that
`from kernelagent.kernels.linear_cross_entropy import linear_cross_entropy` (and kernelagent.ops) use
cuBLAS for the chunk GEMMs on the GPU. The verifier loads triton.py on its own (Triton GEMMs)."""

from kernelagent.kernels.linear_cross_entropy.cublas import LinearCrossEntropyLoss, linear_cross_entropy

__all__ = ["LinearCrossEntropyLoss", "linear_cross_entropy"]
