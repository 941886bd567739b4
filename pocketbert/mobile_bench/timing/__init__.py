"""Timing on this machine: the runners, latency statistics, the host's description, tokenization time and the BERT-base reference programs."""
