"""Container images of the suite: catalogue, offline base, wheelhouse, build, run, save/load (Docker SDK).

`catalog` has no heavy imports; the rest import the Docker SDK (`docker`) and talk to an engine.
"""
