from ._ops import ops


def probe(path: str) -> list[int]:
    return ops.probe(path)
