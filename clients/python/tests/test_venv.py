"""The venv's torch is the one the Makefile chose, and the tests' own
conditions agree with what the venv holds (issue #57: a .venv without
Debian's torch got PyPI's through ogb's requirement, and a Lightning test
ran there without Lightning and failed).

make test says which torch .venv was built with (AUGLOADER_VENV_TORCH:
"debian", Debian's python3-torch through --system-site-packages, or
"torch2", .venv-torch2's through a .pth file); run by hand, this skips."""
import importlib.util
import os
import pathlib

import pytest

from conftest import ROOT, need_torch

WANT = os.environ.get("AUGLOADER_VENV_TORCH")


def lock_version(name: str) -> str:
    for line in (ROOT / "tests" / "requirements-torch2.txt").read_text().splitlines():
        if line.startswith(name + "=="):
            return line.split("==", 1)[1].split()[0]
    raise AssertionError(f"tests/requirements-torch2.txt pins no {name}")


@pytest.mark.skipif(not WANT, reason="make test says which torch .venv holds (AUGLOADER_VENV_TORCH)")
def test_venv_holds_the_torch_make_chose():
    torch = need_torch()
    where = pathlib.Path(torch.__file__).resolve()
    if WANT == "debian":
        assert str(where).startswith("/usr/lib/python3/dist-packages/") and torch.__version__.startswith("1.13"), \
            f"make built .venv over Debian's torch 1.13; it imports torch {torch.__version__} from {where}"
    elif WANT == "torch2":
        assert ".venv-torch2" in where.parts and torch.__version__.split("+")[0] == lock_version("torch"), \
            f"make built .venv over .venv-torch2's torch {lock_version('torch')}; it imports {torch.__version__} from {where}"
    else:
        pytest.fail(f"AUGLOADER_VENV_TORCH={WANT!r}: want debian or torch2")
    # One torch: no second copy in the venv's own site-packages (PyPI's,
    # pulled by a dependency).
    import sysconfig
    own = pathlib.Path(sysconfig.get_paths()["purelib"]) / "torch"
    assert not own.exists(), f"{own}: a torch of the venv's own beside the chosen one"


def test_torch2_tests_run_where_their_tools_are():
    """test_edge's torch 2.x tests run exactly where torch 2.x, Lightning
    and torchdata are importable (they skipped on torch 2.x without
    Lightning only by luck of the import order before; under make
    test-torch2 they must run)."""
    torch = need_torch()
    import test_edge
    have = int(torch.__version__.split(".")[0]) >= 2 and all(
        importlib.util.find_spec(m) is not None for m in ("lightning", "torchdata"))
    assert test_edge.TORCH2_TOOLS == have, \
        f"test_edge runs its torch 2.x tests: {test_edge.TORCH2_TOOLS}; this venv has torch 2.x, Lightning and torchdata: {have}"
    if os.environ.get("AUGLOADER_TORCH2") == "1":
        assert have, "make test-torch2's venv lacks torch 2.x, Lightning or torchdata"
