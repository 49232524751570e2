"""Roofline: points (ncu kernels or analytical torch ops) under measured or datasheet roofs.

analysis  the points, their ridge classification and the log-log PNG
The job (`fleetbench roofline`) is fleetbench.profile.jobs.roofline.
"""
