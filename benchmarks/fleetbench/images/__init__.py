"""Container images of the suite (Docker SDK): which images exist, how they are built, run and moved.

specs       the images, their variants and what running each needs; no heavy imports
base        the offline local base (debootstrap + docker import) of the cpu variants
emulation   whether another architecture's images run here (qemu-user-static through binfmt_misc)
wheelhouse  the wheels the images install, downloaded once and shared by every build
native_wheel  wheels PyPI has only as source, built once in a container on the image's own base
build       docker builds with progress, logs and cache
container   `images run`: a benchmark in its image, results mounted back (not a job: the job
            inside the container writes the record)
transfer    save and load images as tar files, for machines without a registry
engine      the connection to the Docker engine
"""
