"""ctest's entry to the package's tests (cmake/python_package_tests.cmake): pytest on this
folder, or exit 77 (ctest: skipped) when pytest cannot be imported. Arguments go to pytest."""
import os
import sys

try:
    import pytest
except ImportError:
    print("pytest cannot be imported by %s: the Python package's tests are skipped "
          "(scripts/setup installs it into the venv)" % sys.executable)
    sys.exit(77)

sys.exit(pytest.main([os.path.dirname(os.path.abspath(__file__)), "-q", "-p", "no:cacheprovider"] + sys.argv[1:]))
