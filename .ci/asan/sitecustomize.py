"""The sanitizer tier's import hook (.ci/sanitize puts this directory first on
PYTHONPATH, so Python runs it at start-up, before any test or the fuzzer imports
anything): twin.mrc._fastpath becomes the AddressSanitizer and UBSan build named by
MRC_TWIN_FASTPATH_SO, never the normal one beside the sources (which stays untouched).
Without that variable it does nothing."""

import importlib.util
import os
import sys

_path = os.environ.get("MRC_TWIN_FASTPATH_SO")
if _path:
    import twin.mrc

    _spec = importlib.util.spec_from_file_location("twin.mrc._fastpath", _path)
    _module = importlib.util.module_from_spec(_spec)
    sys.modules["twin.mrc._fastpath"] = _module
    _spec.loader.exec_module(_module)
    twin.mrc._fastpath = _module
