"""neurotui: supervise, record and show torchrun training on Trainium, Inferentia, GPU or CPU."""

__version__ = "0.1.0"
