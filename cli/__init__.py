"""The ``gpufinops`` command line: the top floor, calling into the domain parts."""
