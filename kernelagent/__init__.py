"""kernelagent: turn a PyTorch reference into a fast, verified Triton or CuTe DSL kernel."""

__version__ = "0.1.0"
