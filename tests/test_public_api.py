"""Each package's __init__ states its public API; every listed name must resolve."""
import importlib

import pytest


@pytest.mark.parametrize("package", ["convsim", "catalog", "evaluation", "agents"])
def test_exports_resolve(package):
    pkg = importlib.import_module(package)
    assert pkg.__all__
    for name in pkg.__all__:
        assert getattr(pkg, name) is not None, name
    with pytest.raises(AttributeError):
        getattr(pkg, "no_such_name")
