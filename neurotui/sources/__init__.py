"""Parsers of what the tools and the training print: neuron-ls, neuron-monitor, neuron-top,
nvidia-smi and the job's step lines. Pure functions of text to records; they run nothing and
import nothing of neurotui's beyond each other (the collectors in collect/ run the tools)."""
