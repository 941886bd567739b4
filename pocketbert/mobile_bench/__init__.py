"""bench: latency of the student against BERT-base, estimates for named phones, and the reports rendered from
results.json.

Builds on pocketbert.core and export's program makers; reads the export's files, never train's code. cli.py (the
commands) stands over five wings, each importing only those below it: steps/ (the bench run), reports/, device/
(the kit and its import), estimates/ (phones) and timing/ (this machine).
"""
