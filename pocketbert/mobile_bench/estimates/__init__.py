"""Estimates for named phones: model shape, roofline floors, device profiles, calibration against published measurements, placement verdicts."""
