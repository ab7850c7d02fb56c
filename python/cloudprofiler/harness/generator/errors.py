"""The error of the generator's emitters and transports."""


class GeneratorError(RuntimeError):
    """The generator could not run as asked (no consumer, consumer stopped taking buckets)."""
