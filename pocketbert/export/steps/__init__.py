"""The export's steps and runners: plan, build/place/gate serially or in worker processes, record."""
