"""The torch tests need torch (the `test` extra installs the CPU wheel); without it they are skipped."""
import pytest

pytest.importorskip("torch")
