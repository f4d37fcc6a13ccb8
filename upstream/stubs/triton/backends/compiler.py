"""`triton.backends.compiler` stand-in. Deliberately without `AttrsDescriptor`: torch then takes
its newest-Triton path and builds nothing from it."""


class BaseBackend:
    pass


class GPUTarget:
    def __init__(self, backend: str = "cpu", arch: object = 0, warp_size: int = 32) -> None:
        self.backend, self.arch, self.warp_size = backend, arch, warp_size
