"""bench: latency of the student against BERT-base, and the report rendered from results.json.

Builds on pocketbert.core and export's runtime helpers; reads the export's files, never train's code.
"""
