"""PyG's Batch, when torch_geometric is installed (``PyGBatch``, else
None), and :func:`pyg_batch`, which makes one without PyG's per-call
metaclass work: what AugloaderDataset(pyg=True) hands the training loop."""
from __future__ import annotations

try:  # optional
    from torch_geometric.data import Batch as PyGBatch  # type: ignore
except Exception:  # pragma: no cover - depends on the environment
    PyGBatch = None

_PYG_BATCH_CLASS = None  # the class PyGBatch(...) makes (DataBatch), once known
_PYG_SETTERS = frozenset()  # its properties with a setter other than Data's own


def pyg_batch(**fields):
    """PyGBatch(**fields), the same object, at a twentieth of its cost a
    batch (5 µs against 25 µs for its class called with the fields, about
    100 µs through PyGBatch, on PyG 2.8.1).

    PyG's Batch is made through a metaclass that, on every call, looks up
    (and on PyG 2.8 defines again) the class joining Batch and Data and
    reads Data.__init__'s signature: about 0.1 ms a batch, a tenth of what
    the trainer spends on one. The first call goes through it; later ones
    make that same class directly (type.__call__: its __new__ and an empty
    Data.__init__) and put the fields in its storage's mapping, which is
    what Data.__init__'s setattr of each comes to on a fresh object (a
    property lookup, Data's setter of x, edge_index, batch, y or edge_attr,
    which sets the storage's attribute, its cached-attribute check, the
    mapping's item). A field whose name is a property with any other
    setter (a later PyG's) goes through PyG's own __init__."""
    global _PYG_BATCH_CLASS, _PYG_SETTERS
    cls = _PYG_BATCH_CLASS
    if cls is None:
        out = PyGBatch(**fields)
        _PYG_BATCH_CLASS = cls = type(out)
        _PYG_SETTERS = frozenset(k for k in dir(cls) if _other_setter(getattr(cls, k, None), k))
        return out
    if not _PYG_SETTERS.isdisjoint(fields):
        return type.__call__(cls, **fields)
    out = type.__call__(cls)
    out._store._mapping.update((k, v) for k, v in fields.items() if v is not None)
    return out


def _other_setter(attr, name: str) -> bool:
    """Whether attr is a property whose setter is not Data's own for name
    (each of which only sets the storage's attribute)."""
    fset = getattr(attr, "fset", None)
    return fset is not None and getattr(fset, "__qualname__", "") != f"Data.{name}"
