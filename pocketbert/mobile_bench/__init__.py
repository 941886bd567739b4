"""mobile_bench: latency of the student against BERT-base, and the report rendered from results.json."""
