"""Roofline: points (ncu kernels or analytical torch ops) under measured or datasheet roofs.

analysis  the points, their ridge classification and the log-log PNG
run       `fleetbench roofline`: a chart and record from an ncu report, a profile run, or peaks only
"""
